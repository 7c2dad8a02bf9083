"""The README's example: the official ``openai`` package calls a tool through the gateway."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.backends.llamacpp import LlamaCppBackend
from toolwire.formats.recovery import recover_calls
from toolwire.server import create_app
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas, tool_call_deltas

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def test_the_official_client_gets_a_tool_call_and_sends_the_result_back() -> None:
    with FakeOpenAIServer() as upstream:
        # the engine behind writes its call as text; the gateway hands it over as tool_calls
        upstream.add_stream(text_deltas('{"name": "get_weather", "arguments": {"city": "Paris"}}'))
        upstream.add_stream(text_deltas("It is sunny in Paris."))
        app = create_app(OpenAIBackend("engine", base_url=upstream.base_url), model_name="gw")
        with ServedApp(app) as gateway:
            client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused")
            messages: list = [{"role": "user", "content": "Weather in Paris?"}]
            first = client.chat.completions.create(model="gw", messages=messages, tools=[WEATHER])
            choice = first.choices[0]
            assert choice.finish_reason == "tool_calls" and choice.message.content is None
            call = choice.message.tool_calls[0]
            assert call.function.name == "get_weather"
            assert json.loads(call.function.arguments) == {"city": "Paris"}
            messages += [
                choice.message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
            ]
            second = client.chat.completions.create(model="gw", messages=messages, tools=[WEATHER])
            assert second.choices[0].message.content == "It is sunny in Paris."
    sent = upstream.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[2]["tool_call_id"] == call.id


ROME = {"name": "get_weather", "arguments": {"city": "Rome"}}
SHAPES = {
    "bare JSON": json.dumps(ROME),
    "fenced JSON": "```json\n" + json.dumps(ROME, indent=2) + "\n```",
    "Hermes tags": "<tool_call>\n" + json.dumps(ROME) + "\n</tool_call>",
}


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def client(upstream: FakeOpenAIServer) -> Iterator[openai.OpenAI]:
    backend = OpenAIBackend("engine", base_url=upstream.base_url, client=new_client())
    with ServedApp(create_app(backend, model_name="gw")) as gateway:
        yield openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0)


def streamed(stream: Any) -> tuple[str, list[tuple[int, str, str, str]], str | None]:
    """Text, calls (index, id, name, arguments) and finish reason of a streamed reply."""
    text, finish = "", None
    calls: dict[int, list[str]] = {}
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        text += delta.content or ""
        for tc in delta.tool_calls or ():
            slot = calls.setdefault(tc.index, ["", "", ""])
            slot[0] = tc.id or slot[0]
            if tc.function:
                slot[1] += tc.function.name or ""
                slot[2] += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    return text, [(i, *v) for i, v in sorted(calls.items())], finish


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("stream", [False, True])
def test_calls_left_in_content_reach_the_client_as_tool_calls(
    upstream: FakeOpenAIServer, client: openai.OpenAI, shape: str, stream: bool
) -> None:
    upstream.add_stream(text_deltas(SHAPES[shape], size=4))
    ask: dict[str, Any] = {
        "model": "gw",
        "messages": [{"role": "user", "content": "Weather in Rome?"}],
        "tools": [WEATHER],
    }
    if stream:
        text, calls, finish = streamed(client.chat.completions.create(**ask, stream=True))
        assert text == "" and finish == "tool_calls"
        ((index, cid, name, arguments),) = calls
        assert index == 0 and cid and name == "get_weather"
    else:
        choice = client.chat.completions.create(**ask).choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        (call,) = choice.message.tool_calls or []
        name, arguments = call.function.name, call.function.arguments
    assert name == "get_weather" and json.loads(arguments) == {"city": "Rome"}


@pytest.mark.parametrize("stream", [False, True])
def test_parallel_calls_and_parallel_tool_calls_false(
    upstream: FakeOpenAIServer, client: openai.OpenAI, stream: bool
) -> None:
    two = [("a1", "get_weather", '{"city": "Oslo"}'), ("b2", "get_weather", '{"city": "Rome"}')]
    ask: dict[str, Any] = {
        "model": "gw",
        "messages": [{"role": "user", "content": "Oslo and Rome?"}],
        "tools": [WEATHER],
    }
    for parallel in (True, False):
        upstream.add_stream(tool_call_deltas(two), finish_reason="tool_calls")
        if stream:
            _, calls, _ = streamed(
                client.chat.completions.create(**ask, stream=True, parallel_tool_calls=parallel)
            )
            got = [(i, cid, json.loads(a)["city"]) for i, cid, _, a in calls]
        else:
            message = (
                client.chat.completions.create(**ask, parallel_tool_calls=parallel)
                .choices[0]
                .message
            )
            got = [
                (i, c.id, json.loads(c.function.arguments)["city"])
                for i, c in enumerate(message.tool_calls or [])
            ]
        want = [(0, "a1", "Oslo"), (1, "b2", "Rome")]
        assert got == (want if parallel else want[:1])


def test_tool_choice_forms_reach_the_engine(
    upstream: FakeOpenAIServer, client: openai.OpenAI
) -> None:
    other = {**WEATHER, "function": {**WEATHER["function"], "name": "get_time"}}
    named = {"type": "function", "function": {"name": "get_time"}}
    ask: dict[str, Any] = {
        "model": "gw",
        "messages": [{"role": "user", "content": "Hi"}],
        "tools": [WEATHER, other],
    }
    for choice in ("auto", "none", "required", named):
        upstream.add_stream(text_deltas("Hello."))
        reply = client.chat.completions.create(**ask, tool_choice=choice)
        assert reply.choices[0].message.content == "Hello."
    auto, none, required, one = upstream.requests
    assert [t["function"]["name"] for t in auto["tools"]] == ["get_weather", "get_time"]
    assert "tools" not in none
    assert required["tool_choice"] == "required"
    assert [t["function"]["name"] for t in one["tools"]] == ["get_time"]
    assert one["tool_choice"]["function"]["name"] == "get_time"
    with pytest.raises(openai.BadRequestError, match="not in 'tools'"):
        client.chat.completions.create(
            **ask, tool_choice={"type": "function", "function": {"name": "nope"}}
        )


def test_the_official_client_with_the_local_model(
    llama_backend: LlamaCppBackend, qwen_gguf: Path
) -> None:
    """In-process: streamed and not, the model's call (recovered from its drift) arrives as
    a tool call, and the result goes back as a tool message the template renders."""
    ask: dict[str, Any] = {
        "model": "toolwire",
        "messages": [{"role": "user", "content": "What is the weather in Oslo?"}],
        "tools": [WEATHER],
        "max_tokens": 48,
        "temperature": 0,
    }
    with ServedApp(create_app(llama_backend)) as gateway:
        client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0)
        text, calls, finish = streamed(client.chat.completions.create(**ask, stream=True))
        assert finish == "tool_calls" and recover_calls(text, [WEATHER], lenient=True) is None
        ((_, _, name, arguments),) = calls
        assert name == "get_weather" and "oslo" in json.loads(arguments)["city"].lower()

        choice = client.chat.completions.create(**ask).choices[0]
        assert choice.finish_reason == "tool_calls"
        (call,) = choice.message.tool_calls or []
        assert call.function.arguments == arguments  # the same reply, streamed or not
        messages = [
            *ask["messages"],
            choice.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "Snow, -3 °C."},
        ]
        after = client.chat.completions.create(**{**ask, "messages": messages}).choices[0]
        assert after.finish_reason in ("stop", "tool_calls", "length")
        assert after.message.content or after.message.tool_calls
        assert recover_calls(after.message.content or "", [WEATHER], lenient=True) is None
