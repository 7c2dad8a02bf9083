"""The lean connection pool under httpx, against raw HTTP servers on 127.0.0.1: connections
kept alive and reused (and closed once idle past their expiry), one write per request, a body
sent in pieces, a redirect followed, the limits of the pool and of a reply's head, every body
framing, the write timeout, and httpx's own errors for every failure.

The fault modes through the gateway and the backend (stalls, trickles, 200 MB lines, hang-ups)
run with this pool too: see tests/test_upstream_faults.py and test_upstream_faults_backend.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator

import httpx
import pytest

from toolwire.backends.connections import (
    HIGH_WATER,
    KEEPALIVE_EXPIRY,
    MAX_HEAD_BYTES,
    ClosedBeforeReply,
    ConnectionPool,
)
from toolwire.backends.http import _send, new_client, ssl_context

Reply = Callable[[bytes], bytes | None]


class KeepAlive:
    """An HTTP/1.1 server on 127.0.0.1 that keeps connections: ``reply`` makes the bytes
    answering each request (None: hang up). It counts connections (and those the client
    closed) and the reads it took to receive each request (one write by the client is one
    read here); a chunked request body is kept decoded."""

    def __init__(self, reply: Reply, close_after: bool = False) -> None:
        self.reply = reply
        #: Hang up after each reply (a reply framed by the close, or cut short).
        self.close_after = close_after
        self.connections = 0
        self.ended = 0  # connections the client closed
        self.requests: list[bytes] = []
        self.reads: list[int] = []
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            data, reads = b"", 0
            while True:
                while b"\r\n\r\n" not in data:
                    piece = conn.recv(65536)
                    if not piece:
                        self.ended += 1
                        return
                    data, reads = data + piece, reads + 1
                head, _, rest = data.partition(b"\r\n\r\n")
                length, chunked = 0, False
                for line in head.split(b"\r\n")[1:]:
                    key, _, value = line.partition(b":")
                    if key.strip().lower() == b"content-length":
                        length = int(value)
                    chunked = chunked or key.strip().lower() == b"transfer-encoding"
                if chunked:
                    body, rest, more = b"", rest, 0
                    while True:  # each chunk: its size in hex, CRLF, its bytes, CRLF
                        while b"\r\n" not in rest:
                            rest, more = rest + conn.recv(65536), more + 1
                        size_line, _, rest = rest.partition(b"\r\n")
                        size = int(size_line, 16)
                        while len(rest) < size + 2:
                            rest, more = rest + conn.recv(65536), more + 1
                        body, rest = body + rest[:size], rest[size + 2 :]
                        if size == 0:
                            break
                    request, data, reads = head + b"\r\n\r\n" + body, rest, reads + more
                else:
                    while len(rest) < length:
                        rest, reads = rest + conn.recv(65536), reads + 1
                    request, data = head + b"\r\n\r\n" + rest[:length], rest[length:]
                self.requests.append(request)
                self.reads.append(reads)
                reads = 0
                answer = self.reply(request)
                if answer is None:
                    return
                conn.sendall(answer)
                if self.close_after:
                    return

    def close(self) -> None:
        self._sock.close()


def ok(body: bytes = b'{"ok": true}', extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        + extra
        + b"content-length: %d\r\n\r\n" % len(body)
        + body
    )


@contextlib.contextmanager
def server(reply: Reply, close_after: bool = False) -> Iterator[KeepAlive]:
    s = KeepAlive(reply, close_after)
    try:
        yield s
    finally:
        s.close()


def client(
    connections: int = 8, expiry: float = KEEPALIVE_EXPIRY, **timeouts: float
) -> httpx.AsyncClient:
    pool = ConnectionPool(connections=connections, verify=ssl_context(), keepalive_expiry=expiry)
    return httpx.AsyncClient(transport=pool, timeout=httpx.Timeout(5.0, **timeouts))


def test_serves_client_is_the_lean_pool() -> None:
    made = new_client()
    assert isinstance(made._transport, ConnectionPool)


def test_behind_a_proxy_the_client_is_httpxs_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    made = new_client()
    assert not isinstance(made._transport, ConnectionPool)
    assert isinstance(made._transport, httpx.AsyncHTTPTransport)


def test_the_long_lived_client_reuses_its_connection() -> None:
    async def run() -> None:
        async with new_client() as http:
            for _ in range(5):
                assert (await http.post(s.url, json={})).status_code == 200

    with server(lambda _: ok()) as s:
        asyncio.run(run())
    assert len(s.requests) == 5 and s.connections == 1


def test_a_connection_is_kept_and_reused_and_each_request_is_one_write() -> None:
    async def run() -> list[bytes]:
        async with client() as http:
            return [(await http.post(s.url + "/v1/x", json={"n": i})).content for i in range(20)]

    with server(lambda _: ok()) as s:
        bodies = asyncio.run(run())
    assert bodies == [b'{"ok": true}'] * 20
    assert s.connections == 1
    assert s.reads == [1] * 20  # head and body in one write
    assert json.loads(s.requests[7].split(b"\r\n\r\n")[1]) == {"n": 7}


def test_concurrent_requests_open_connections_up_to_the_limit_and_wait_then() -> None:
    def slow(_: bytes) -> bytes:
        time.sleep(0.2)
        return ok()

    async def run() -> list[int]:
        async with client(connections=3) as http:
            replies = await asyncio.gather(*(http.post(s.url, json={}) for _ in range(9)))
            return [r.status_code for r in replies]

    with server(slow) as s:
        started = time.monotonic()
        statuses = asyncio.run(run())
        took = time.monotonic() - started
    assert statuses == [200] * 9
    assert s.connections == 3
    assert took >= 0.55  # three rounds of three


def test_a_request_waiting_past_the_pool_timeout_gets_a_pool_timeout() -> None:
    def slow(_: bytes) -> bytes:
        time.sleep(1.0)
        return ok()

    async def run() -> list[object]:
        async with client(connections=1, pool=0.2) as http:
            return await asyncio.gather(
                http.post(s.url, json={}), http.post(s.url, json={}), return_exceptions=True
            )

    with server(slow) as s:
        first, second = asyncio.run(run())
    assert isinstance(first, httpx.Response) and first.status_code == 200
    assert isinstance(second, httpx.PoolTimeout)


def test_a_server_closing_an_idle_connection_is_noticed_without_a_probe() -> None:
    """The server answers and closes (``connection: close``, or a hang-up later): the next
    request opens a new connection instead of failing on the dead one."""

    async def run() -> list[int]:
        async with client() as http:
            out = []
            for _ in range(3):
                out.append((await http.post(s.url, json={})).status_code)
                await asyncio.sleep(0.05)
            return out

    with server(lambda _: ok(extra=b"connection: close\r\n")) as s:
        assert asyncio.run(run()) == [200] * 3
    assert s.connections == 3


def test_a_body_given_in_pieces_is_sent_as_it_comes_not_hung() -> None:
    """An async iterator of bytes (httpx marks it chunked) goes chunk-encoded, piece by
    piece; the server reads the whole body and answers."""

    async def pieces() -> AsyncIterator[bytes]:
        for piece in (b'{"a": ', b"", b'"in pieces"}'):
            yield piece
            await asyncio.sleep(0.01)

    async def run() -> list[bytes]:
        async with client() as http:
            sent = [
                await asyncio.wait_for(http.post(s.url, content=pieces()), 5)
                for _ in range(2)  # and the connection is reused after
            ]
            return [r.content for r in sent]

    with server(lambda _: ok()) as s:
        assert asyncio.run(run()) == [b'{"ok": true}'] * 2
    assert [json.loads(r.split(b"\r\n\r\n", 1)[1]) for r in s.requests] == [{"a": "in pieces"}] * 2
    assert b"transfer-encoding: chunked" in s.requests[0].lower()
    assert s.connections == 1


def test_a_307_is_followed_with_its_body() -> None:
    """httpx builds the redirected request from the first one's stream (it has no
    ``.content``): the same body goes to the new place."""

    def answer(request: bytes) -> bytes:
        if request.startswith(b"POST /first "):
            return (
                b"HTTP/1.1 307 Temporary Redirect\r\nlocation: /second\r\ncontent-length: 0\r\n\r\n"
            )
        return ok(request.split(b"\r\n\r\n", 1)[1])

    async def run() -> httpx.Response:
        async with client() as http:
            return await http.post(s.url + "/first", json={"n": 7}, follow_redirects=True)

    with server(answer) as s:
        reply = asyncio.run(run())
    assert reply.status_code == 200 and reply.json() == {"n": 7}
    assert [r.split(b" ")[1] for r in s.requests] == [b"/first", b"/second"]
    assert s.connections == 1  # the 307's connection was reused


def test_an_idle_connection_is_closed_after_its_expiry() -> None:
    """Kept while idle for the expiry, then closed by the client (no request needed); the
    next request opens a new one."""

    async def run() -> tuple[int, int, int]:
        async with client(expiry=0.3) as http:
            await http.post(s.url, json={})
            await asyncio.sleep(0.1)
            await http.post(s.url, json={})  # within the expiry: reused
            reused = s.connections
            await asyncio.sleep(0.8)
            ended = s.ended  # closed while nothing was sent
            await http.post(s.url, json={})
            return reused, ended, s.connections

    with server(lambda _: ok()) as s:
        assert asyncio.run(run()) == (1, 1, 2)
    assert KEEPALIVE_EXPIRY == 4.0  # under the 5 s uvicorn and llama-server keep one


def test_a_server_not_reading_the_request_is_a_write_timeout() -> None:
    """The server accepts and never reads: once the socket's buffers are full, the write
    waits at most the write timeout (not the read timeout, nor for ever)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"

    async def run() -> None:
        async with client(write=0.3, read=3.0) as http:
            await http.post(url, content=b"x" * (64 * 1024 * 1024))

    try:
        started = time.monotonic()
        with pytest.raises(httpx.WriteTimeout):
            asyncio.run(run())
        assert time.monotonic() - started < 2.5
    finally:
        listener.close()


def test_only_a_connection_closed_before_the_reply_is_tried_again() -> None:
    """The retry knows the stale connection by the pool's own error type, not by words."""
    failures: list[Exception] = [ClosedBeforeReply(), httpx.RemoteProtocolError("bad reply")]
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls in (1, 3):
            raise failures[0 if calls == 1 else 1]
        return httpx.Response(200, json={"ok": True})

    async def run() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            reply = await _send(http, http.build_request("POST", "http://upstream/", json={}))
            assert reply.status_code == 200 and calls == 2
            with pytest.raises(httpx.RemoteProtocolError, match="bad reply"):
                await _send(http, http.build_request("POST", "http://upstream/", json={}))
            assert calls == 3

    asyncio.run(run())


@pytest.mark.parametrize(
    ("raw", "body"),
    [
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\n\r\n",
            b"hello world",
        ),
        (b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nto the end", b"to the end"),
        (b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"after"), b"after"),
        (b"HTTP/1.1 204 No Content\r\n\r\n", b""),
    ],
    ids=["chunked", "until-close", "interim-100", "no-content"],
)
def test_every_body_framing_is_read(raw: bytes, body: bytes) -> None:
    async def run() -> bytes:
        async with client() as http:
            return (await http.post(s.url, json={})).content

    with server(lambda _: raw, close_after=True) as s:
        assert asyncio.run(run()) == body


def test_a_stream_is_read_as_it_comes_and_reading_pauses_for_a_slow_reader() -> None:
    big = b"x" * (8 * HIGH_WATER)

    async def run() -> tuple[int, int]:
        async with client() as http, http.stream("POST", s.url, json={}) as r:
            await asyncio.sleep(0.3)  # the reply arrives while nothing reads it
            conn = next(iter(http._transport._origins.values())).open  # type: ignore[attr-defined]
            size = 0
            async for piece in r.aiter_bytes():
                size += len(piece)
            return size, conn

    with server(lambda _: ok(big)) as s:
        size, open_connections = asyncio.run(run())
    assert size == len(big) and open_connections == 1


def test_a_head_over_the_bound_is_a_protocol_error() -> None:
    huge = b"HTTP/1.1 200 OK\r\nx-big: " + b"a" * (MAX_HEAD_BYTES + 10) + b"\r\n\r\n"

    async def run() -> None:
        async with client() as http:
            await http.post(s.url, json={})

    with server(lambda _: huge) as s, pytest.raises(httpx.RemoteProtocolError, match="head"):
        asyncio.run(run())


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (None, "closed the connection before replying"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort", "complete message body"),
        (b"NOT HTTP AT ALL\r\n\r\n", "not HTTP"),
    ],
    ids=["hang-up", "cut-body", "not-http"],
)
def test_failures_are_httpx_errors(raw: bytes | None, words: str) -> None:
    async def run() -> bytes:
        async with client() as http:
            return (await http.post(s.url, json={})).content

    with (
        server(lambda _: raw, close_after=True) as s,
        pytest.raises(httpx.RemoteProtocolError, match=words) as raised,
    ):
        asyncio.run(run())
    # a hang-up before any reply, and only that, says that the request may go again
    assert isinstance(raised.value, ClosedBeforeReply) == (raw is None)


def test_a_silent_server_is_a_read_timeout_and_a_closed_port_a_connect_error() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    silent = f"http://127.0.0.1:{listener.getsockname()[1]}"
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()

    async def run(url: str) -> None:
        async with client(read=0.3) as http:
            await http.post(url, json={})

    try:
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            asyncio.run(run(silent))
        assert time.monotonic() - started < 2
        with pytest.raises(httpx.ConnectError):
            asyncio.run(run(f"http://127.0.0.1:{port}"))
    finally:
        listener.close()


def test_a_streamed_reply_closed_early_closes_its_connection() -> None:
    sse = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )

    async def first_piece() -> int:
        async with client() as http:
            async with http.stream("POST", s.url, json={}) as r:
                async for piece in r.aiter_raw():
                    assert piece
                    break
            # the reply was not read whole: its connection is not reused
            r2 = await http.post(s.url, json={})
            return r2.status_code

    answers = iter([sse + b"5\r\nfirst\r\n", ok()])
    with server(lambda _: next(answers)) as s:
        assert asyncio.run(first_piece()) == 200
    assert s.connections == 2


def test_a_cookie_an_upstream_sets_rides_on_no_later_request() -> None:
    """serve's client is shared by every client of the gateway: what one reply sets must
    never reach another caller's request."""

    async def run() -> None:
        async with new_client(5.0) as http:
            for _ in range(2):
                assert (await http.post(s.url, json={})).status_code == 200

    with server(lambda _: ok(extra=b"set-cookie: session=secret; Path=/\r\n")) as s:
        asyncio.run(run())
    assert len(s.requests) == 2
    assert b"secret" not in s.requests[1].lower() and b"cookie" not in s.requests[1].lower()


def test_a_transport_converts_each_distinct_tool_list_once() -> None:
    from toolwire.backends import OpenAIBackend
    from toolwire.backends.http import TOOL_LISTS_KEPT, wire_tools

    backend = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1")
    tool = {
        "type": "function",
        "function": {
            "name": "f",
            "description": "F.",
            "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}},
        },
    }
    same = json.loads(json.dumps([tool]))  # equal, not the same object
    first = backend.tools_on_wire([tool], "permissive")
    assert first == wire_tools([tool], "permissive")
    assert backend.tools_on_wire(same, "permissive") is first
    gemini = backend.tools_on_wire([tool], "gemini")
    assert gemini is not first and gemini == wire_tools([tool], "gemini")
    other = {**tool, "function": {**tool["function"], "name": "g"}}
    assert backend.tools_on_wire([other], "permissive")[0]["function"]["name"] == "g"
    # bounded: the oldest list goes first
    for i in range(TOOL_LISTS_KEPT + 5):
        named = {**tool, "function": {**tool["function"], "name": f"t{i}"}}
        backend.tools_on_wire([named], "permissive")
    assert backend.tools_on_wire([tool], "permissive") is not first
