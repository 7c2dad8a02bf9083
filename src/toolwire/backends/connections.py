"""A lean HTTP/1.1 transport for httpx: kept-alive connections, each request one write.

The gateway sends every request to an upstream and reads every reply, so the client's own
cost is paid on each: httpx's default transport (httpcore over h11 and anyio) spends more
CPU per request than the rest of the gateway together, in Python-level parsing and pool
scans, and writes a request's head and body in separate system calls. This transport keeps
httpx's client (its API, its exceptions, :class:`httpx.MockTransport` in tests) and replaces
what is under it: an :class:`asyncio.Protocol` per connection, the response parsed by
httptools (the C parser uvicorn uses), the request written with one ``write``, and a pool
that takes and returns a connection in constant time (idle ones are kept newest first;
one the server closed is known at once, from the protocol, without a probe).

Everything stays bounded: a response head over :data:`MAX_HEAD_BYTES` is a protocol
error, reading pauses while more than :data:`HIGH_WATER` bytes wait unread, and the
timeouts httpx passes (connect, read, pool) are applied to every wait. Errors are httpx's
own (``ConnectError``, ``ConnectTimeout``, ``ReadTimeout``, ``PoolTimeout``,
``RemoteProtocolError``), with httpcore's words where callers read them ("without sending
a response": nothing was done, the request may go again).

Only plain HTTP/1.1 and HTTPS, without proxies: :func:`~toolwire.backends.http.new_client`
uses httpx's own transport behind a proxy.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from collections.abc import AsyncIterator
from typing import Any

import httptools
import httpx

__all__ = ["HIGH_WATER", "MAX_HEAD_BYTES", "ConnectionPool"]

#: The largest response head (status line and headers) read, in bytes.
MAX_HEAD_BYTES = 64 * 1024
#: Reading from a connection pauses while this many bytes of its body wait unread.
HIGH_WATER = 256 * 1024

#: A connection's origin: scheme, host, port.
_Key = tuple[bytes, bytes, int]

_NO_RESPONSE = "Server disconnected without sending a response."
_CUT = "peer closed connection without sending complete message body"


class _HeadTooLarge(Exception):
    pass


class _Connection(asyncio.Protocol):
    """One connection to one origin, one request at a time; the response as it is parsed.

    ``pending`` is the future of the response head (status, headers) while a request
    waits for it; the body arrives in ``chunks``, and ``waiter`` (while the reader waits)
    is resolved whenever there is more to read, the message ended or the connection
    did."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.error: Exception | None = None
        self.pending: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_bytes = 0
        self.chunks: collections.deque[bytes] = collections.deque()
        self.unread = 0
        self.paused = False
        self.complete = False
        self.started = False  # any byte of the current response arrived
        self.keep_alive = False
        self.head_only = False
        #: The body has neither a length nor chunks: it ends when the connection does.
        self.until_close = False
        self.waiter: asyncio.Future[None] | None = None

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.pending is None or self.complete:  # bytes no request asked for
            self.close()
            return
        self.started = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            cause = exc.__context__ if isinstance(exc.__context__, _HeadTooLarge) else exc
            self._fail(httpx.RemoteProtocolError(f"the upstream's reply is not HTTP: {cause}"))

    def eof_received(self) -> bool | None:
        return None  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.pending is not None and not self.pending.done():
            words = _NO_RESPONSE if not self.started else "the upstream closed mid-reply"
            self.pending.set_exception(httpx.RemoteProtocolError(words))
        elif not self.complete and self.pending is not None:
            if self.until_close and self.error is None:
                self.complete = True  # the close is the body's end
            else:
                self.error = self.error or httpx.RemoteProtocolError(_CUT)
        self._wake()

    # -- httptools callbacks

    def on_message_begin(self) -> None:
        self.headers = []
        self.head_bytes = 0

    def on_status(self, status: bytes) -> None:
        self._count(len(status))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        self.headers.append((name, value))

    def _count(self, size: int) -> None:
        self.head_bytes += size
        if self.head_bytes > MAX_HEAD_BYTES:
            raise _HeadTooLarge(f"its head is over {MAX_HEAD_BYTES} bytes")

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # an interim answer: the real one follows
            return
        self.keep_alive = self.parser.should_keep_alive() and not self.head_only
        framed = {name.lower() for name, _ in self.headers} & {
            b"content-length",
            b"transfer-encoding",
        }
        self.until_close = not framed and status not in (204, 304) and not self.head_only
        if self.pending is not None and not self.pending.done():
            self.pending.set_result((status, self.headers))
        if self.head_only:  # no body follows the head of a HEAD, whatever it says
            self.complete = True
            self._wake()

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)
        self.unread += len(body)
        if self.unread > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.parser.get_status_code() < 200:
            return
        self.complete = True
        self._wake()

    # -- use

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def _fail(self, error: Exception) -> None:
        self.error = error
        if self.pending is not None and not self.pending.done():
            self.pending.set_exception(error)
        self.close()
        self._wake()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def reusable(self) -> bool:
        return not self.closed and self.complete and self.keep_alive and not self.chunks

    def send(self, data: bytes, method: str) -> asyncio.Future[Any]:
        """Write one request; the future of its response head."""
        if self.closed or self.transport is None or self.transport.is_closing():
            raise httpx.RemoteProtocolError(_NO_RESPONSE)  # no byte was sent
        self.pending = self.loop.create_future()
        self.complete = self.started = False
        self.error = None
        self.chunks.clear()
        self.unread = 0
        self.head_only = method == "HEAD"
        self.until_close = False
        self.transport.write(data)
        return self.pending

    async def body(self, read_timeout: float | None) -> AsyncIterator[bytes]:
        """The response body's pieces as they come, each waited for at most
        ``read_timeout`` seconds."""
        while True:
            if self.chunks:
                piece = self.chunks.popleft()
                self.unread -= len(piece)
                if self.paused and self.unread <= HIGH_WATER // 2 and self.transport:
                    self.paused = False
                    self.transport.resume_reading()
                yield piece
                continue
            if self.complete:
                return
            if self.error is not None:
                raise self.error
            if self.closed:
                raise httpx.RemoteProtocolError(_CUT)
            self.waiter = self.loop.create_future()
            try:
                await asyncio.wait_for(self.waiter, read_timeout)
            except asyncio.TimeoutError:
                raise httpx.ReadTimeout("timed out reading the reply") from None
            finally:
                self.waiter = None


class _Body(httpx.AsyncByteStream):
    """A response body; closed, it gives its connection back to the pool (when the reply
    was read whole and the server keeps the connection) or closes it."""

    def __init__(self, pool: ConnectionPool, key: Any, conn: _Connection, read: float | None):
        self._pool = pool
        self._key = key
        self._conn = conn
        self._read = read
        self._open = True

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self._conn.body(self._read):
            yield piece

    async def aclose(self) -> None:
        if self._open:
            self._open = False
            self._pool.release(self._key, self._conn)


def _timeouts(request: httpx.Request) -> dict[str, float | None]:
    given = request.extensions.get("timeout") or {}
    return {k: given.get(k) for k in ("connect", "read", "write", "pool")}


class _Origin:
    """The connections to one scheme, host and port: the idle ones newest first, how many
    are open, and the requests waiting for one (in order)."""

    __slots__ = ("idle", "open", "waiting")

    def __init__(self) -> None:
        self.idle: list[_Connection] = []
        self.open = 0
        self.waiting: collections.deque[asyncio.Future[None]] = collections.deque()


class ConnectionPool(httpx.AsyncBaseTransport):
    """At most ``connections`` connections per origin, all kept alive while idle."""

    def __init__(self, *, connections: int, verify: ssl.SSLContext) -> None:
        if connections < 1:
            raise ValueError("a connection pool needs room for at least one connection")
        self._limit = connections
        self._tls = verify
        self._origins: dict[_Key, _Origin] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        scheme = url.raw_scheme
        if scheme not in (b"http", b"https"):
            raise httpx.UnsupportedProtocol(f"{url.scheme!r} is not HTTP")
        port = url.port or (443 if scheme == b"https" else 80)
        key = (scheme, url.raw_host, port)
        timeouts = _timeouts(request)
        body = (
            request.content
            if isinstance(request.stream, httpx.ByteStream)
            else b"".join(
                [piece async for piece in request.stream]  # type: ignore[union-attr]
            )
        )
        head = [request.method.encode(), b" ", url.raw_path, b" HTTP/1.1\r\n"]
        has_length = False
        for name, value in request.headers.raw:
            has_length = has_length or name.lower() in (b"content-length", b"transfer-encoding")
            head += [name, b": ", value, b"\r\n"]
        if body and not has_length:
            head += [b"Content-Length: ", str(len(body)).encode(), b"\r\n"]
        data = b"".join([*head, b"\r\n", body])
        conn = await self._acquire(key, timeouts)
        try:
            try:
                status, headers = await asyncio.wait_for(
                    conn.send(data, request.method), timeouts["read"]
                )
            except asyncio.TimeoutError:
                raise httpx.ReadTimeout("timed out waiting for the reply's head") from None
        except BaseException:
            conn.close()
            self.release(key, conn)
            raise
        return httpx.Response(
            status,
            headers=headers,
            stream=_Body(self, key, conn, timeouts["read"]),
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def _acquire(self, key: _Key, timeouts: dict[str, Any]) -> _Connection:
        origin = self._origins.get(key)
        if origin is None:
            origin = self._origins[key] = _Origin()
        while origin.idle:
            conn = origin.idle.pop()
            if not conn.closed:
                return conn
            origin.open -= 1
        if origin.open >= self._limit:
            waiter = asyncio.get_running_loop().create_future()
            origin.waiting.append(waiter)
            try:
                await asyncio.wait_for(waiter, timeouts["pool"])
            except asyncio.TimeoutError:
                raise httpx.PoolTimeout("no connection came free in time") from None
            finally:
                if waiter in origin.waiting:
                    origin.waiting.remove(waiter)
            return await self._acquire(key, timeouts)
        origin.open += 1
        try:
            return await self._connect(key, timeouts["connect"])
        except BaseException:
            origin.open -= 1
            self._wake(origin)
            raise

    async def _connect(self, key: _Key, timeout: float | None) -> _Connection:
        scheme, raw_host, port = key
        host = raw_host.decode("ascii")
        loop = asyncio.get_running_loop()
        tls = self._tls if scheme == b"https" else None
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Connection(loop),
                    host,
                    port,
                    ssl=tls,
                    server_hostname=host if tls else None,
                ),
                timeout,
            )
        except asyncio.TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        return conn

    def release(self, key: _Key, conn: _Connection) -> None:
        """A request is done with ``conn``: kept for the next, or closed."""
        origin = self._origins[key]
        if conn.reusable():
            origin.idle.append(conn)
        else:
            conn.close()
            origin.open -= 1
        self._wake(origin)

    @staticmethod
    def _wake(origin: _Origin) -> None:
        while origin.waiting:
            waiter = origin.waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def aclose(self) -> None:
        for origin in self._origins.values():
            for conn in origin.idle:
                conn.close()
            origin.idle.clear()
            origin.open = 0
        self._origins.clear()
