"""The gateway's input, as a hostile client sends it: every malformed request kind gets a 4xx
naming the field, streamed or not, before any backend call; the connection survives the
error; slow headers and bodies are cut off; a large body does not hold the server.

All over real HTTP on 127.0.0.1 (uvicorn with toolwire's settings for slow clients), in front
of a backend that records every call it gets.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from uvicorn.importer import import_from_string

from toolwire.server import create_app, uvicorn_settings
from toolwire.server.guard import (
    HTTPTOOLS_PROTOCOL,
    MAX_HEADER_BYTES,
    GuardedH11Protocol,
    fast_server,
    httptools_protocol,
)

from .gateway_requests import BASE, MALFORMED, TOOL, VALID, Recorder, body

#: What a loaded machine may add to a short deadline these tests set before it is seen to
#: end the connection: well under the 10 s (headers) and 45 s (body) the server's own
#: deadlines would take, and the for ever a connection without a deadline would.
SLACK = 5.0


class Peers:
    """ASGI middleware noting each request's client port (one port: one connection)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.ports: list[int] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("client"):
            self.ports.append(scope["client"][1])
        await self.app(scope, receive, send)


def quick(fast: bool) -> dict[str, Any]:
    """The server's settings (the fast one: uvloop and httptools; or h11) with short
    deadlines."""
    settings = uvicorn_settings(fast=fast)
    guarded: Any = httptools_protocol() if fast else GuardedH11Protocol

    class Quick(guarded):  # type: ignore[misc, valid-type]
        header_timeout = 0.5
        request_timeout = 1.5

    return {**settings, "http": Quick}


#: Both servers toolwire runs: the fast one wherever it is installed (as here: a test
#: dependency), and the pure-Python fallback.
SERVERS = pytest.mark.parametrize("fast", [True, False], ids=["httptools", "h11"])


def test_the_fast_server_is_installed_and_guarded() -> None:
    assert fast_server()
    settings = uvicorn_settings()
    assert settings["http"] == HTTPTOOLS_PROTOCOL and settings["loop"] == "uvloop"
    # uvicorn imports it by name (so serve --workers can send it to each process)
    assert import_from_string(HTTPTOOLS_PROTOCOL) is httptools_protocol()
    assert uvicorn_settings(fast=False)["http"] is GuardedH11Protocol


@contextlib.contextmanager
def served(app: Any, settings: dict[str, Any] | None = None) -> Iterator[str]:
    """``app`` under uvicorn on 127.0.0.1 with toolwire's slow-client settings."""
    settings = settings if settings is not None else uvicorn_settings()
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
    """One client, one connection: every malformed kind, plain and streamed, each followed by
    a good request (streamed after a streamed one)."""
    url, backend, peers = gateway
    start = len(peers.ports)
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    with httpx.Client(timeout=10, limits=limits) as client:
        for kind, sent, _ in MALFORMED:
            assert post(client, url, sent).status_code == 400, kind
            good = post(client, url, BASE)
            assert good.status_code == 200, kind
            assert good.json()["choices"][0]["message"]["content"] == "ok"
            assert post(client, url, streamed(sent)).status_code == 400, kind
            good = post(client, url, streamed(BASE))
            assert good.status_code == 200, kind
            assert good.text.rstrip().endswith("data: [DONE]")
    assert len(set(peers.ports[start:])) == 1
    assert len(peers.ports) - start == 4 * len(MALFORMED)
    assert len(backend.requests) >= 2 * len(MALFORMED)


# --------------------------------------------------------------------------- valid requests


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


def _trickle(sock: socket.socket, pieces: Any) -> float:
    """Send the pieces 50 ms apart until the server answers or closes (then stop, so that
    nothing sent after its close resets what it answered); the seconds it took."""
    start = time.monotonic()
    for piece in pieces:
        if select.select([sock], [], [], 0)[0]:
            break
        try:
            sock.sendall(piece)
        except OSError:
            break
        time.sleep(0.05)
    select.select([sock], [], [], 10)
    return time.monotonic() - start


HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
FOREVER = [b" "] * 100_000


@SERVERS
def test_headers_sent_slowly_are_cut_off(fast: bool) -> None:
    with served(create_app(Recorder()), quick(fast)) as url:
        sock = _connect(url)
        took = _trickle(sock, (bytes([byte]) for byte in HEAD + b"x-slow: " + b"a" * 1000))
        reply = _read_all(sock)
        sock.close()
    assert reply.startswith(b"HTTP/1.1 408")
    assert took < 0.5 + SLACK


@SERVERS
def test_a_silent_connection_is_closed(fast: bool) -> None:
    with served(create_app(Recorder()), quick(fast)) as url:
        sock = _connect(url)
        start = time.monotonic()
        assert _read_all(sock) == b""
        assert time.monotonic() - start < 0.5 + SLACK
        sock.close()


@SERVERS
def test_a_body_sent_slowly_gets_a_408_and_the_backend_is_not_called(fast: bool) -> None:
    backend = Recorder()
    with served(create_app(backend, body_timeout=0.5), uvicorn_settings(fast=fast)) as url:
        sock = _connect(url)
        sock.sendall(HEAD + b"content-length: 100000\r\n\r\n")
        took = _trickle(sock, FOREVER)
        reply = _read_all(sock)
        sock.close()
    assert reply.startswith(b"HTTP/1.1 408")
    assert b"connection: close" in reply.lower()
    assert json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"]["message"].startswith(
        "the request body was not received within 0.5 s"
    )
    assert took < 0.5 + SLACK
    assert backend.requests == []


@SERVERS
def test_a_body_the_app_never_reads_cannot_hold_the_connection(fast: bool) -> None:
    """/health answers without reading a body; the connection's own deadline ends it."""
    with served(create_app(Recorder()), quick(fast)) as url:
        sock = _connect(url)
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\ncontent-length: 100000\r\n\r\n")
        answer = b""
        while b'{"status":"ok"}' not in answer:
            answer += sock.recv(65536)
        took = _trickle(sock, FOREVER)  # the body goes on, unread, until the deadline
        with contextlib.suppress(ConnectionResetError):
            assert sock.recv(65536) == b""  # closed
        sock.close()
    assert 1.0 < took < 1.5 + SLACK


def _eight_megabytes(shape: str) -> bytes:
    if shape == "one long string":
        content = "x" * (8 * 1024 * 1024 - 200)
        return json.dumps({"messages": [{"role": "user", "content": content}]}).encode()
    one = {"role": "user", "content": "x"}  # about 35 bytes each
    return json.dumps({"messages": [one] * (8 * 1024 * 1024 // 36)}).encode()


@SERVERS
@pytest.mark.parametrize("shape", ["one long string", "230,000 small messages"])
def test_a_large_body_in_small_pieces_does_not_hold_health(shape: str, fast: bool) -> None:
    """8 MB in 64-byte pieces, sent as fast as it goes: /health answers meanwhile, each time
    well within a second (the body is kept as a list of pieces and checked off the loop, in
    slices that let the loop run between them)."""
    backend = Recorder()
    sent = _eight_megabytes(shape)
    assert len(sent) <= 8 * 1024 * 1024
    with served(create_app(backend), uvicorn_settings(fast=fast)) as url:
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


@SERVERS
@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_body_past_the_limit_gets_a_413_and_no_backend_call(declared: bool, fast: bool) -> None:
    """Declared too large, it is refused before it is read; sent in chunks with no length,
    as soon as it passes the limit."""
    backend = Recorder()
    sent = json.dumps({"messages": [{"role": "user", "content": "x" * 200_000}]}).encode()
    content: Any = (
        sent if declared else iter([sent[i : i + 4096] for i in range(0, len(sent), 4096)])
    )
    with served(create_app(backend, max_body_bytes=100_000), uvicorn_settings(fast=fast)) as url:
        r = httpx.post(url + "/v1/chat/completions", content=content, timeout=10)
    assert r.status_code == 413
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert r.headers["connection"] == "close"
    assert backend.requests == []


@SERVERS
@pytest.mark.parametrize("where", ["one header", "the path", "many headers"])
def test_a_request_head_past_the_bound_gets_a_400_and_is_closed(where: str, fast: bool) -> None:
    backend = Recorder()
    big = b"a" * (MAX_HEADER_BYTES + 100)
    head = {
        "one header": HEAD + b"x-big: " + big + b"\r\n",
        "the path": b"POST /v1/chat/completions?" + big + b" HTTP/1.1\r\nhost: x\r\n",
        "many headers": HEAD + b"".join(b"x-%d: %s\r\n" % (i, b"a" * 60) for i in range(400)),
    }[where]
    sent = json.dumps(BASE).encode()
    with served(create_app(backend), uvicorn_settings(fast=fast)) as url:
        sock = _connect(url)
        with contextlib.suppress(OSError):
            sock.sendall(head + b"content-length: %d\r\n\r\n" % len(sent) + sent)
        reply = _read_all(sock)
        sock.close()
        # the server goes on serving
        assert httpx.get(url + "/health", timeout=10).status_code == 200
    assert reply.startswith(b"HTTP/1.1 400"), reply[:100]
    assert b"connection: close" in reply.lower()
    assert backend.requests == []


@SERVERS
def test_a_head_just_under_the_bound_is_served(fast: bool) -> None:
    headers = {f"x-{i}": "a" * 60 for i in range(MAX_HEADER_BYTES // 80)}
    with served(create_app(Recorder()), uvicorn_settings(fast=fast)) as url:
        r = httpx.post(url + "/v1/chat/completions", json=BASE, headers=headers, timeout=10)
    assert r.status_code == 200, r.text
