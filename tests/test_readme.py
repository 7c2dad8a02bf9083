"""Docs that run: the README's Python and shell examples, executed as a new user would.

Every ```python block runs; the one that talks to ``toolwire serve`` runs against the gateway
served here in front of the real local model (its URL swapped in), and the tool-loop example
runs on the real local model as written. Every ```sh block runs line by line from the
repository's root, except the quick start's install commands (they install; this is the
test command itself). The ```text block after ``toolwire args`` is exactly what that command
prints.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolwire.server import create_app
from toolwire.testing import ServedApp

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.M | re.S)


def blocks(language: str) -> list[str]:
    return [m.group(2) for m in BLOCK.finditer(README) if m.group(1) == language]


def _is_install(block: str) -> bool:
    return "pip install" in block or "scripts/test" in block


def _toolwire(line: str) -> list[str]:
    """A README command line as argv, the installed script replaced by this interpreter."""
    argv = shlex.split(line, comments=True)
    assert argv[0] == "toolwire", line
    return [sys.executable, "-m", "toolwire", *argv[1:]]


def _run(line: str) -> subprocess.CompletedProcess[str]:
    """One shell line (``cmd < file`` at most), run from the repository's root."""
    command, _, stdin_path = line.partition(" < ")
    stdin_path = stdin_path.split("#", 1)[0].strip()
    stdin = (ROOT / stdin_path).read_text() if stdin_path else ""
    return subprocess.run(
        _toolwire(command),
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )


def _shell_lines() -> list[str]:
    lines = []
    for block in blocks("sh"):
        if _is_install(block):
            continue
        lines += [ln for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]
    return lines


def test_the_readme_has_the_examples_this_test_runs() -> None:
    assert any("OpenAI(base_url=" in b for b in blocks("python"))
    assert any("run_loop_sync" in b for b in blocks("python"))
    assert len(_shell_lines()) >= 5
    assert sum(_is_install(b) for b in blocks("sh")) == 1  # only the quick start is skipped


@pytest.mark.parametrize("line", [ln for ln in _shell_lines() if "toolwire chat" not in ln])
def test_each_command_line_example_runs(line: str) -> None:
    done = _run(line)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    expected = re.search(r"# the family: (\S+)", line)
    if expected:
        assert done.stdout.splitlines()[0] == expected.group(1)


def test_the_chat_example_runs_the_calculator_on_the_real_model(qwen_gguf: Path) -> None:
    (line,) = [ln for ln in _shell_lines() if "toolwire chat" in ln]
    done = _run(line)
    assert done.returncode == 0, done.stderr
    assert "→ calculator(" in done.stdout
    assert "← 391" in done.stdout


def test_the_args_explanation_is_what_the_command_prints() -> None:
    command = re.search(r"`(toolwire args [^`]*bad_arguments[^`]*)`", README)
    assert command is not None
    done = _run(command.group(1))
    assert done.returncode == 1
    (shown,) = [b for b in blocks("text") if "don't fit" in b]
    assert done.stdout == shown


def _exec(code: str) -> None:
    exec(compile(code, str(ROOT / "README.md"), "exec"), {"__name__": "readme"})


def test_the_openai_client_example_calls_a_tool_through_the_gateway(
    llama_backend: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    (code,) = [b for b in blocks("python") if "OpenAI(base_url=" in b and "Anthropic(" not in b]
    assert "http://127.0.0.1:8000/v1" in code  # where `toolwire serve` listens
    with ServedApp(create_app(llama_backend, model_name="toolwire")) as served:
        _exec(code.replace("http://127.0.0.1:8000/v1", served.url + "/v1"))
    out = capsys.readouterr().out
    assert "name='get_weather'" in out and "Paris" in out


def test_the_responses_and_messages_example_calls_a_tool_through_the_gateway(
    llama_backend: Any,
) -> None:
    (code,) = [b for b in blocks("python") if "Anthropic(" in b]
    with ServedApp(create_app(llama_backend, model_name="toolwire")) as served:
        code = code.replace("http://127.0.0.1:8000/v1", served.url + "/v1")
        space: dict[str, Any] = {"__name__": "readme"}
        exec(compile(code.replace("http://127.0.0.1:8000", served.url), "README.md", "exec"), space)
    (call,) = [o for o in space["response"].output if o.type == "function_call"]
    assert call.name == "get_weather" and "oslo" in call.arguments.lower()
    message = space["message"]
    (use,) = [b for b in message.content if b.type == "tool_use"]
    assert message.stop_reason == "tool_use" and use.input["city"].lower() == "oslo"


def test_the_tool_loop_example_runs_on_the_real_model(
    qwen_gguf: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (code,) = [b for b in blocks("python") if "run_loop_sync" in b]
    _exec(code)
    lines = capsys.readouterr().out.splitlines()
    runs = [ln for ln in lines if ln.startswith("ToolRun(")]
    results = [ln for ln in lines if ln.startswith("ToolResult(")]
    # at temperature 0 the default model, given the result, writes get_weather(Paris, 3)
    # again: the pipeline drops that repeat, names it, and asks once more without tools;
    # the answer ends the reply
    assert len(runs) == 1
    assert "name='get_weather', arguments={'city': 'Paris', 'days': 3}" in runs[0]
    assert len(results) == 1 and '"forecast": "sunny"' in results[0]
    assert sum(ln.startswith("Notice(code='repeated-call'") for ln in lines) == 1
    assert not any("calls-after-bound" in ln for ln in lines)
    after = lines[next(i for i, ln in enumerate(lines) if "repeated-call" in ln) :]
    answer = "".join(
        ast.literal_eval(ln[len("TextDelta(text=") : -1])  # the repr of the text
        for ln in after
        if ln.startswith("TextDelta(")
    )
    assert "sunny" in answer and "{" not in answer
    assert lines[-1].startswith("Done(finish_reason='stop'")


def test_every_other_python_example_runs() -> None:
    others = [
        b
        for b in blocks("python")
        if "OpenAI(base_url=" not in b and "run_loop_sync" not in b and "Anthropic(" not in b
    ]
    for code in others:
        _exec(code)
