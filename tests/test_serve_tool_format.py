"""``serve --tool-format FAMILY`` and a config entry's ``tool_format``: passed into the local
model's spec, and an unknown family told at start, naming the setting, not by a 400 on each
request; and ``serve``'s default context, the model's trained one within memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolwire.backends import OpenAIBackend
from toolwire.backends.context import agent_context, model_shape
from toolwire.backends.factory import BackendSpec
from toolwire.cli import _parser, main
from toolwire.cli.serve import served_models
from toolwire.errors import GGUFError, UsageError
from toolwire.server import create_app
from toolwire.server.config import read_config
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


ASK = [{"role": "user", "content": "Weather in Paris?"}]


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(text)
    return path


def test_an_unknown_family_is_told_at_start_naming_the_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["serve", "--tool-format", "hermez"]) == 2
    err = capsys.readouterr().err
    assert "--tool-format 'hermez' is not a tool format" in err and "hermes" in err


def test_the_flag_names_an_upstream_s_family_too() -> None:
    args = _parser().parse_args(
        ["serve", "--upstream", "http://127.0.0.1:9/v1", "--tool-format", "hermes"]
    )
    models = served_models(args)
    specs = [e.spec for e in models.entries.values()] + [models._passed and models._passed.spec]
    assert any(s is not None and s.kind == "openai" and s.tool_format == "hermes" for s in specs)


#: A text-writing model's call, as an engine that reads no calls leaves it in the content.
HERMES = (
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris, in France"}}\n</tool_call>'
)


def _argument_pieces(path: str, lines: list[str]) -> list[str]:
    """The pieces of the call's arguments a streamed reply carried, in order."""
    events = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    if path == "/v1/chat/completions":
        return [
            call["function"]["arguments"]
            for e in events
            for choice in e.get("choices", ())
            for call in choice.get("delta", {}).get("tool_calls") or ()
            if call.get("function", {}).get("arguments")
        ]
    if path == "/v1/responses":
        return [
            e["delta"] for e in events if e.get("type") == "response.function_call_arguments.delta"
        ]
    return [
        e["delta"]["partial_json"]
        for e in events
        if e.get("type") == "content_block_delta" and e["delta"].get("type") == "input_json_delta"
    ]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/v1/messages"])
def test_an_upstream_s_text_calls_stream_as_written(path: str) -> None:
    """An upstream whose model writes Hermes tags in its content, named with
    ``--tool-format hermes``: the call's arguments reach the client in pieces as the upstream
    writes them, not whole at the reply's end."""
    bodies = {
        "/v1/chat/completions": {"messages": ASK, "tools": [WEATHER]},
        "/v1/responses": {"input": ASK, "tools": [{"type": "function", **WEATHER["function"]}]},
        "/v1/messages": {
            "messages": ASK,
            "max_tokens": 99,
            "tools": [{"name": "get_weather", "input_schema": WEATHER["function"]["parameters"]}],
        },
    }
    pieces = {}
    for tool_format in (None, "hermes"):
        with FakeOpenAIServer() as fake:
            fake.add_stream(text_deltas(HERMES, size=4))
            backend = OpenAIBackend("m", base_url=fake.base_url, tool_format=tool_format)
            with ServedApp(create_app(backend, model_name="gw")) as served:
                sent = {"model": "gw", "stream": True, **bodies[path]}
                with httpx.stream("POST", served.url + path, json=sent, timeout=30) as r:
                    assert r.status_code == 200
                    lines = list(r.iter_lines())
        pieces[tool_format] = _argument_pieces(path, lines)
        assert json.loads("".join(pieces[tool_format])) == {"city": "Paris, in France"}
    assert len(pieces[None]) <= 2  # held whole until the reply ended, then read
    assert len(pieces["hermes"]) >= 4, pieces


def test_a_config_entry_takes_tool_format(tmp_path: Path) -> None:
    path = _config(tmp_path, "[[models]]\nname = 'a'\ngguf = 'x.gguf'\ntool_format = 'mistral'\n")
    (entry,) = read_config(path)
    assert entry.spec is not None and entry.spec.tool_format == "mistral"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("gguf = 'x'\ntool_format = 'hermez'\n", r"models\[0\]\.tool_format 'hermez' is not"),
        ("gguf = 'x'\ntool_format = 3\n", r"models\[0\]\.tool_format must be a non-empty"),
        ("upstream = 'http://x'\nupstream_model = 'm'\ntool_format = 'hermez'\n", "hermez"),
    ],
)
def test_a_bad_tool_format_in_a_config_is_told_at_start(
    tmp_path: Path, text: str, says: str
) -> None:
    with pytest.raises(UsageError, match=says):
        read_config(_config(tmp_path, "[[models]]\nname = 'a'\n" + text))


def test_a_spec_refuses_an_unknown_family() -> None:
    with pytest.raises(UsageError, match="tool_format 'x' is not a tool format"):
        BackendSpec("local", tool_format="x")


def test_config_and_flags_are_not_mixed(tmp_path: Path) -> None:
    path = _config(tmp_path, "[[models]]\nname = 'a'\ngguf = 'x.gguf'\n")
    for extra in (["--ctx", "8192"], ["--tool-format", "hermes"]):
        args = _parser().parse_args(["serve", "--config", str(path), *extra])
        with pytest.raises(UsageError, match="--config lists the models"):
            served_models(args)


def test_the_default_context_is_the_trained_one_within_memory(qwen_gguf: Path) -> None:
    shape = model_shape(qwen_gguf)
    assert shape.trained == 32768  # qwen2.5-coder-0.5b's qwen2.context_length
    # 24 layers x 2 key/value heads x (64 + 64) wide x 2 bytes
    assert shape.kv_bytes_per_token == 24 * 2 * 128 * 2
    assert agent_context(qwen_gguf, memory=64 << 30) == 32768
    # where a quarter of memory holds less, the context is cut to what it holds
    one_gib = agent_context(qwen_gguf, memory=1 << 30)
    assert one_gib == (1 << 28) // shape.kv_bytes_per_token // 256 * 256 == 21760
    # and never below the 4096 it was
    assert agent_context(qwen_gguf, memory=1 << 20) == 4096


def test_a_header_cut_short_is_a_gguf_error(qwen_gguf: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    with qwen_gguf.open("rb") as whole:
        cut.write_bytes(whole.read(4096))
    with pytest.raises(GGUFError, match=r"cut short|runs past"):
        model_shape(cut)
    other = tmp_path / "other.gguf"
    other.write_bytes(b"NOPE" + bytes(64))
    with pytest.raises(GGUFError, match="not a GGUF file"):
        model_shape(other)


def _served_local(args: list[str]) -> Any:
    pytest.importorskip("llama_cpp", reason="the local extra: pip install 'toolwire[local]'")
    return served_models(_parser().parse_args(["serve", *args]))


def test_serve_passes_the_family_into_the_local_model(qwen_gguf: Path) -> None:
    """With --tool-format none the tools go in words: the gateway's reply says so, over
    real HTTP, from the real model; the default context is the trained one."""
    models = _served_local(["--model", str(qwen_gguf), "--tool-format", "none"])
    with ServedApp(create_app(models)) as served:
        r = httpx.post(
            served.url + "/v1/chat/completions",
            json={
                "model": "m",
                "messages": [{"role": "user", "content": "Weather in Oslo?"}],
                "tools": [WEATHER],
                "max_tokens": 1,
            },
            timeout=300,
        )
        assert r.status_code == 200, r.text
        codes = [n["code"] for n in r.json()["toolwire"]["notices"]]
        assert "tools-in-words" in codes
        backend = models._ready[models.names()[0]]
        assert backend.family is None
        assert backend.n_ctx == agent_context(qwen_gguf)
