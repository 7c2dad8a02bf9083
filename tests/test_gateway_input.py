"""The gateway's input, as a hostile client sends it: every malformed request kind gets a 4xx
naming the field, streamed or not, before any backend call; the connection survives the
error; slow headers and bodies are cut off; a large body does not hold the server.

All over real HTTP on 127.0.0.1 (uvicorn with toolwire's settings for slow clients), in front
of a backend that records every call it gets.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import uvicorn

from toolwire.events import Done, Event, TextDelta
from toolwire.pipeline import Request
from toolwire.server import create_app, uvicorn_settings
from toolwire.server.guard import GuardedH11Protocol


class Recorder:
    """A backend that answers "ok" and records every request it is asked."""

    name = "recorder"

    def __init__(self) -> None:
        self.requests: list[Request] = []

    async def stream(self, request: Request) -> AsyncIterator[Event]:
        self.requests.append(request)
        yield TextDelta("ok")
        yield Done("stop")


class Peers:
    """ASGI middleware noting each request's client port (one port: one connection)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.ports: list[int] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("client"):
            self.ports.append(scope["client"][1])
        await self.app(scope, receive, send)


class Quick(GuardedH11Protocol):
    header_timeout = 0.5
    request_timeout = 1.5


@contextlib.contextmanager
def served(app: Any, protocol: type[GuardedH11Protocol] | None = None) -> Iterator[str]:
    """``app`` under uvicorn on 127.0.0.1 with toolwire's slow-client settings."""
    settings = uvicorn_settings()
    if protocol is not None:
        settings["http"] = protocol
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", **settings
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[str, Recorder, Peers]]:
    backend = Recorder()
    app = Peers(create_app(backend))
    with served(app) as url:
        yield url, backend, app


# --------------------------------------------------------------------------- the kinds

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
    ("five stops", body(stop=["a", "b", "c", "d", "e"]), "stop"),
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
    ("json_object", body(response_format={"type": "json_object"}), "response_format.type"),
    (
        "json_schema",
        body(response_format={"type": "json_schema", "json_schema": {"name": "x"}}),
        "response_format.type",
    ),
    ("deprecated functions", body(functions=[TOOL["function"]]), "functions"),
    ("deprecated function_call", body(function_call="auto"), "function_call"),
    ("audio out", body(audio={"voice": "alloy", "format": "wav"}), "audio"),
    ("modalities audio", body(modalities=["text", "audio"]), "modalities[1]"),
    ("web search", body(web_search_options={}), "web_search_options"),
    ("an unknown field", body(foo=1), "foo"),
    # toolwire's extension
    ("toolwire a string", body(toolwire="strict"), "toolwire"),
    ("toolwire strict a string", body(toolwire={"strict": "yes"}), "toolwire.strict"),
    ("toolwire unknown setting", body(toolwire={"loose": True}), "toolwire.loose"),
]


def streamed(sent: Any) -> Any:
    """The same request asking for a stream (a body of bytes: in its first object)."""
    if isinstance(sent, dict):
        return sent if "stream" in sent else {**sent, "stream": True}
    if sent.startswith(b"{") and b'"stream"' not in sent:
        return b'{"stream": true, ' + sent[1:]
    return sent


def post(client: httpx.Client, url: str, sent: Any) -> httpx.Response:
    if isinstance(sent, dict):
        return client.post(url + "/v1/chat/completions", json=sent)
    headers = {"content-type": "application/json"}
    return client.post(url + "/v1/chat/completions", content=sent, headers=headers)


def test_there_are_at_least_80_kinds() -> None:
    assert len(MALFORMED) >= 80
    assert len({kind for kind, _, _ in MALFORMED}) == len(MALFORMED)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize(("kind", "sent", "field"), MALFORMED, ids=[k for k, _, _ in MALFORMED])
def test_a_malformed_request_gets_a_400_naming_the_field_and_no_backend_call(
    gateway: tuple[str, Recorder, Peers], kind: str, sent: Any, field: str | None, stream: bool
) -> None:
    url, backend, _ = gateway
    before = len(backend.requests)
    with httpx.Client(timeout=10) as client:
        r = post(client, url, streamed(sent) if stream else sent)
    assert r.status_code == 400, (kind, r.text)
    assert r.headers["content-type"] == "application/json"
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error"
    if field is not None and field.endswith("*"):
        assert error["param"].startswith(field[:-1]), error
    else:
        assert error["param"] == field, error
    # the message names the field too, for clients that show only the message
    assert error["message"].startswith(field.rstrip("*") if field else "the request body")
    assert len(backend.requests) == before


def test_each_error_leaves_the_connection_open_for_the_next_request(
    gateway: tuple[str, Recorder, Peers],
) -> None:
    """One client, one connection: every malformed kind, each followed by a good request."""
    url, backend, peers = gateway
    start = len(peers.ports)
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    with httpx.Client(timeout=10, limits=limits) as client:
        for kind, sent, _ in MALFORMED:
            assert post(client, url, sent).status_code == 400, kind
            good = post(client, url, BASE)
            assert good.status_code == 200, kind
            assert good.json()["choices"][0]["message"]["content"] == "ok"
    assert len(set(peers.ports[start:])) == 1
    assert len(peers.ports) - start == 2 * len(MALFORMED)
    assert len(backend.requests) >= len(MALFORMED)


# --------------------------------------------------------------------------- valid requests

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


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize(("kind", "sent"), VALID, ids=[k for k, _ in VALID])
def test_valid_requests_reach_the_backend(
    gateway: tuple[str, Recorder, Peers], kind: str, sent: dict[str, Any], stream: bool
) -> None:
    url, backend, _ = gateway
    before = len(backend.requests)
    with httpx.Client(timeout=10) as client:
        r = post(client, url, {**sent, "stream": True} if stream else sent)
    assert r.status_code == 200, (kind, r.text)
    if stream:
        assert r.text.rstrip().endswith("data: [DONE]")
    else:
        assert r.json()["choices"][0]["message"]["content"] == "ok"
    assert len(backend.requests) == before + 1
    assert backend.requests[-1].messages == sent["messages"]


def test_what_the_backend_is_asked(gateway: tuple[str, Recorder, Peers]) -> None:
    url, backend, _ = gateway
    other = {**TOOL, "function": {**TOOL["function"], "name": "g"}}
    sent = body(
        tools=[TOOL, other],
        tool_choice={"type": "function", "function": {"name": "g"}},
        temperature=0.5,
        max_completion_tokens=7,
        toolwire={"strict": True},
    )
    assert httpx.post(url + "/v1/chat/completions", json=sent, timeout=10).status_code == 200
    asked = backend.requests[-1]
    assert [t["function"]["name"] for t in asked.tools or ()] == ["g"]
    assert asked.tool_choice == sent["tool_choice"]
    assert (asked.temperature, asked.max_tokens, asked.strict, asked.constrained) == (
        0.5,
        7,
        True,
        True,
    )
    httpx.post(url + "/v1/chat/completions", json=body(tool_choice="none"), timeout=10)
    assert backend.requests[-1].tools is None and backend.requests[-1].tool_choice is None


# --------------------------------------------------------------------------- slow clients


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _read_all(sock: socket.socket) -> bytes:
    out = b""
    with contextlib.suppress(ConnectionResetError):
        while piece := sock.recv(65536):
            out += piece
    return out


HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"


def test_headers_sent_slowly_are_cut_off() -> None:
    with served(create_app(Recorder()), Quick) as url:
        sock = _connect(url)
        start = time.monotonic()
        with contextlib.suppress(OSError):  # the server may close while we still send
            for byte in HEAD:
                sock.sendall(bytes([byte]))
                time.sleep(0.05)
        reply = _read_all(sock)
        took = time.monotonic() - start
        sock.close()
    assert reply.startswith(b"HTTP/1.1 408")
    assert took < 0.5 + 2


def test_a_silent_connection_is_closed() -> None:
    with served(create_app(Recorder()), Quick) as url:
        sock = _connect(url)
        start = time.monotonic()
        assert _read_all(sock) == b""
        assert time.monotonic() - start < 0.5 + 2
        sock.close()


def test_a_body_sent_slowly_gets_a_408_and_the_backend_is_not_called() -> None:
    backend = Recorder()
    with served(create_app(backend, body_timeout=0.5)) as url:
        sock = _connect(url)
        sock.sendall(HEAD + b"content-length: 1000\r\n\r\n")
        start = time.monotonic()
        with contextlib.suppress(OSError):
            for _ in range(100):
                sock.sendall(b" ")
                time.sleep(0.05)
        reply = _read_all(sock)
        sock.close()
    assert reply.startswith(b"HTTP/1.1 408")
    assert b"connection: close" in reply.lower()
    assert json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"]["message"].startswith(
        "the request body was not received within 0.5 s"
    )
    assert time.monotonic() - start < 3
    assert backend.requests == []


def test_a_body_the_app_never_reads_cannot_hold_the_connection() -> None:
    """/health answers without reading a body; the connection's own deadline ends it."""
    with served(create_app(Recorder()), Quick) as url:
        sock = _connect(url)
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\ncontent-length: 100000\r\n\r\n")
        start = time.monotonic()
        with contextlib.suppress(OSError):
            for _ in range(200):
                sock.sendall(b" ")
                time.sleep(0.05)
        reply = _read_all(sock)
        sock.close()
    assert b'{"status":"ok"}' in reply
    assert time.monotonic() - start < 1.5 + 3


def _eight_megabytes(shape: str) -> bytes:
    if shape == "one long string":
        content = "x" * (8 * 1024 * 1024 - 200)
        return json.dumps({"messages": [{"role": "user", "content": content}]}).encode()
    one = {"role": "user", "content": "x"}  # about 35 bytes each
    return json.dumps({"messages": [one] * (8 * 1024 * 1024 // 36)}).encode()


@pytest.mark.parametrize("shape", ["one long string", "230,000 small messages"])
def test_a_large_body_in_small_pieces_does_not_hold_health(shape: str) -> None:
    """8 MB in 64-byte pieces, sent as fast as it goes: /health answers meanwhile, each time
    well within a second (the body is kept as a list of pieces and checked off the loop, in
    slices that let the loop run between them)."""
    backend = Recorder()
    sent = _eight_megabytes(shape)
    assert len(sent) <= 8 * 1024 * 1024
    with served(create_app(backend)) as url:
        done = threading.Event()
        waits: list[float] = []

        def health() -> None:
            with httpx.Client(timeout=10) as client:
                while not done.is_set():
                    start = time.monotonic()
                    assert client.get(url + "/health").status_code == 200
                    waits.append(time.monotonic() - start)
                    time.sleep(0.02)

        poller = threading.Thread(target=health)
        poller.start()
        try:
            sock = _connect(url)
            sock.sendall(HEAD + f"content-length: {len(sent)}\r\n\r\n".encode())
            for i in range(0, len(sent), 64):
                sock.sendall(sent[i : i + 64])
            sock.settimeout(60)
            reply = b""
            while b"\r\n\r\n" not in reply or not reply.endswith(b"}"):
                piece = sock.recv(65536)
                if not piece:
                    break
                reply += piece
            sock.close()
        finally:
            done.set()
            poller.join()
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
    assert len(backend.requests) == 1
    print(f"/health: {len(waits)} answers, the slowest in {max(waits):.3f} s")
    assert len(waits) >= 5 and max(waits) < 1.0, waits


def test_a_body_past_the_limit_gets_a_413_and_no_backend_call() -> None:
    backend = Recorder()
    with served(create_app(backend, max_body_bytes=100_000)) as url:
        sent = {"messages": [{"role": "user", "content": "x" * 200_000}]}
        r = httpx.post(url + "/v1/chat/completions", json=sent, timeout=10)
    assert r.status_code == 413
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert backend.requests == []
