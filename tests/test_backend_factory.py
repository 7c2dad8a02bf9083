"""One backend factory for chat, serve and bench: a spec from flags or a config entry, and
Ollama's native API reached from each, against a fake Ollama over real HTTP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

import toolwire
from toolwire.backends import OllamaBackend, OpenAIBackend
from toolwire.backends.factory import DEFAULT_OLLAMA_URL, BackendSpec, build_backend
from toolwire.cli import _parser, main
from toolwire.cli.common import OLLAMA_URL, backend_spec
from toolwire.cli.serve import served_models
from toolwire.errors import UsageError
from toolwire.server import create_app
from toolwire.server.config import read_config
from toolwire.testing import FakeOpenAIServer, ServedApp

from .replies import TOOLS
from .serving import wait_healthy

WEATHER = TOOLS[0]  # get_weather(city, days)
ASK: Any = [{"role": "user", "content": "Weather in Paris for 3 days?"}]


@pytest.fixture
def ollama() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def _queue_round_trip(fake: FakeOpenAIServer) -> None:
    """A call to get_weather, then an answer in words once its result is back."""
    call = {"function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}
    fake.add_ollama(
        [{"content": ""}, {"content": "", "tool_calls": [call]}],
        prompt_eval_count=30,
        eval_count=9,
    )
    fake.add_ollama([{"content": "Sunny "}, {"content": "in Paris."}], eval_count=4)


def _round_trip(client: openai.OpenAI, model: str, fake: FakeOpenAIServer) -> None:
    """A Chat Completions round trip with a tool through the gateway, and what reached the
    fake Ollama: its native request, the result sent back in its own encoding."""
    tools: Any = [WEATHER]
    first = client.chat.completions.create(model=model, messages=ASK, tools=tools)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    function: Any = call.function
    assert function.name == "get_weather"
    assert json.loads(function.arguments) == {"city": "Paris", "days": 3}
    assert first.usage is not None and first.usage.prompt_tokens == 30
    messages: list[Any] = [
        *ASK,
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": '{"sky": "sunny"}'},
    ]
    stream = client.chat.completions.create(
        model=model, messages=messages, tools=tools, stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Sunny in Paris."
    sent, back = fake.requests
    assert sent["model"] == back["model"] == "qwen3"
    assert sent["tools"][0]["function"]["name"] == "get_weather"
    assert back["messages"][1]["tool_calls"] == [
        {"function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}
    ]
    assert back["messages"][2] == {
        "role": "tool",
        "content": '{"sky": "sunny"}',
        "tool_name": "get_weather",
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_ollama_stands_before_ollama(ollama: FakeOpenAIServer, tmp_path: Path) -> None:
    """The real ``toolwire serve --ollama URL --model NAME``, in its own process."""
    _queue_round_trip(ollama)
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(toolwire.__file__).parents[1])}
    log_path = tmp_path / "serve.log"
    command = [sys.executable, "-m", "toolwire", "serve", "--ollama", ollama.ollama_url]
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [*command, "--model", "qwen3", "--port", str(port), "--no-store"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    root = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, root, log_path)
        client = openai.OpenAI(base_url=root + "/v1", api_key="x", max_retries=0, timeout=30)
        _round_trip(client, "any-name", ollama)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_config_entry_reaches_ollama(ollama: FakeOpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "models.toml"
    path.write_text(
        f'[[models]]\nname = "local-qwen"\nollama = "{ollama.ollama_url}"\n'
        'upstream_model = "qwen3"\n'
    )
    (entry,) = read_config(path)
    assert entry.spec == BackendSpec("ollama", model="qwen3", base_url=ollama.ollama_url)
    _queue_round_trip(ollama)
    args = _parser().parse_args(["serve", "--config", str(path)])
    with ServedApp(create_app(served_models(args))) as served:
        client = openai.OpenAI(base_url=served.url + "/v1", api_key="x", max_retries=0)
        assert [m.id for m in client.models.list()] == ["local-qwen"]
        _round_trip(client, "local-qwen", ollama)


def test_serve_ollama_without_a_model_passes_each_clients_on(ollama: FakeOpenAIServer) -> None:
    args = _parser().parse_args(["serve", "--ollama", ollama.ollama_url])
    with ServedApp(create_app(served_models(args))) as served:
        for name in ("qwen3", "llama3.2"):
            ollama.add_ollama([{"content": "ok"}])
            r = httpx.post(
                served.url + "/v1/chat/completions",
                json={"model": name, "messages": ASK},
            )
            assert r.status_code == 200 and r.json()["model"] == name
    assert [q["model"] for q in ollama.requests] == ["qwen3", "llama3.2"]


def test_bench_ollama_runs_and_reports(
    ollama: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = tmp_path / "set.json"
    prompts.write_text(
        json.dumps(
            {
                "name": "mini",
                "version": 1,
                "tools": [WEATHER],
                "cases": [
                    {
                        "id": "call",
                        "prompt": "Paris?",
                        "expect": {"call": "get_weather", "args": {"city": {"equals": "Paris"}}},
                    },
                    {"id": "chat", "prompt": "Hi!", "expect": {"call": None}},
                ],
            }
        )
    )
    call = {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    ollama.add_ollama([{"content": "", "tool_calls": [call]}])
    ollama.add_ollama([{"content": "Hello!"}])
    book = tmp_path / "lab.jsonl"
    argv = ["bench", "--ollama", ollama.ollama_url, "--model", "qwen3", "--prompts", str(prompts)]
    assert main([*argv, "--json", "--labbook", str(book)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rates"]["call_rate"] == 1.0 and report["rates"]["arguments_correct"] == 1.0
    assert report["rates"]["false_calls"] == 0.0 and report["counts"]["request_errors"] == 0
    assert [q["model"] for q in ollama.requests] == ["qwen3", "qwen3"]
    assert all(q["tools"][0]["function"]["name"] == "get_weather" for q in ollama.requests)
    entry = json.loads(book.read_text())
    assert entry["engine"] == f"ollama {ollama.ollama_url}"
    assert entry["model"] == "qwen3" and entry["base_url"] == ollama.ollama_url


def test_flags_make_the_same_spec_in_every_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert OLLAMA_URL == DEFAULT_OLLAMA_URL
    chat = backend_spec(ollama=OLLAMA_URL, model="qwen3")
    assert chat == BackendSpec("ollama", model="qwen3", base_url=OLLAMA_URL)
    remote = backend_spec(base_url="http://h/v1", model="m")
    assert remote.kind == "openai" and remote.key() == "from-env"
    assert "from-env" not in repr(remote)  # a key is never shown
    local = backend_spec(local="tiny.gguf", ctx=2048, tool_format="hermes")
    assert local == BackendSpec("local", model="tiny.gguf", ctx=2048, tool_format="hermes")
    with pytest.raises(UsageError, match="--ollama needs --model NAME"):
        backend_spec(ollama=OLLAMA_URL)
    with pytest.raises(UsageError, match="--upstream needs --upstream-model NAME"):
        backend_spec(base_url="http://h", url_flag="--upstream", model_flag="--upstream-model")
    with pytest.raises(UsageError, match="not both"):
        backend_spec(ollama=OLLAMA_URL, base_url="http://h", model="m")
    with pytest.raises(UsageError, match="--words needs"):
        backend_spec(words=True)


def test_the_factory_builds_each_kind_and_shares_a_pool_per_server() -> None:
    clients: dict[str, Any] = {}
    spec = BackendSpec("ollama", model="qwen3", base_url="http://127.0.0.1:9", timeout=5.0)
    one = build_backend(spec, clients=clients)
    two = build_backend(BackendSpec("ollama", model="llama3.2", base_url="http://127.0.0.1:9/"))
    assert isinstance(one, OllamaBackend) and one.model == "qwen3" and not two.words
    again = build_backend(spec, clients=clients)
    assert list(clients) == ["http://127.0.0.1:9"] and again._client is one._client
    openai_backend = build_backend(
        BackendSpec("openai", model="m", base_url="http://h/v1", api_key="k", dialect="openai"),
        clients=clients,
    )
    assert isinstance(openai_backend, OpenAIBackend) and openai_backend.dialect == "openai"
    assert len(clients) == 2
    with pytest.raises(UsageError, match="needs the model's name"):
        build_backend(BackendSpec("openai", base_url="http://h/v1"))


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"kind": "remote"}, "one of local, openai, ollama"),
        ({"kind": "ollama", "model": "m", "api_key": "k"}, "takes no api_key"),
        ({"kind": "ollama", "model": "m", "dialect": "openai"}, "takes no dialect"),
        ({"kind": "local", "base_url": "http://h"}, "takes no base_url"),
        ({"kind": "local", "words": True}, "takes no words"),
        ({"kind": "local", "ctx": 0}, "whole number of tokens"),
    ],
)
def test_a_bad_spec_is_refused_when_made(spec: dict[str, Any], says: str) -> None:
    with pytest.raises(UsageError, match=says):
        BackendSpec(**spec)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[[models]]\nname = 'a'\nollama = 'http://x'\n", "needs upstream_model with ollama"),
        (
            "[[models]]\nname = 'a'\nollama = 'http://x'\nupstream_model = 'm'\ndialect = 'x'\n",
            "mixes keys",
        ),
        ("[[models]]\nname = 'a'\nollama = 'http://x'\ngguf = 'm'\n", "not both"),
        ("[[models]]\nname = 'a'\nollama = 3\nupstream_model = 'm'\n", "non-empty string"),
    ],
)
def test_a_bad_ollama_entry_is_told_at_start(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "models.toml"
    path.write_text(text)
    with pytest.raises(UsageError, match=says):
        read_config(path)


def test_serve_refuses_two_ways_to_one_model(tmp_path: Path) -> None:
    path = tmp_path / "models.toml"
    path.write_text("[[models]]\nname = 'a'\ngguf = 'x'\n")
    for argv in (
        ["serve", "--config", str(path), "--ollama"],
        ["serve", "--ollama", "--upstream", "http://h/v1"],
    ):
        with pytest.raises(UsageError):
            served_models(_parser().parse_args(argv))


def test_the_gateway_keeps_its_own_memory_shared_by_its_models(tmp_path: Path) -> None:
    """What served models learn lives in the gateway's own memory: one for every model it
    serves, never the library's process-wide default (which another gateway or a script in
    the same process would share)."""
    import asyncio

    from toolwire.pipeline import default_memory

    path = tmp_path / "models.toml"
    path.write_text(
        '[[models]]\nname = "a"\nupstream = "http://127.0.0.1:9/v1"\nupstream_model = "m1"\n'
        '[[models]]\nname = "b"\nupstream = "http://127.0.0.1:9/v1"\nupstream_model = "m2"\n'
    )
    args = _parser().parse_args(["serve", "--config", str(path)])
    models = served_models(args)
    one, two = (asyncio.run(models.backend(name)) for name in ("a", "b"))
    assert one.memory is two.memory  # type: ignore[attr-defined]
    assert one.memory is not default_memory()  # type: ignore[attr-defined]
    other = asyncio.run(served_models(args).backend("a"))
    assert other.memory is not one.memory  # type: ignore[attr-defined]


def test_a_server_takes_the_family_its_model_writes_calls_in() -> None:
    for kind in ("openai", "ollama"):
        backend = build_backend(BackendSpec(kind, model="m", tool_format="hermes"))  # type: ignore[arg-type]
        assert backend.tool_format == "hermes"  # type: ignore[attr-defined]
    with pytest.raises(UsageError, match="not a tool format"):
        BackendSpec("openai", model="m", tool_format="hermez")
