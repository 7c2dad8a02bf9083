"""A model's own reasoning from earlier turns goes back to it, in every API: Messages'
``thinking`` blocks, Responses' reasoning items (given, or kept with a stored response) and
Chat Completions' ``reasoning_content`` reach an upstream as ``reasoning_content`` on their
assistant message, and a local template that renders past reasoning renders it. Over real
HTTP with the official clients, to a recording upstream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.backends.prompt import TemplateTransport
from toolwire.pipeline import Request
from toolwire.server import create_app
from toolwire.store.responses_sqlite import SqliteResponseStore
from toolwire.templates import ChatTemplate
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas, tool_call_deltas

THOUGHT = "Rome is in Italy; I should look up its weather."
ASK = {"role": "user", "content": "Weather in Rome?"}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ARGS = {"city": "Rome"}


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def gateway(upstream: FakeOpenAIServer, tmp_path: Path) -> Iterator[str]:
    backend = OpenAIBackend("engine", base_url=upstream.base_url, client=new_client())
    store = SqliteResponseStore(tmp_path / "gateway.db")
    with ServedApp(create_app(backend, model_name="gw", store=store)) as served:
        yield served.url


def _assistant(upstream: FakeOpenAIServer) -> dict[str, Any]:
    (message,) = [m for m in upstream.requests[-1]["messages"] if m["role"] == "assistant"]
    return message


def test_chat_completions_gives_reasoning_content_back(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(text_deltas("Sunny.", size=3))
    client = openai.OpenAI(base_url=gateway + "/v1", api_key="unused", max_retries=0)
    client.chat.completions.create(
        model="gw",
        messages=[
            {"role": "user", "content": "Weather in Rome?"},
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": THOUGHT,  # type: ignore[typeddict-unknown-key]
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": json.dumps(ARGS)},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "Sunny"},
        ],
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}],
    )
    assert _assistant(upstream)["reasoning_content"] == THOUGHT


def test_messages_gives_thinking_blocks_back(upstream: FakeOpenAIServer, gateway: str) -> None:
    upstream.add_stream(text_deltas("Sunny.", size=3))
    client = anthropic.Anthropic(base_url=gateway, api_key="unused", max_retries=0)
    client.messages.create(
        model="gw",
        max_tokens=50,
        thinking={"type": "enabled", "budget_tokens": 1024},
        tools=[{"name": "get_weather", "input_schema": SCHEMA}],
        messages=[
            {"role": "user", "content": "Weather in Rome?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": THOUGHT, "signature": ""},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "tool_use", "id": "c1", "name": "get_weather", "input": ARGS},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "Sunny"}],
            },
        ],
    )
    message = _assistant(upstream)
    assert message["reasoning_content"] == THOUGHT
    assert message["tool_calls"][0]["function"]["name"] == "get_weather"


def test_responses_gives_reasoning_items_back(upstream: FakeOpenAIServer, gateway: str) -> None:
    upstream.add_stream(text_deltas("Sunny.", size=3))
    client = openai.OpenAI(base_url=gateway + "/v1", api_key="unused", max_retries=0)
    client.responses.create(
        model="gw",
        tools=[{"type": "function", "name": "get_weather", "parameters": SCHEMA}],
        input=[
            {"role": "user", "content": "Weather in Rome?"},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": THOUGHT}],
            },
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "get_weather",
                "arguments": json.dumps(ARGS),
            },
            {"type": "function_call_output", "call_id": "c1", "output": "Sunny"},
        ],
    )
    message = _assistant(upstream)
    assert message["reasoning_content"] == THOUGHT
    assert message["tool_calls"][0]["function"]["name"] == "get_weather"


def test_a_stored_response_keeps_its_reasoning_for_the_next_turn(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    """The model reasons, then calls; the client answers the call by
    ``previous_response_id``: the upstream gets the reasoning back with the call."""
    upstream.add_stream(
        [
            {"reasoning_content": THOUGHT},
            *tool_call_deltas([("c1", "get_weather", json.dumps(ARGS))]),
        ],
        finish_reason="tool_calls",
    )
    upstream.add_stream(text_deltas("Sunny.", size=3))
    client = openai.OpenAI(base_url=gateway + "/v1", api_key="unused", max_retries=0)
    tools: Any = [{"type": "function", "name": "get_weather", "parameters": SCHEMA}]
    first = client.responses.create(model="gw", tools=tools, input="Weather in Rome?")
    (call,) = [item for item in first.output if item.type == "function_call"]
    client.responses.create(
        model="gw",
        tools=tools,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "Sunny"}],
    )
    assert _assistant(upstream)["reasoning_content"] == THOUGHT


def test_a_local_template_renders_the_reasoning_given_back() -> None:
    source = Path(__file__).parent / "fixtures" / "chat_templates" / "Qwen-Qwen3-0.6B.jinja"
    transport = TemplateTransport(ChatTemplate(source.read_text(encoding="utf-8")))
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": json.dumps(ARGS)},
    }
    messages = [
        {"role": "user", "content": "Weather in Rome?"},
        {"role": "assistant", "content": None, "reasoning_content": THOUGHT, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "Sunny"},
    ]
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}
    prompt = transport.planned_prompt(Request(messages, [tool]))
    assert f"<think>\n{THOUGHT}\n</think>" in prompt


@pytest.mark.parametrize(
    ("thinking", "kwargs", "sent"),
    [
        ({"type": "enabled", "budget_tokens": 2048}, None, {"enable_thinking": True}),
        ({"type": "disabled"}, None, {"enable_thinking": False}),
        (
            {"type": "disabled"},
            {"enable_thinking": True, "x": 1},
            {"enable_thinking": True, "x": 1},
        ),
    ],
)
def test_messages_thinking_reaches_vllm_as_its_template_switch(
    upstream: FakeOpenAIServer,
    thinking: dict[str, Any],
    kwargs: dict[str, Any] | None,
    sent: dict[str, Any],
) -> None:
    backend = OpenAIBackend(
        "engine", base_url=upstream.base_url, client=new_client(), engine="vllm"
    )
    upstream.add_stream(text_deltas("Sunny.", size=3))
    with ServedApp(create_app(backend, model_name="gw")) as served:
        client = anthropic.Anthropic(base_url=served.url, api_key="unused", max_retries=0)
        message = client.messages.create(
            model="gw",
            max_tokens=50,
            thinking=thinking,  # type: ignore[arg-type]
            messages=[{"role": "user", "content": "Weather in Rome?"}],
            extra_body={"chat_template_kwargs": kwargs} if kwargs else None,
        )
    assert upstream.requests[-1]["chat_template_kwargs"] == sent
    assert (message.model_extra or {})["toolwire"]["notices"] == []  # honoured: no notice


def test_an_engine_with_no_thinking_switch_says_so(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(text_deltas("Sunny.", size=3))
    r = httpx.post(
        gateway + "/v1/messages",
        json={
            "model": "gw",
            "max_tokens": 50,
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "messages": [{"role": "user", "content": "Weather in Rome?"}],
        },
    )
    assert r.status_code == 200
    assert "chat_template_kwargs" not in upstream.requests[-1]
    told = [n for n in r.json()["toolwire"]["notices"] if n["code"] == "field-not-honoured"]
    assert told and "thinking" in told[0]["message"]


def test_thinking_off_is_one_decision_in_every_api(upstream: FakeOpenAIServer) -> None:
    """Chat Completions' ``reasoning_effort: none``, Responses' ``reasoning.effort: none``
    and Messages' ``thinking: disabled`` reach vLLM as the same switch."""
    backend = OpenAIBackend(
        "engine", base_url=upstream.base_url, client=new_client(), engine="vllm"
    )
    asks = {
        "/v1/chat/completions": {"messages": [ASK], "reasoning_effort": "none"},
        "/v1/responses": {"input": "Weather in Rome?", "reasoning": {"effort": "none"}},
        "/v1/messages": {"messages": [ASK], "max_tokens": 9, "thinking": {"type": "disabled"}},
    }
    with ServedApp(create_app(backend, model_name="gw")) as served:
        for path, body in asks.items():
            upstream.add_stream(text_deltas("Sunny.", size=3))
            r = httpx.post(served.url + path, json={"model": "gw", **body})
            assert r.status_code == 200, (path, r.text)
            sent = upstream.requests[-1]
            assert sent["chat_template_kwargs"] == {"enable_thinking": False}, path


HISTORY = [
    ASK,
    {
        "role": "assistant",
        "content": None,
        "reasoning_content": THOUGHT,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "Sunny"},
]


def test_openai_itself_gets_only_what_it_documents() -> None:
    from toolwire.backends import stream_sync
    from toolwire.pipeline import Request, Sampling

    with FakeOpenAIServer() as fake:
        fake.add_stream(text_deltas("Sunny.", size=3))
        backend = OpenAIBackend("gpt", base_url=fake.base_url, engine="openai")
        request = Request(
            HISTORY,
            sampling=Sampling(top_p=0.5, top_k=20),
            extra={"user": "u", "chat_template_kwargs": {"x": 1}},
        )
        events = list(stream_sync(backend.stream(request)))
        sent = fake.requests[-1]
    assert sent["top_p"] == 0.5 and sent["user"] == "u"
    assert "top_k" not in sent and "chat_template_kwargs" not in sent
    assert all("reasoning_content" not in m for m in sent["messages"])
    (told,) = [e for e in events if getattr(e, "code", "") == "field-not-honoured"]
    assert "top_k" in told.message and "chat_template_kwargs" in told.message


def test_a_server_that_refuses_reasoning_back_is_asked_again_without_it() -> None:
    from toolwire.backends import stream_sync
    from toolwire.pipeline import Request

    with FakeOpenAIServer() as fake:
        fake.add_error(400, "property 'reasoning_content' is unsupported")
        fake.add_stream(text_deltas("Sunny.", size=3))
        backend = OpenAIBackend("m", base_url=fake.base_url)
        events = list(stream_sync(backend.stream(Request(HISTORY))))
        first, again = fake.requests[-2:]
    assert first["messages"][1]["reasoning_content"] == THOUGHT
    assert all("reasoning_content" not in m for m in again["messages"])
    assert (
        "".join(getattr(e, "text", "") for e in events if type(e).__name__ == "TextDelta")
        == "Sunny."
    )


def test_ollama_gets_earlier_reasoning_as_its_thinking() -> None:
    from toolwire.backends.ollama import to_ollama

    assert to_ollama(HISTORY)[1]["thinking"] == THOUGHT


def test_reasoning_items_never_split_a_turn_nor_move_an_error() -> None:
    import asyncio

    from toolwire.server.refusal import RequestError
    from toolwire.server.responses_input import parse_responses

    def call(cid: str) -> dict[str, Any]:
        return {"type": "function_call", "call_id": cid, "name": "get_weather", "arguments": "{}"}

    def output(cid: str) -> dict[str, Any]:
        return {"type": "function_call_output", "call_id": cid, "output": "Sunny"}

    def reasoning(text: str) -> dict[str, Any]:
        return {
            "type": "reasoning",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": text}],
        }

    tools = [{"type": "function", "name": "get_weather", "parameters": SCHEMA}]
    given = [
        ASK,
        reasoning("one"),
        call("a"),
        reasoning("two"),
        call("b"),
        output("a"),
        output("b"),
    ]
    parsed = asyncio.run(parse_responses({"model": "m", "input": given, "tools": tools}))
    (turn,) = [m for m in parsed.request.messages if m["role"] == "assistant"]
    assert [c["id"] for c in turn["tool_calls"]] == ["a", "b"]
    assert turn["reasoning_content"] == "one\n\ntwo"
    cut = [ASK, reasoning("cut"), output("zzz")]
    with pytest.raises(RequestError) as raised:
        asyncio.run(parse_responses({"model": "m", "input": cut, "tools": tools}))
    assert raised.value.param == "input[2].call_id"
