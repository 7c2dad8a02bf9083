"""The command line, in-process and as the installed script."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import toolwire
from toolwire.cli import main

from .replies import TOOLS, VALID

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"


def run(
    args: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    stdin: str = "",
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_detect(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = run(["detect", str(FIXTURES / "Qwen3-Coder.jinja")], capsys, monkeypatch)
    assert (code, out) == (0, "qwen-xml\n")
    code, out, _ = run(
        ["detect", "--json", str(FIXTURES / "microsoft-Phi-3.5-mini-instruct.jinja")],
        capsys,
        monkeypatch,
    )
    first, rest = out.split("\n", 1)
    assert first == "none" and json.loads(rest)["format"] == "none"


def test_detect_json_details(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = FIXTURES / "Qwen3.5-4B.jinja"
    _, out, _ = run(["detect", "--json", str(path)], capsys, monkeypatch)
    details = json.loads(out.split("\n", 1)[1])
    assert details["format"] == "qwen-xml" and details["reasoning_open"] is True
    assert "<function=get_weather>" in details["call_text"]


def test_detect_missing_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run(["detect", "/nonexistent/x.jinja"], capsys, monkeypatch)
    assert code == 2 and out == "" and err.startswith("toolwire: error:")


def test_render(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_x",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_x", "content": "rain"},
    ]
    (tmp_path / "m.json").write_text(json.dumps(messages))
    (tmp_path / "t.json").write_text(json.dumps(TOOLS[:1]))
    # Mistral's template demands 9-alphanumeric ids: the detected family asks for them.
    path = FIXTURES / "mistralai-Mistral-Nemo-Instruct-2407.jinja"
    code, out, err = run(
        [
            "render",
            str(path),
            "--messages",
            str(tmp_path / "m.json"),
            "--tools",
            str(tmp_path / "t.json"),
        ],
        capsys,
        monkeypatch,
    )
    assert code == 0, err
    assert '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}' in out
    assert "rain" in out and "[AVAILABLE_TOOLS]" in out


def test_render_bad_messages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "m.json").write_text("{not json")
    code, _, err = run(
        ["render", str(FIXTURES / "Qwen3-Coder.jinja"), "--messages", str(tmp_path / "m.json")],
        capsys,
        monkeypatch,
    )
    assert code == 2 and "not JSON" in err


@pytest.mark.parametrize("chunk", [0, 1, 4, 1000])
def test_parse(
    chunk: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "t.json").write_text(json.dumps(TOOLS))
    reply = VALID["hermes"][1][0]
    args = ["parse", "--format", "hermes", "--tools", str(tmp_path / "t.json")]
    if chunk:
        args += ["--chunk", str(chunk)]
    code, out, _ = run(args, capsys, monkeypatch, stdin=reply)
    data = json.loads(out)
    assert code == 0 and data["content"] == "Let me check.\n\n\n"
    assert [c["name"] for c in data["calls"]] == ["get_weather", "write_file", "set_flags"]
    assert data["calls"][0]["arguments"] == {"city": "Paris", "days": 3}
    assert all(len(c["id"]) == 9 for c in data["calls"])


def _parse_json(
    args: list[str],
    reply: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, Any]:
    (tmp_path / "t.json").write_text(json.dumps(TOOLS))
    args = ["parse", *args]
    if "--tools" in args:
        args[args.index("--tools") + 1] = str(tmp_path / "t.json")
    code, out, _ = run(args, capsys, monkeypatch, stdin=reply)
    assert code == 0
    data: dict[str, Any] = json.loads(out)
    return data


WORDS_REPLY = (
    'Sure.\n<tool_call>\n{name: "get_weather", parameters: {city: "Paris", days: "3"},}\n'
    "</tool_call>\nDone."
)


@pytest.mark.parametrize("chunk", [[], ["--chunk", "3"]])
def test_parse_words_types_the_arguments_and_names_the_repairs(
    chunk: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = ["--format", "words", "--tools", "-", *chunk]
    data = _parse_json(args, WORDS_REPLY, tmp_path, capsys, monkeypatch)
    assert data["content"] == "Sure.\n\nDone."
    # every tolerance the reader for words used is named
    assert data["notices"] == [
        "the call to get_weather was read with repairs: bare-keys, trailing-comma",
        "the call to get_weather gave its arguments under another key or as text",
    ]
    ((call),) = data["calls"]
    assert call["name"] == "get_weather"
    assert call["arguments"] == {"city": "Paris", "days": 3}
    assert call["repairs"] == ["number-from-string"] and call["dropped"] == []


def test_parse_without_tools_prints_the_arguments_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _parse_json(["--format", "words"], WORDS_REPLY, tmp_path, capsys, monkeypatch)
    assert data["calls"][0]["arguments"] == {"city": "Paris", "days": "3"}
    assert "repairs" not in data["calls"][0]


def test_parse_qwen_xml_types_text_values_by_the_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    reply = (
        "<tool_call>\n<function=set_flags>\n<parameter=enabled>\nFalse\n</parameter>\n"
        "<parameter=ratio>\n0.5\n</parameter>\n</function>\n</tool_call>"
    )
    typed = _parse_json(
        ["--format", "qwen-xml", "--tools", "-"], reply, tmp_path, capsys, monkeypatch
    )
    (call,) = typed["calls"]
    assert call["arguments"] == {"enabled": False, "ratio": 0.5}
    assert call["repairs"] == ["python-literals"]
    as_written = _parse_json(["--format", "qwen-xml"], reply, tmp_path, capsys, monkeypatch)
    assert as_written["calls"][0]["arguments"] == {"enabled": "False", "ratio": "0.5"}


def test_parse_arguments_that_do_not_fit_are_printed_as_written_with_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    reply = (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "days": "x"}}\n'
        '</tool_call><tool_call>\n{"name": "launch", "arguments": {"n": "1"}}\n</tool_call>'
    )
    data = _parse_json(["--format", "hermes", "--tools", "-"], reply, tmp_path, capsys, monkeypatch)
    weather, launch = data["calls"]
    assert weather["arguments"] == {"city": "Oslo", "days": "x"} and weather["repairs"] == []
    assert launch["arguments"] == {"n": "1"}
    first, second = data["notices"]
    assert first.startswith("The arguments for get_weather don't fit") and "days" in first
    assert second == "launch is not one of the tools given: its arguments are as written"


def test_parse_words_as_a_command(tmp_path: Path) -> None:
    # the command as a user runs it, in its own process, from this source tree
    (tmp_path / "t.json").write_text(json.dumps(TOOLS))
    env = {**os.environ, "PYTHONPATH": str(Path(toolwire.__file__).parents[1])}
    command = [sys.executable, "-m", "toolwire", "parse", "--format", "words"]
    done = subprocess.run(
        [*command, "--tools", str(tmp_path / "t.json"), "--chunk", "4"],
        input='```json\n{"name": "get_weather", "arguments": {"city": "Lima", "days": 2.0}}\n```',
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    data = json.loads(done.stdout)
    assert data["content"] == ""
    assert [(c["name"], c["arguments"]) for c in data["calls"]] == [
        ("get_weather", {"city": "Lima", "days": 2})
    ]
    assert data["calls"][0]["repairs"] == ["integer-from-float"]


def test_parse_unknown_format(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["parse", "--format", "harmony"])
    assert "unknown tool format 'harmony'" in capsys.readouterr().err


def test_installed_script() -> None:
    exe = shutil.which("toolwire")
    assert exe, "the package is installed with its console script"
    done = subprocess.run(
        [exe, "parse", "--format", "llama3", "--chunk", "3"],
        input='{"name": "f", "parameters": {"a": 1}}',
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout)["calls"][0]["arguments"] == {"a": 1}


def test_detect_a_gguf_model(
    qwen_gguf: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = run(["detect", "--json", str(qwen_gguf)], capsys, monkeypatch)
    first, rest = out.split("\n", 1)
    assert code == 0 and first == "hermes"
    assert json.loads(rest)["source"] == str(qwen_gguf)


@pytest.mark.parametrize(
    "name",
    [
        "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",  # past calls only beside None content
        "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
        "meta-llama-Llama-3.1-8B-Instruct.jinja",  # one call per message
        "microsoft-Phi-3.5-mini-instruct.jinja",  # no tool format: the tools in words
        "Qwen3.5-4B.jinja",  # thinking: off unless asked, as the engine sends it
    ],
)
def test_render_prints_the_prompt_the_local_engine_sends(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolwire.backends.llamacpp import LlamaCppBackend
    from toolwire.pipeline import Request, planned
    from toolwire.testing import ScriptedLlama

    calls = [
        {
            "id": f"call{n}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": city})},
        }
        for n, city in enumerate(("Oslo", "Lima"))
    ]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Weather in Oslo and Lima?"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call0", "content": "rain"},
        {"role": "tool", "tool_call_id": "call1", "content": "sun"},
        {"role": "user", "content": "And tomorrow?"},
    ]
    (tmp_path / "m.json").write_text(json.dumps(messages))
    (tmp_path / "t.json").write_text(json.dumps(TOOLS[:1]))
    code, out, err = run(
        [
            "render",
            str(FIXTURES / name),
            "--messages",
            str(tmp_path / "m.json"),
            "--tools",
            str(tmp_path / "t.json"),
        ],
        capsys,
        monkeypatch,
    )
    assert code == 0, err
    source = (FIXTURES / name).read_text(encoding="utf-8")
    backend = LlamaCppBackend(name, llama=ScriptedLlama(source))
    sent, plan = planned(backend, Request(messages, TOOLS[:1]))
    sends = backend.prompt(sent, plan)
    assert out.rstrip("\n") == sends.rstrip("\n")
    # the past calls reach the model (R1's distills write them only beside None content)
    assert "Lima" in sends
