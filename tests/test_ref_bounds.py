"""A tool schema whose ``$ref`` references chain too deep, or would expand it past a bound,
is a 400 naming the schema's field in every API, whole and streamed, before anything is
sent upstream — never a 500, a traceback or a cut stream. Sent with the official ``openai``
and ``anthropic`` clients over real HTTP to the gateway, its upstream a fake speaking real
HTTP on 127.0.0.1. A recursive schema (a tree) still checks a call of normal depth, and a
call nested deeper than any bound against it is an invalid call, not a failure."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import pytest

from toolwire.arguments import prepare_arguments
from toolwire.arguments.schema import MAX_REF_DEPTH, MAX_SCHEMA_EXPANSION, ref_problem
from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.errors import ArgumentsError
from toolwire.server import create_app
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas, tool_call_deltas


def chain(hops: int) -> dict[str, Any]:
    """A schema whose one field is reached through ``hops`` references, one after another."""
    defs: dict[str, Any] = {f"a{i}": {"$ref": f"#/$defs/a{i + 1}"} for i in range(hops)}
    defs[f"a{hops}"] = {"type": "string"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}, "$defs": defs}


def fan_out(levels: int) -> dict[str, Any]:
    """Each definition refers to the next twice: ``2 ** levels`` nodes once expanded, from a
    schema of a few dozen, in fewer hops than the depth bound."""
    defs: dict[str, Any] = {
        f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"d{levels}"] = {"type": "string"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}


#: A tree: each node's children are nodes. Recursive, and legitimate.
TREE = {
    "type": "object",
    "properties": {"root": {"$ref": "#/$defs/node"}},
    "required": ["root"],
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "value": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["value"],
        }
    },
}
#: Two definitions referring to each other (a -> b -> a), with a field to stop on.
CYCLE = {
    "type": "object",
    "properties": {"x": {"$ref": "#/$defs/a"}},
    "$defs": {
        "a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/b"}}},
        "b": {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}},
    },
}


def tree(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"value": "leaf"}
    for i in range(depth):
        node = {"value": f"n{i}", "children": [node]}
    return {"root": node}


# --------------------------------------------------------------------------- the bound itself


def test_a_long_chain_and_a_fan_out_are_refused_a_tree_and_a_cycle_are_not() -> None:
    deep = ref_problem(chain(1000))
    assert deep is not None and str(MAX_REF_DEPTH) in deep
    assert ref_problem(chain(MAX_REF_DEPTH - 2)) is None
    wide = ref_problem(fan_out(40))
    assert wide is not None and str(MAX_SCHEMA_EXPANSION) in wide
    assert ref_problem(fan_out(8)) is None  # 256 nodes expanded: an ordinary schema
    assert ref_problem(TREE) is None
    assert ref_problem(CYCLE) is None
    assert ref_problem({"type": "object", "properties": {"x": {"$ref": "#"}}}) is None


def test_a_chain_is_refused_as_a_schema_fault_before_any_value_is_judged() -> None:
    with pytest.raises(ArgumentsError) as caught:
        prepare_arguments('{"x": "a"}', chain(1000), name="t")
    assert caught.value.kind == "schema"
    assert "$ref" in str(caught.value)


def test_a_tree_checks_a_call_of_normal_depth_and_refuses_a_wrong_one() -> None:
    done = prepare_arguments(json.dumps(tree(5)), TREE, name="t")
    assert done.arguments == tree(5)
    with pytest.raises(ArgumentsError) as caught:
        prepare_arguments('{"root": {"children": []}}', TREE, name="t")
    assert "value" in str(caught.value)


@pytest.mark.parametrize("depth", [40, 60, 99, 400])
def test_arguments_nested_past_any_bound_against_a_tree_are_refused_not_a_crash(
    depth: int,
) -> None:
    """However deep the value, the answer is typed arguments or an ArgumentsError: never a
    RecursionError out of jsonschema or the normaliser."""
    try:
        done = prepare_arguments(json.dumps(tree(depth)), TREE, name="t")
    except ArgumentsError as exc:
        assert exc.explanation
    else:
        assert done.arguments == tree(depth)


# --------------------------------------------------------------------------- through the gateway


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture(scope="module")
def gateway(upstream: FakeOpenAIServer) -> Iterator[str]:
    backend = OpenAIBackend("engine", base_url=upstream.base_url, client=new_client())
    with ServedApp(create_app(backend, model_name="gw")) as served:
        yield served.url


ASK = {"role": "user", "content": "Go."}


def _openai(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)


def chat(url: str, schema: Any, stream: bool) -> Any:
    tools: Any = [{"type": "function", "function": {"name": "t", "parameters": schema}}]
    reply = _openai(url).chat.completions.create(
        model="gw", messages=[ASK], tools=tools, stream=stream
    )
    return list(reply) if stream else reply


def responses(url: str, schema: Any, stream: bool) -> Any:
    tools: Any = [{"type": "function", "name": "t", "parameters": schema}]
    reply = _openai(url).responses.create(model="gw", input=[ASK], tools=tools, stream=stream)  # type: ignore[call-overload]
    return list(reply) if stream else reply


def messages(url: str, schema: Any, stream: bool) -> Any:
    client = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0)
    tools: Any = [{"name": "t", "input_schema": schema}]
    reply = client.messages.create(
        model="gw", max_tokens=100, messages=[ASK], tools=tools, stream=stream
    )
    return list(reply) if stream else reply


Send = Callable[[str, Any, bool], Any]
APIS: list[tuple[str, Send, str]] = [
    ("chat", chat, "tools[0].function.parameters"),
    ("responses", responses, "tools[0].parameters"),
    ("messages", messages, "tools[0].input_schema"),
]
SCHEMAS = {"chain": chain(1000), "fan-out": fan_out(40)}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("schema", list(SCHEMAS), ids=list(SCHEMAS))
@pytest.mark.parametrize(("api", "send", "field"), APIS, ids=[a for a, _, _ in APIS])
def test_a_ref_schema_past_the_bounds_is_a_400_naming_its_field(
    api: str,
    send: Send,
    field: str,
    schema: str,
    stream: bool,
    gateway: str,
    upstream: FakeOpenAIServer,
) -> None:
    before = len(upstream.requests)
    refused = anthropic.BadRequestError if api == "messages" else openai.BadRequestError
    with pytest.raises(refused) as caught:
        send(gateway, SCHEMAS[schema], stream)
    assert caught.value.status_code == 400
    text = str(getattr(caught.value, "body", None) or caught.value)
    assert field in text and "$ref" in text, text
    if api != "messages":
        assert caught.value.body["param"] == field  # type: ignore[index]
    assert "Traceback" not in text and ".py" not in text
    assert len(upstream.requests) == before, "a refused request went upstream"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_tree_schema_still_takes_a_call_through_the_gateway(
    stream: bool, gateway: str, upstream: FakeOpenAIServer
) -> None:
    arguments = json.dumps(tree(4))
    upstream.add_stream(tool_call_deltas([("call_1", "t", arguments)]), finish_reason="tool_calls")
    reply = chat(gateway, TREE, stream)
    if stream:
        pieces = [
            d.function.arguments or ""
            for chunk in reply
            for choice in chunk.choices
            for d in choice.delta.tool_calls or ()
            if d.function is not None
        ]
        got = "".join(pieces)
    else:
        got = reply.choices[0].message.tool_calls[0].function.arguments
    assert json.loads(got) == tree(4)


@pytest.mark.parametrize(("api", "send", "field"), APIS, ids=[a for a, _, _ in APIS])
def test_a_cycle_schema_is_taken_in_each_api(
    api: str, send: Send, field: str, gateway: str, upstream: FakeOpenAIServer
) -> None:
    upstream.add_stream(text_deltas("Fine."))
    before = len(upstream.requests)
    assert send(gateway, CYCLE, False) is not None
    assert len(upstream.requests) == before + 1
