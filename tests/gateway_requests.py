"""Gateway requests for the tests: builders of well-formed and malformed Chat Completions
bodies, the malformed kinds with the field each error must name, and a backend that records
every request it is asked (to prove a refused request never reached it)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from toolwire.events import Done, Event, TextDelta
from toolwire.pipeline import Request


class Recorder:
    """A backend that answers "ok" and records every request it is asked."""

    name = "recorder"

    def __init__(self) -> None:
        self.requests: list[Request] = []

    async def stream(self, request: Request) -> AsyncIterator[Event]:
        self.requests.append(request)
        yield TextDelta("ok")
        yield Done("stop")


DROP = object()
USER = {"role": "user", "content": "hi"}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "done"}
SCHEMA = {"type": "object", "properties": {"x": {"type": "string"}}}
TOOL = {"type": "function", "function": {"name": "f", "description": "F.", "parameters": SCHEMA}}
BASE: dict[str, Any] = {"model": "m", "messages": [USER], "tools": [TOOL]}


def changed(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = {**base, **changes}
    return {k: v for k, v in out.items() if v is not DROP}


def body(**changes: Any) -> dict[str, Any]:
    return changed(BASE, **changes)


def user(**changes: Any) -> dict[str, Any]:
    """A request whose only message is ``USER`` changed."""
    return body(messages=[changed(USER, **changes)])


def assistant(**changes: Any) -> dict[str, Any]:
    return body(messages=[USER, changed(CALL, **changes), RESULT])


def call(**changes: Any) -> dict[str, Any]:
    """A request whose assistant message's call is changed."""
    return assistant(tool_calls=[changed(CALL["tool_calls"][0], **changes)])


def called(**changes: Any) -> dict[str, Any]:
    """A request whose assistant message's called function is changed."""
    fn = changed(CALL["tool_calls"][0]["function"], **changes)
    return call(function=fn)


def result(**changes: Any) -> dict[str, Any]:
    return body(messages=[USER, CALL, changed(RESULT, **changes)])


def tool(**changes: Any) -> dict[str, Any]:
    return body(tools=[changed(TOOL, **changes)])


def function(**changes: Any) -> dict[str, Any]:
    return tool(function=changed(TOOL["function"], **changes))


def part(message: dict[str, Any], *parts: Any) -> dict[str, Any]:
    return body(messages=[{**message, "content": list(parts)}])


def nested(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def raw(text: str) -> bytes:
    return text.encode("utf-8")


OK_HEAD = '{"model": "m", "messages": [{"role": "user", "content": "hi"}]'
DEEP_SCHEMA = {"type": "object", "properties": {"x": nested(900)}}

#: (kind, body, the field the error names). A body is a dict (sent as JSON, once plain and
#: once streamed) or bytes (sent as they are). A field ending in "*" is a prefix.
MALFORMED: list[tuple[str, Any, str | None]] = [
    # the body itself
    ("empty body", b"", None),
    ("not json", b"{not json", None),
    ("truncated", b'{"messages": [', None),
    ("a list", b"[]", None),
    ("a string", b'"text"', None),
    ("null", b"null", None),
    ("not utf-8", b'{"messages": "\xff\xfe"}', None),
    ("utf-16", json.dumps(BASE).encode("utf-16"), None),
    ("byte order mark", b"\xef\xbb\xbf" + json.dumps(BASE).encode(), None),
    ("trailing garbage", json.dumps(BASE).encode() + b" x", None),
    ("100000 levels deep", b"[" * 100_000 + b"]" * 100_000, None),
    ("a 5000-digit number", raw(OK_HEAD + ', "seed": ' + "9" * 5000 + "}"), None),
    # values strict JSON refuses, with their path
    (
        "NaN in content",
        raw('{"messages": [{"role": "user", "content": NaN}]}'),
        "messages[0].content",
    ),
    ("Infinity temperature", raw(OK_HEAD + ', "temperature": Infinity}'), "temperature"),
    ("-Infinity max_tokens", raw(OK_HEAD + ', "max_tokens": -Infinity}'), "max_tokens"),
    ("1e999 top_p", raw(OK_HEAD + ', "top_p": 1e999}'), "top_p"),
    (
        "NaN in a schema",
        raw(
            OK_HEAD + ', "tools": [{"type": "function", "function": {"name": "f", '
            '"parameters": {"type": "object", "properties": {"x": {"default": NaN}}}}}]}'
        ),
        "tools[0].function.parameters.properties.x.default",
    ),
    (
        "lone surrogate in content",
        raw('{"messages": [{"role": "user", "content": "a\\ud800b"}]}'),
        "messages[0].content",
    ),
    (
        "lone low surrogate in a name",
        raw(OK_HEAD + ', "tools": [{"type": "function", "function": {"name": "\\udc80"}}]}'),
        "tools[0].function.name",
    ),
    (
        "lone surrogate in a key",
        raw(OK_HEAD + ', "metadata": {"\\ud800": "x"}}'),
        "metadata",
    ),
    ("stream given twice", raw(OK_HEAD + ', "stream": false, "stream": true}'), "stream"),
    (
        "content given twice",
        raw('{"messages": [{"role": "user", "content": "a", "content": "b"}]}'),
        "messages[0].content",
    ),
    ("65 levels deep", body(metadata=nested(65)), "metadata*"),
    ("a schema 900 levels deep", function(parameters=DEEP_SCHEMA), "tools[0].function.parameters*"),
    # messages
    ("no messages", body(messages=DROP), "messages"),
    ("empty messages", body(messages=[]), "messages"),
    ("messages a string", body(messages="hi"), "messages"),
    ("messages an object", body(messages={}), "messages"),
    ("a message a number", body(messages=[1]), "messages[0]"),
    ("a message null", body(messages=[None]), "messages[0]"),
    ("no role", user(role=DROP), "messages[0].role"),
    ("unknown role", user(role="bot"), "messages[0].role"),
    ("role a number", user(role=5), "messages[0].role"),
    ("deprecated function role", user(role="function", name="f"), "messages[0].role"),
    ("content a number", user(content=5), "messages[0].content"),
    ("content an object", user(content={"text": "hi"}), "messages[0].content"),
    ("content true", user(content=True), "messages[0].content"),
    ("user content null", user(content=None), "messages[0].content"),
    ("no user content", user(content=DROP), "messages[0].content"),
    ("a part a number", part(USER, 1), "messages[0].content[0]"),
    ("a part of unknown type", part(USER, {"type": "img"}), "messages[0].content[0].type"),
    ("a part without text", part(USER, {"type": "text"}), "messages[0].content[0].text"),
    (
        "a part's text a number",
        part(USER, {"type": "text", "text": 5}),
        "messages[0].content[0].text",
    ),
    (
        "an image in a system message",
        part({"role": "system"}, {"type": "image_url", "image_url": {"url": "x"}}),
        "messages[0].content[0].type",
    ),
    (
        "an image without url",
        part(USER, {"type": "image_url", "image_url": {}}),
        "messages[0].content[0].image_url.url",
    ),
    (
        "an image of unknown detail",
        part(USER, {"type": "image_url", "image_url": {"url": "x", "detail": "ultra"}}),
        "messages[0].content[0].image_url.detail",
    ),
    (
        "audio of unknown format",
        part(USER, {"type": "input_audio", "input_audio": {"data": "", "format": "ogg"}}),
        "messages[0].content[0].input_audio.format",
    ),
    (
        "a refusal part from the user",
        part(USER, {"type": "refusal", "refusal": "no"}),
        "messages[0].content[0].type",
    ),
    ("an unknown message field", user(contents="hi"), "messages[0].contents"),
    ("name a number", user(name=5), "messages[0].name"),
    (
        "system content a number",
        body(messages=[{"role": "system", "content": 5}]),
        "messages[0].content",
    ),
    (
        "developer content null",
        body(messages=[{"role": "developer", "content": None}]),
        "messages[0].content",
    ),
    ("assistant content a number", assistant(content=5), "messages[1].content"),
    ("tool_calls a string", assistant(tool_calls="x"), "messages[1].tool_calls"),
    ("a call a number", assistant(tool_calls=[1]), "messages[1].tool_calls[0]"),
    ("a call without function", call(function=DROP), "messages[1].tool_calls[0].function"),
    ("a call's function a string", call(function="f"), "messages[1].tool_calls[0].function"),
    ("a call's name empty", called(name=""), "messages[1].tool_calls[0].function.name"),
    ("a call's name a number", called(name=5), "messages[1].tool_calls[0].function.name"),
    ("arguments an object", called(arguments={}), "messages[1].tool_calls[0].function.arguments"),
    ("no arguments", called(arguments=DROP), "messages[1].tool_calls[0].function.arguments"),
    ("a custom call", call(type="custom"), "messages[1].tool_calls[0].type"),
    ("a call's id a number", call(id=5), "messages[1].tool_calls[0].id"),
    (
        "an assistant function_call",
        assistant(function_call={"name": "f"}),
        "messages[1].function_call",
    ),
    ("a result without tool_call_id", result(tool_call_id=DROP), "messages[2].tool_call_id"),
    ("tool_call_id a number", result(tool_call_id=5), "messages[2].tool_call_id"),
    ("a result of no call", result(tool_call_id="zz"), "messages[2].tool_call_id"),
    ("a result's content a number", result(content=5), "messages[2].content"),
    ("a result before its call", body(messages=[USER, RESULT, CALL]), "messages[1].tool_call_id"),
    # tools
    ("tools a string", body(tools="f"), "tools"),
    ("tools an object", body(tools={}), "tools"),
    ("a tool a number", body(tools=[1]), "tools[0]"),
    ("a tool without function", tool(function=DROP), "tools[0].function"),
    ("an empty function", tool(function={}), "tools[0].function.name"),
    ("a function a string", tool(function="f"), "tools[0].function"),
    ("a name a number", function(name=5), "tools[0].function.name"),
    ("a name empty", function(name=""), "tools[0].function.name"),
    ("a name with a space", function(name="get weather"), "tools[0].function.name"),
    ("a name of 65 characters", function(name="f" * 65), "tools[0].function.name"),
    ("a retrieval tool", tool(type="retrieval"), "tools[0].type"),
    ("a custom tool", tool(type="custom"), "tools[0].type"),
    ("parameters a string", function(parameters="{}"), "tools[0].function.parameters"),
    ("parameters a list", function(parameters=[]), "tools[0].function.parameters"),
    (
        "parameters not an object schema",
        function(parameters={"type": "string"}),
        "tools[0].function.parameters",
    ),
    (
        "parameters not a JSON schema",
        function(parameters={"type": "object", "properties": {"x": {"type": "str"}}}),
        "tools[0].function.parameters",
    ),
    ("a description a number", function(description=5), "tools[0].function.description"),
    ("strict a string", function(strict="yes"), "tools[0].function.strict"),
    ("an unknown function field", function(params=SCHEMA), "tools[0].function.params"),
    ("two tools of one name", body(tools=[TOOL, TOOL]), "tools[1].function.name"),
    # tool_choice
    ("tool_choice unknown", body(tool_choice="maybe"), "tool_choice"),
    ("tool_choice a number", body(tool_choice=5), "tool_choice"),
    (
        "tool_choice without function",
        body(tool_choice={"type": "function"}),
        "tool_choice.function",
    ),
    (
        "tool_choice's function a string",
        body(tool_choice={"type": "function", "function": "f"}),
        "tool_choice.function",
    ),
    (
        "tool_choice of an unknown tool",
        body(tool_choice={"type": "function", "function": {"name": "zz"}}),
        "tool_choice.function.name",
    ),
    (
        "tool_choice allowed_tools",
        body(tool_choice={"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}),
        "tool_choice.type",
    ),
    ("required without tools", body(tools=DROP, tool_choice="required"), "tool_choice"),
    # flags and numbers: strict types, nothing coerced
    ("stream a string", body(stream="yes"), "stream"),
    ("stream a number", body(stream=1), "stream"),
    ("parallel_tool_calls a string", body(parallel_tool_calls="no"), "parallel_tool_calls"),
    ("n 2", body(n=2), "n"),
    ("n 0", body(n=0), "n"),
    ("n true", body(n=True), "n"),
    ("temperature a string", body(temperature="hot"), "temperature"),
    ("temperature 3", body(temperature=3), "temperature"),
    ("temperature below 0", body(temperature=-1), "temperature"),
    ("temperature true", body(temperature=True), "temperature"),
    ("max_tokens 0", body(max_tokens=0), "max_tokens"),
    ("max_tokens 1.5", body(max_tokens=1.5), "max_tokens"),
    ("max_tokens 2.0", body(max_tokens=2.0), "max_tokens"),
    ("max_tokens a string", body(max_tokens="many"), "max_tokens"),
    ("max_tokens true", body(max_tokens=True), "max_tokens"),
    ("max_tokens 10**12", body(max_tokens=10**12), "max_tokens"),
    ("max_completion_tokens a list", body(max_completion_tokens=[1]), "max_completion_tokens"),
    ("top_p 2", body(top_p=2), "top_p"),
    ("frequency_penalty 3", body(frequency_penalty=3), "frequency_penalty"),
    ("presence_penalty a string", body(presence_penalty="x"), "presence_penalty"),
    ("seed 1.5", body(seed=1.5), "seed"),
    ("stop a number", body(stop=5), "stop"),
    ("seventeen stops", body(stop=[str(i) for i in range(17)]), "stop"),
    ("an empty stop", body(stop=[""]), "stop[0]"),
    ("a stop a number", body(stop=[1]), "stop[0]"),
    ("logit_bias out of range", body(logit_bias={"1": 200}), "logit_bias.1"),
    ("logprobs a string", body(logprobs="yes"), "logprobs"),
    ("top_logprobs 30", body(top_logprobs=30), "top_logprobs"),
    ("user a number", body(user=5), "user"),
    ("metadata not strings", body(metadata={"a": 1}), "metadata.a"),
    ("model a number", body(model=5), "model"),
    ("reasoning_effort unknown", body(reasoning_effort="extreme"), "reasoning_effort"),
    ("service_tier a number", body(service_tier=5), "service_tier"),
    (
        "stream_options not a flag",
        body(stream_options={"include_usage": "yes"}),
        "stream_options.include_usage",
    ),
    # what the gateway cannot serve is refused, not ignored
    ("response_format xml", body(response_format={"type": "xml"}), "response_format.type"),
    (
        "json_schema without its object",
        body(response_format={"type": "json_schema"}),
        "response_format.json_schema",
    ),
    ("deprecated functions", body(functions=[TOOL["function"]]), "functions"),
    ("deprecated function_call", body(function_call="auto"), "function_call"),
    ("audio out", body(audio={"voice": "alloy", "format": "wav"}), "audio"),
    ("modalities audio", body(modalities=["text", "audio"]), "modalities[1]"),
    ("web search", body(web_search_options={}), "web_search_options"),
    # toolwire's extension
    ("toolwire a string", body(toolwire="strict"), "toolwire"),
    ("toolwire strict a string", body(toolwire={"strict": "yes"}), "toolwire.strict"),
    ("toolwire unknown setting", body(toolwire={"loose": True}), "toolwire.loose"),
]


ECHOED = {  # an assistant reply as the official client dumps it, sent back
    "role": "assistant",
    "content": None,
    "refusal": None,
    "annotations": [],
    "audio": None,
    "function_call": None,
    "reasoning_content": "thinking",
    "tool_calls": CALL["tool_calls"],
}

VALID: list[tuple[str, dict[str, Any]]] = [
    ("minimal", {"messages": [USER]}),
    ("with tools", BASE),
    ("a conversation with a result", body(messages=[USER, CALL, RESULT])),
    ("a reply echoed as the client dumps it", body(messages=[USER, ECHOED, RESULT])),
    ("content parts", part(USER, {"type": "text", "text": "hi"})),
    (
        "an image",
        part(
            USER, {"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "x"}}
        ),
    ),
    ("developer and system", body(messages=[{"role": "developer", "content": "be brief"}, USER])),
    (
        "a call without id or type",
        body(
            messages=[
                USER,
                {
                    "role": "assistant",
                    "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}],
                },
            ]
        ),
    ),
    ("named tool_choice", body(tool_choice={"type": "function", "function": {"name": "f"}})),
    ("tool_choice none", body(tool_choice="none")),
    ("tool_choice required", body(tool_choice="required")),
    (
        "sampling hints ignored",
        body(
            top_p=0.9,
            seed=1,
            stop=["\n\n"],
            frequency_penalty=0.5,
            presence_penalty=-0.5,
            logit_bias={"1": -100},
            user="u",
            metadata={"k": "v"},
            store=False,
            n=1,
            logprobs=False,
            reasoning_effort="low",
            stream_options={"include_usage": True},
            response_format={"type": "text"},
            modalities=["text"],
            top_k=40,
            min_p=0.05,
        ),
    ),
    ("nulls for optional fields", body(temperature=None, max_tokens=None, stream=None, tools=None)),
    ("temperature an integer", body(temperature=1)),
    ("the extension", body(toolwire={"strict": True, "constrained": False})),
    ("max_completion_tokens", body(max_completion_tokens=16)),
    ("a pair of surrogates is a character", user(content="smile \U0001f600")),
    (
        "a schema 60 levels deep",
        function(parameters={"type": "object", "properties": {"x": nested(55)}}),
    ),
]
