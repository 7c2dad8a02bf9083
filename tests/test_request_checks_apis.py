"""Responses and Messages refuse what Chat Completions refuses: an invalid tool schema,
two tools of one name, two calls of one id, a result answering no call, a call answered
twice — each a 400 naming the field at fault in the API's own words, sent with the official
``openai`` and ``anthropic`` clients over real HTTP, and nothing of it sent upstream (a fake
upstream speaking real HTTP on 127.0.0.1 counts what it is asked). A call left unanswered
before the next user turn is taken in all three alike, as Chat Completions takes it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import pytest

from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.server import create_app
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
#: Not a JSON schema: "str" is no JSON type.
BROKEN = {"type": "object", "properties": {"city": {"type": "str"}}}
NOT_OBJECT = {"type": "string"}


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture(scope="module")
def gateway(upstream: FakeOpenAIServer) -> Iterator[str]:
    backend = OpenAIBackend("engine", base_url=upstream.base_url, client=new_client())
    with ServedApp(create_app(backend, model_name="gw")) as served:
        yield served.url


# --------------------------------------------------------------------------- each API's shapes


def chat_tool(name: str = "get_weather", schema: Any = SCHEMA) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": schema}}


def chat_call(cid: str) -> dict[str, Any]:
    fn = {"name": "get_weather", "arguments": '{"city": "Rome"}'}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": cid, "type": "function", "function": fn}],
    }


def chat_result(cid: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": "Sunny."}


ASK = {"role": "user", "content": "Weather in Rome?"}


def responses_tool(name: str = "get_weather", schema: Any = SCHEMA) -> dict[str, Any]:
    return {"type": "function", "name": name, "parameters": schema}


def responses_call(cid: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": cid, "name": "get_weather", "arguments": "{}"}


def responses_result(cid: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": cid, "output": "Sunny."}


def messages_tool(name: str = "get_weather", schema: Any = SCHEMA) -> dict[str, Any]:
    return {"name": name, "input_schema": schema}


def messages_call(cid: str) -> dict[str, Any]:
    block = {"type": "tool_use", "id": cid, "name": "get_weather", "input": {"city": "Rome"}}
    return {"role": "assistant", "content": [block]}


def messages_result(*cids: str) -> dict[str, Any]:
    blocks = [{"type": "tool_result", "tool_use_id": c, "content": "Sunny."} for c in cids]
    return {"role": "user", "content": blocks}


def chat(url: str, messages: list[Any], tools: list[Any]) -> Any:
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    return client.chat.completions.create(model="gw", messages=messages, tools=tools)


def responses(url: str, items: list[Any], tools: list[Any]) -> Any:
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    return client.responses.create(model="gw", input=items, tools=tools)


def messages(url: str, turns: list[Any], tools: list[Any]) -> Any:
    client = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0)
    return client.messages.create(model="gw", max_tokens=100, messages=turns, tools=tools)


Send = Callable[[str], Any]

#: (the fault, the API, the request, the field its 400 must name)
FAULTS: list[tuple[str, str, Send, str]] = [
    # an invalid schema
    (
        "schema not JSON schema",
        "chat",
        lambda u: chat(u, [ASK], [chat_tool(schema=BROKEN)]),
        "tools[0].function.parameters",
    ),
    (
        "schema not JSON schema",
        "responses",
        lambda u: responses(u, [ASK], [responses_tool(schema=BROKEN)]),
        "tools[0].parameters",
    ),
    (
        "schema not JSON schema",
        "messages",
        lambda u: messages(u, [ASK], [messages_tool(schema=BROKEN)]),
        "tools[0].input_schema",
    ),
    (
        "schema not of an object",
        "responses",
        lambda u: responses(u, [ASK], [responses_tool(schema=NOT_OBJECT)]),
        "tools[0].parameters",
    ),
    (
        "schema not of an object",
        "messages",
        lambda u: messages(u, [ASK], [messages_tool(schema=NOT_OBJECT)]),
        "tools[0].input_schema",
    ),
    (
        "schema in a namespace",
        "responses",
        lambda u: responses(
            u,
            [ASK],
            [{"type": "namespace", "name": "mcp__w", "tools": [responses_tool(schema=BROKEN)]}],
        ),
        "tools[0].tools[0].parameters",
    ),
    # two tools of one name
    (
        "tool named twice",
        "chat",
        lambda u: chat(u, [ASK], [chat_tool(), chat_tool()]),
        "tools[1].function.name",
    ),
    (
        "tool named twice",
        "responses",
        lambda u: responses(u, [ASK], [responses_tool(), responses_tool()]),
        "tools[1].name",
    ),
    (
        "tool named twice",
        "messages",
        lambda u: messages(u, [ASK], [messages_tool(), messages_tool()]),
        "tools[1].name",
    ),
    (
        "a custom tool named as a function",
        "responses",
        lambda u: responses(
            u, [ASK], [responses_tool(), {"type": "custom", "name": "get_weather"}]
        ),
        "tools[1].name",
    ),
    (
        "a tool named twice in one namespace",
        "responses",
        lambda u: responses(
            u,
            [ASK],
            [
                {"type": "namespace", "name": "mcp__w", "tools": [responses_tool()]},
                {"type": "namespace", "name": "mcp__w", "tools": [responses_tool()]},
            ],
        ),
        "tools[1].tools[0].name",
    ),
    # two calls of one id
    (
        "call id twice",
        "chat",
        lambda u: chat(
            u, [ASK, chat_call("c1"), chat_result("c1"), chat_call("c1")], [chat_tool()]
        ),
        "messages[3].tool_calls[0].id",
    ),
    (
        "call id twice",
        "responses",
        lambda u: responses(
            u,
            [ASK, responses_call("c1"), responses_result("c1"), responses_call("c1")],
            [responses_tool()],
        ),
        "input[3].call_id",
    ),
    (
        "call id twice",
        "messages",
        lambda u: messages(
            u,
            [ASK, messages_call("c1"), messages_result("c1"), messages_call("c1")],
            [messages_tool()],
        ),
        "messages[3].content[0].id",
    ),
    # a result answering no call
    (
        "result of no call",
        "chat",
        lambda u: chat(u, [ASK, chat_call("c1"), chat_result("zz")], [chat_tool()]),
        "messages[2].tool_call_id",
    ),
    (
        "result of no call",
        "responses",
        lambda u: responses(
            u, [ASK, responses_call("c1"), responses_result("zz")], [responses_tool()]
        ),
        "input[2].call_id",
    ),
    (
        "result of no call",
        "messages",
        lambda u: messages(u, [ASK, messages_call("c1"), messages_result("zz")], [messages_tool()]),
        "messages[2].content[0].tool_use_id",
    ),
    # a call answered twice
    (
        "call answered twice",
        "chat",
        lambda u: chat(
            u, [ASK, chat_call("c1"), chat_result("c1"), chat_result("c1")], [chat_tool()]
        ),
        "messages[3].tool_call_id",
    ),
    (
        "call answered twice",
        "responses",
        lambda u: responses(
            u,
            [ASK, responses_call("c1"), responses_result("c1"), responses_result("c1")],
            [responses_tool()],
        ),
        "input[3].call_id",
    ),
    (
        "call answered twice",
        "messages",
        lambda u: messages(
            u, [ASK, messages_call("c1"), messages_result("c1", "c1")], [messages_tool()]
        ),
        "messages[2].content[1].tool_use_id",
    ),
]


def _error_text(exc: Exception) -> str:
    return str(getattr(exc, "body", None) or exc)


@pytest.mark.parametrize(
    ("fault", "api", "send", "field"), FAULTS, ids=[f"{a}: {f} ({p})" for f, a, _, p in FAULTS]
)
def test_each_fault_is_a_400_naming_its_field_in_each_api(
    fault: str, api: str, send: Send, field: str, gateway: str, upstream: FakeOpenAIServer
) -> None:
    before = len(upstream.requests)
    refused = anthropic.BadRequestError if api == "messages" else openai.BadRequestError
    with pytest.raises(refused) as caught:
        send(gateway)
    assert caught.value.status_code == 400
    text = _error_text(caught.value)
    assert field in text, (fault, text)
    if api != "messages":  # OpenAI's error shape names the field in its own key
        assert caught.value.body["param"] == field  # type: ignore[index]
    assert "Traceback" not in text
    assert len(upstream.requests) == before, "a refused request went upstream"


UNANSWERED: list[tuple[str, Send]] = [
    (
        "chat",
        lambda u: chat(
            u, [ASK, chat_call("c1"), {"role": "user", "content": "Never mind."}], [chat_tool()]
        ),
    ),
    (
        "responses",
        lambda u: responses(
            u,
            [ASK, responses_call("c1"), {"role": "user", "content": "Never mind."}],
            [responses_tool()],
        ),
    ),
    (
        "messages",
        lambda u: messages(
            u,
            [ASK, messages_call("c1"), {"role": "user", "content": "Never mind."}],
            [messages_tool()],
        ),
    ),
]


@pytest.mark.parametrize(("api", "send"), UNANSWERED, ids=[a for a, _ in UNANSWERED])
def test_a_call_left_unanswered_before_a_new_user_turn_is_taken_in_each_api(
    api: str, send: Send, gateway: str, upstream: FakeOpenAIServer
) -> None:
    """An agent interrupted mid-call sends its call without a result: Chat Completions took
    it, and so do the other two, the history reaching the model as sent."""
    upstream.add_stream(text_deltas("Fine."))
    before = len(upstream.requests)
    reply = send(gateway)
    assert reply is not None
    assert len(upstream.requests) == before + 1
    sent = upstream.requests[-1]["messages"]
    assert [m["role"] for m in sent][-3:] == ["user", "assistant", "user"]
    assert sent[-2]["tool_calls"][0]["id"] == "c1"


def test_a_well_formed_history_with_every_kind_of_item_is_still_taken(
    gateway: str, upstream: FakeOpenAIServer
) -> None:
    """Two calls answered in one turn, a later call of a new id, namespaced and custom tools
    of names a plain function also has: none of it is refused."""
    upstream.add_stream(text_deltas("Done."))
    items = [
        ASK,
        responses_call("a"),
        responses_call("b"),
        responses_result("b"),
        responses_result("a"),
        {"role": "user", "content": "And Paris?"},
        responses_call("c"),
        responses_result("c"),
    ]
    tools = [
        responses_tool(),
        {"type": "namespace", "name": "mcp__w", "tools": [responses_tool()]},
        {"type": "custom", "name": "apply_patch"},
    ]
    responses(gateway, items, tools)
    offered = [t["function"]["name"] for t in upstream.requests[-1]["tools"]]
    assert offered == ["get_weather", "mcp__w__get_weather", "apply_patch"]
