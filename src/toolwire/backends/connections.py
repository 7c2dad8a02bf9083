"""A lean HTTP/1.1 transport for httpx: kept-alive connections, each request one write.

The gateway sends every request to an upstream and reads every reply, so the client's own
cost is paid on each: httpx's default transport (httpcore over h11 and anyio) spends more
CPU per request than the rest of the gateway together, in Python-level parsing and pool
scans, and writes a request's head and body in separate system calls. This transport keeps
httpx's client (its API, its exceptions, :class:`httpx.MockTransport` in tests) and replaces
what is under it: an :class:`asyncio.Protocol` per connection, the response parsed by
httptools (the C parser uvicorn uses), the request written with one ``write``, and a pool
that takes and returns a connection in constant time (the newest idle one is reused
first; one the server closed is known at once, from the protocol, without a probe).

It is kept rather than a library because none measured within the 10 % of its CPU a
library may cost to be taken instead. Through the gateway (benchmarks/gateway.py ``--http
pool,httpx,aiohttp``, one run, two shared cores), CPU per request at 32 concurrent, not
streamed and streamed: this pool 1.75 and 2.63 ms; httpx's own transport, tuned (one pool
as large, all kept alive, HTTP/1.1 only), 4.03 and 5.88 ms, and 32 ms a stream at 1,000
concurrent against this pool's 2.9 (httpcore's pool scans its connections for every
request); aiohttp's client under httpx (httpx-aiohttp) 2.01 and 2.71 ms: 15 % more on a
request not streamed (24 and 29 % in other runs), as much streamed.

A request body given as bytes (a JSON body: every request the backends send) goes in that
one write; one given as an async iterator of bytes is sent as it comes, chunk-encoded unless
the request names its length. Everything stays bounded: a response head over
:data:`MAX_HEAD_BYTES` is a protocol error, reading pauses while more than
:data:`HIGH_WATER` bytes wait unread, writing waits while the socket's buffer is full, and
the timeouts httpx passes (connect, write, read, pool) are applied to every wait. An idle
connection is kept :data:`KEEPALIVE_EXPIRY` seconds at most, then closed.

Errors are httpx's own (``ConnectError``, ``ConnectTimeout``, ``WriteTimeout``,
``ReadTimeout``, ``PoolTimeout``, ``RemoteProtocolError``); a connection the server closed
before sending a byte of its reply is :class:`ClosedBeforeReply`, one of httpx's
``RemoteProtocolError``: nothing was done, and the request may go again (which
:func:`~toolwire.backends.http.post_stream` does, knowing it by that type).

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

__all__ = [
    "HIGH_WATER",
    "KEEPALIVE_EXPIRY",
    "MAX_HEAD_BYTES",
    "ClosedBeforeReply",
    "ConnectionPool",
]

#: The largest response head (status line and headers) read, in bytes.
MAX_HEAD_BYTES = 64 * 1024
#: Reading from a connection pauses while this many bytes of its body wait unread.
HIGH_WATER = 256 * 1024
#: Seconds an idle connection is kept for the next request; then it is closed. Just under
#: the 5 s for which uvicorn (and so vLLM) and llama-server keep an idle connection, so that
#: a connection is seldom reused just as the server closes it (the retry on
#: :class:`ClosedBeforeReply` covers the rest), and a provider that keeps them longer costs
#: a new connection only after 4 s without a request.
KEEPALIVE_EXPIRY = 4.0

#: A connection's origin: scheme, host, port.
_Key = tuple[bytes, bytes, int]

_CUT = "peer closed connection without sending complete message body"


class ClosedBeforeReply(httpx.RemoteProtocolError):
    """The server closed the connection before a byte of its reply arrived (or before the
    request could be written): it did nothing with the request, which may go again on
    another connection. A kept-alive connection meets this when the server closes it just
    as it is reused."""

    def __init__(self, message: str = "the server closed the connection before replying"):
        super().__init__(message)


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
        #: The request was not written whole (the server answered first): not reusable.
        self.cut_short = False
        #: The transport's write buffer is full; ``drained`` is resolved when it is not.
        self.write_paused = False
        self.drained: asyncio.Future[None] | None = None
        #: The loop's clock when the connection was last given back to its pool.
        self.idle_since = 0.0

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

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._wake_writer()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.pending is not None and not self.pending.done():
            error = (
                ClosedBeforeReply()
                if not self.started
                else httpx.RemoteProtocolError("the upstream closed mid-reply")
            )
            self.pending.set_exception(error)
        elif not self.complete and self.pending is not None:
            if self.until_close and self.error is None:
                self.complete = True  # the close is the body's end
            else:
                self.error = self.error or httpx.RemoteProtocolError(_CUT)
        self._wake()
        self._wake_writer()

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
            self._wake_writer()  # a body still being written is no longer awaited
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

    def _wake_writer(self) -> None:
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)

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
        return (
            not self.closed
            and self.complete
            and self.keep_alive
            and not self.chunks
            and not self.cut_short
        )

    def send(self, data: bytes, method: str) -> asyncio.Future[Any]:
        """Write the start of a request (all of it, when its body is bytes); the future of
        its response head."""
        if self.closed or self.transport is None or self.transport.is_closing():
            raise ClosedBeforeReply("the connection closed before the request was sent")
        self.pending = self.loop.create_future()
        self.complete = self.started = self.cut_short = False
        self.error = None
        self.chunks.clear()
        self.unread = 0
        self.head_only = method == "HEAD"
        self.until_close = False
        self.transport.write(data)
        return self.pending

    def write(self, data: bytes) -> None:
        """More of the request's body."""
        if self.closed or self.transport is None:
            raise self.error or httpx.WriteError("the connection closed while the request went")
        self.transport.write(data)

    async def drain(self, timeout: float | None) -> None:
        """Wait, at most ``timeout`` seconds, until the socket takes more of the request:
        while the transport's buffer is full (a server not reading), or until the reply
        begins or the connection ends."""
        while self.write_paused and not self.closed:
            if self.pending is not None and self.pending.done():
                self.cut_short = True  # answered before it was all sent: not reusable
                return
            self.drained = self.loop.create_future()
            try:
                await asyncio.wait_for(self.drained, timeout)
            except asyncio.TimeoutError:
                raise httpx.WriteTimeout("timed out writing the request") from None
            finally:
                self.drained = None

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
    """The connections to one scheme, host and port: the idle ones (oldest first, so the
    newest is reused and the oldest expires first), how many are open, and the requests
    waiting for one (in order)."""

    __slots__ = ("idle", "open", "waiting")

    def __init__(self) -> None:
        self.idle: collections.deque[_Connection] = collections.deque()
        self.open = 0
        self.waiting: collections.deque[asyncio.Future[None]] = collections.deque()


def _chunk(piece: bytes) -> bytes:
    """``piece`` in HTTP/1.1's chunked transfer coding."""
    return b"%x\r\n%b\r\n" % (len(piece), piece)


class ConnectionPool(httpx.AsyncBaseTransport):
    """At most ``connections`` connections per origin, each kept alive while idle for at
    most ``keepalive_expiry`` seconds (:data:`KEEPALIVE_EXPIRY`)."""

    def __init__(
        self,
        *,
        connections: int,
        verify: ssl.SSLContext,
        keepalive_expiry: float = KEEPALIVE_EXPIRY,
    ) -> None:
        if connections < 1:
            raise ValueError("a connection pool needs room for at least one connection")
        if not keepalive_expiry > 0:
            raise ValueError("an idle connection must be kept for some time above 0 s")
        self._limit = connections
        self._tls = verify
        self._expiry = keepalive_expiry
        self._origins: dict[_Key, _Origin] = {}
        #: The timer that closes expired idle connections, while any are idle, and its loop.
        self._sweeper: asyncio.TimerHandle | None = None
        self._swept: asyncio.AbstractEventLoop | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        scheme = url.raw_scheme
        if scheme not in (b"http", b"https"):
            raise httpx.UnsupportedProtocol(f"{url.scheme!r} is not HTTP")
        port = url.port or (443 if scheme == b"https" else 80)
        key = (scheme, url.raw_host, port)
        timeouts = _timeouts(request)
        stream = request.stream
        # bytes however the request was made (one built for a redirect has no .content)
        body = b"".join(stream) if isinstance(stream, httpx.ByteStream) else None
        head = [request.method.encode(), b" ", url.raw_path, b" HTTP/1.1\r\n"]
        length = chunked = False
        for name, value in request.headers.raw:
            lowered = name.lower()
            length = length or lowered == b"content-length"
            chunked = chunked or (lowered == b"transfer-encoding" and b"chunked" in value.lower())
            head += [name, b": ", value, b"\r\n"]
        if body is None and not (length or chunked):
            head.append(b"Transfer-Encoding: chunked\r\n")
            chunked = True
        elif body and not (length or chunked):
            head += [b"Content-Length: ", str(len(body)).encode(), b"\r\n"]
        data = b"".join([*head, b"\r\n", body or b""])
        conn = await self._acquire(key, timeouts)
        replied: asyncio.Future[Any] | None = None
        try:
            replied = conn.send(data, request.method)
            if conn.write_paused:
                await conn.drain(timeouts["write"])
            if body is None:
                await self._send_body(conn, stream, chunked, replied, timeouts["write"])
            try:
                status, headers = await asyncio.wait_for(replied, timeouts["read"])
            except asyncio.TimeoutError:
                raise httpx.ReadTimeout("timed out waiting for the reply's head") from None
        except BaseException:
            if replied is not None and not replied.done():  # no reply will be awaited
                replied.cancel()
            conn.close()
            self.release(key, conn)
            raise
        return httpx.Response(
            status,
            headers=headers,
            stream=_Body(self, key, conn, timeouts["read"]),
            extensions={"http_version": b"HTTP/1.1"},
        )

    @staticmethod
    async def _send_body(
        conn: _Connection,
        stream: Any,
        chunked: bool,
        replied: asyncio.Future[Any],
        timeout: float | None,
    ) -> None:
        """A body given in pieces, each written as it comes, waiting (at most ``timeout``
        seconds each time) while the socket takes no more; cut short if the reply begins
        first (the connection is then not reused)."""
        async for piece in stream:
            if replied.done():
                conn.cut_short = True
                return
            if piece:
                conn.write(_chunk(piece) if chunked else piece)
                if conn.write_paused:
                    await conn.drain(timeout)
        if chunked and not replied.done():
            conn.write(b"0\r\n\r\n")
            if conn.write_paused:
                await conn.drain(timeout)

    async def _acquire(self, key: _Key, timeouts: dict[str, Any]) -> _Connection:
        origin = self._origins.get(key)
        if origin is None:
            origin = self._origins[key] = _Origin()
        if origin.idle:
            fresh = asyncio.get_running_loop().time() - self._expiry
            while origin.idle:
                conn = origin.idle.pop()  # the newest: if it is expired, all are
                if not conn.closed and conn.idle_since > fresh:
                    return conn
                conn.close()
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
            conn.idle_since = conn.loop.time()
            origin.idle.append(conn)
            if self._sweeper is None or self._swept is not conn.loop:
                self._swept = conn.loop
                self._sweeper = conn.loop.call_at(conn.idle_since + self._expiry, self._sweep)
        else:
            conn.close()
            origin.open -= 1
        self._wake(origin)

    def _sweep(self) -> None:
        """Close every connection idle for :attr:`_expiry` seconds; again when the oldest
        left will be, while any are idle."""
        self._sweeper = None
        loop = asyncio.get_running_loop()
        fresh = loop.time() - self._expiry
        oldest: float | None = None
        for origin in self._origins.values():
            idle = origin.idle
            while idle and (idle[0].closed or idle[0].idle_since <= fresh):
                idle.popleft().close()
                origin.open -= 1
            if idle and (oldest is None or idle[0].idle_since < oldest):
                oldest = idle[0].idle_since
        if oldest is not None:
            self._sweeper = loop.call_at(oldest + self._expiry, self._sweep)

    @staticmethod
    def _wake(origin: _Origin) -> None:
        while origin.waiting:
            waiter = origin.waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def aclose(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for origin in self._origins.values():
            for conn in origin.idle:
                conn.close()
            origin.idle.clear()
            origin.open = 0
        self._origins.clear()
