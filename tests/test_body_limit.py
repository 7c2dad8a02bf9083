"""A body past the gateway's limit gets a 413 the client can read, in its API's own error
shape, whether it declared its length or came in chunks: never a connection reset.

A client writes its whole body before it reads the answer; a server that answers and closes
while bytes are still coming resets the connection, and the client sees only the reset
(``APIConnectionError``). All over real HTTP on 127.0.0.1, with both of uvicorn's protocols
(httptools and h11), the official ``openai`` and ``anthropic`` clients and raw httpx.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from toolwire.server import MAX_BODY_BYTES, create_app, uvicorn_settings

from .gateway_requests import Recorder
from .test_gateway_input import served

SERVERS = pytest.mark.parametrize("fast", [True, False], ids=["httptools", "h11"])

#: A message of 9 MiB: past the 8 MiB limit.
BIG = "x" * (9 * 1024 * 1024)
LIMIT = f"{MAX_BODY_BYTES} bytes"


@pytest.fixture(params=[True, False], ids=["httptools", "h11"], scope="module")
def gateway(request: Any) -> Iterator[tuple[str, Recorder]]:
    backend = Recorder()
    with served(create_app(backend), uvicorn_settings(fast=request.param)) as url:
        yield url, backend


def chunks(data: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    """``data`` sent in chunks, with no length declared (chunked transfer encoding)."""
    for i in range(0, len(data), size):
        yield data[i : i + size]


def test_the_openai_client_reads_the_413_of_chat_completions(
    gateway: tuple[str, Recorder],
) -> None:
    url, backend = gateway
    client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0, timeout=60)
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": BIG}])
    assert info.value.status_code == 413
    assert LIMIT in info.value.message
    assert info.value.body["type"] == "invalid_request_error"  # type: ignore[index]
    assert backend.requests == []
    assert httpx.get(url + "/health", timeout=10).status_code == 200


def test_the_openai_client_reads_the_413_of_responses(gateway: tuple[str, Recorder]) -> None:
    url, backend = gateway
    client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0, timeout=60)
    with pytest.raises(openai.APIStatusError) as info:
        client.responses.create(model="m", input=BIG)
    assert info.value.status_code == 413
    assert LIMIT in info.value.message
    assert backend.requests == []


def test_the_anthropic_client_reads_the_413_of_messages(gateway: tuple[str, Recorder]) -> None:
    url, backend = gateway
    client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0, timeout=60)
    with pytest.raises(anthropic.APIStatusError) as info:
        client.messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": BIG}]
        )
    assert info.value.status_code == 413
    body: Any = info.value.body
    assert body["type"] == "error" and body["error"]["type"] == "request_too_large"
    assert LIMIT in body["error"]["message"]
    assert backend.requests == []
    assert httpx.get(url + "/health", timeout=10).status_code == 200


@pytest.mark.parametrize(
    ("path", "sent"),
    [
        ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": BIG}]}),
        ("/v1/responses", {"model": "m", "input": BIG}),
        (
            "/v1/messages",
            {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": BIG}]},
        ),
    ],
    ids=["chat", "responses", "messages"],
)
def test_a_chunked_body_past_the_limit_gets_a_readable_413(
    gateway: tuple[str, Recorder], path: str, sent: dict[str, Any]
) -> None:
    """No length declared: the body passes the limit mid-way, and the answer still arrives."""
    url, backend = gateway
    data = json.dumps(sent).encode()
    r = httpx.post(url + path, content=chunks(data), timeout=60)
    assert r.status_code == 413
    assert "content-length" not in r.request.headers
    assert r.headers["connection"] == "close"
    body = r.json()
    message = body["error"]["message"]
    assert LIMIT in message
    if path == "/v1/messages":
        assert body["type"] == "error" and body["error"]["type"] == "request_too_large"
    else:
        assert body["error"]["type"] == "invalid_request_error"
    assert backend.requests == []
    assert httpx.get(url + "/health", timeout=10).status_code == 200


def test_a_body_just_under_the_limit_is_served(gateway: tuple[str, Recorder]) -> None:
    url, backend = gateway
    before = len(backend.requests)
    filler = "x" * (MAX_BODY_BYTES - 1024)
    client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0, timeout=60)
    reply = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": filler}]
    )
    assert reply.choices[0].message.content == "ok"
    assert len(backend.requests) == before + 1


def test_a_body_declared_far_past_what_is_drained_is_refused_unread(
    gateway: tuple[str, Recorder],
) -> None:
    """A length past the limit and the bytes drained is answered before any of it is read
    (the connection is closed: no server reads a gigabyte to refuse it)."""
    url, backend = gateway
    before = len(backend.requests)
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"content-length: 1099511627776\r\n\r\n"
    )
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head + b'{"messages": [')
        reply = b""
        while True:
            piece = sock.recv(65536)
            if not piece:
                break
            reply += piece
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert LIMIT.encode() in reply
    assert len(backend.requests) == before


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_client_that_writes_its_whole_body_first_is_not_reset(
    gateway: tuple[str, Recorder], declared: bool
) -> None:
    """A client that writes all 9 MiB before it reads (as most do, and ones that do not
    read on after a failed write) can: the rest of the body is read and dropped, not
    answered with a reset, and the 413 is there to read after."""
    url, _ = gateway
    data = json.dumps({"model": "m", "messages": [{"role": "user", "content": BIG}]}).encode()
    framing = f"content-length: {len(data)}" if declared else "transfer-encoding: chunked"
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        f"{framing}\r\n\r\n"
    ).encode()
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head)
        for piece in chunks(data):
            sock.sendall(piece if declared else b"%x\r\n%s\r\n" % (len(piece), piece))
        if not declared:
            sock.sendall(b"0\r\n\r\n")
        reply = b""
        while True:
            piece = sock.recv(65536)
            if not piece:
                break
            reply += piece
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert b"connection: close" in reply.lower()
    assert LIMIT.encode() in reply
