"""The one HTTP exchange every remote backend makes: POST a body, read a streamed reply.

Failures are mapped here, at the edge, to a :class:`BackendError` whose ``kind`` says what
happened: a refusal (``refused``, with the status and what the provider said, kept so a
refusal can be classified and healed), an unreachable server, a deadline passed
(``timeout``), or a reply that cannot be read (``unreadable``). The message names the server
(its URL without query or credentials) for the library's caller; an edge that answers
someone else (the gateway) answers from ``kind`` and ``status`` alone.

Everything read is bounded while it is read, never after: the reply is taken in chunks, a
line may not grow past :data:`MAX_LINE_BYTES` nor the reply past :data:`MAX_STREAM_BYTES`,
an error body is read to :data:`MAX_ERROR_BYTES` at most, and the whole exchange (connect,
headers, every chunk) ends at the request's deadline, so a stalled upstream holds nobody
longer than that.
"""

from __future__ import annotations

import asyncio
import functools
import http.cookiejar
import importlib.util
import json
import re
import ssl
import sys
import urllib.request
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Mapping,
    Sequence,
)
from contextlib import aclosing
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit

import httpx
import orjson

from ..errors import BackendError, UsageError
from ..events import Event
from ..pipeline import ModelMemory, Plan, Prepared, Request, Transport, default_memory
from ..schemas import to_dialect
from ..templates import normalize_tools
from .pool import ShardedTransport

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "MAX_ERROR_BYTES",
    "MAX_LINE_BYTES",
    "MAX_STREAM_BYTES",
    "POOLS",
    "POOL_CONNECTIONS",
    "TOOL_LISTS_KEPT",
    "HttpTransport",
    "Lines",
    "Records",
    "Reply",
    "decode_json",
    "encode_json",
    "error_message",
    "new_client",
    "post_stream",
    "shown_url",
    "ssl_context",
    "wire_tools",
]

#: The largest streamed reply accepted, in bytes, counted as they arrive.
MAX_STREAM_BYTES = 32 * 1024 * 1024
#: The longest line of a streamed reply (one SSE ``data:`` record, one JSON line), and the
#: largest reply sent whole as one JSON document: refused once this many bytes came
#: without the line ending.
MAX_LINE_BYTES = 8 * 1024 * 1024
#: How much of an error body is read (the rest is never fetched).
MAX_ERROR_BYTES = 64 * 1024
#: Seconds to open a connection, unless a backend is given its own.
DEFAULT_CONNECT_TIMEOUT = 10.0


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """One verified TLS context, made as httpx makes its own, for every client made here.

    Loading the certificate bundle costs about 25 ms of CPU, and httpx does it for every
    client it builds, even one that only speaks plain HTTP: paid per request, that blocked
    the event loop long enough to make the gateway twenty times slower than its upstream.
    """
    return httpx.create_ssl_context()


#: How many distinct tool lists a transport keeps converted (see
#: :meth:`HttpTransport.tools_on_wire`).
TOOL_LISTS_KEPT = 64

#: A long-lived client's connections: this many small pools (see :func:`new_client`) ...
POOLS = 32
#: ... of at most this many connections each, all kept alive while idle.
POOL_CONNECTIONS = 64


class _NoCookies(http.cookiejar.CookieJar):
    """A cookie jar that keeps nothing. A long-lived client serves many callers (the
    gateway: many clients): a cookie one reply set must never ride on another caller's
    request. Keeping none also spares the parsing httpx does of every reply's headers
    for cookies (a message object built per reply, about a tenth of a millisecond)."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None

    def add_cookie_header(self, request: Any) -> None:
        return None


def new_client(
    timeout: float = 120.0, *, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
) -> httpx.AsyncClient:
    """A client for a long-lived caller (the gateway, the bench): connections are reused.

    ``timeout`` bounds each read and ``connect_timeout`` each connect; a backend using the
    client still applies its own deadline to each whole request.

    Its connections are held in :data:`POOLS` small pools of :data:`POOL_CONNECTIONS`
    (:class:`~toolwire.backends.pool.ShardedTransport`), each request going to the least
    busy, because httpcore's one pool does work in proportion to its size on every request
    and the gateway's CPU per request grew with its load. Measured through the gateway,
    streamed, 1,000 concurrent against 10 (benchmarks/gateway.py): one pool of 256 (64 kept
    alive) spent 51 ms of CPU per request at 1,000 against 5.6 ms at 10; 32 pools of 64
    spend 7.1 ms against 6.2 ms (not streamed: 6.1 ms against 4.7 ms). One pool of 2,048
    stops the queueing but still scans every connection: measured on the client alone, 4-6
    ms a request at 1,000 where 32 pools spend 3-4 ms (2-4 ms and 2 ms at 10). All may be
    kept alive: httpcore closes an idle connection whenever a pool holds more than it keeps
    alive, which made the old pool reconnect under load.

    Behind a proxy named in the environment (``HTTPS_PROXY`` and the like) every
    connection goes to the proxy, which httpx's own client handles, so that client is
    used, with the same number of connections in its one pool.
    """
    timeouts = httpx.Timeout(timeout, connect=connect_timeout)
    cookies = _NoCookies()  # a jar as it is: httpx would copy one given as Cookies
    if any(urllib.request.getproxies().get(k) for k in ("http", "https", "all")):
        size = POOLS * POOL_CONNECTIONS
        limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
        return httpx.AsyncClient(
            timeout=timeouts, verify=ssl_context(), limits=limits, cookies=cookies
        )
    transport: httpx.AsyncBaseTransport
    if importlib.util.find_spec("httptools") is not None:
        from .connections import ConnectionPool

        transport = ConnectionPool(connections=POOLS * POOL_CONNECTIONS, verify=ssl_context())
    else:
        transport = ShardedTransport(
            shards=POOLS, connections=POOL_CONNECTIONS, verify=ssl_context()
        )
    return httpx.AsyncClient(timeout=timeouts, transport=transport, cookies=cookies)


def error_message(text: str) -> str:
    """The provider's own words from an error body (OpenAI's and Ollama's shapes)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return text[:500]
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])[:500]
        if isinstance(err, str):
            return err[:500]
    return text[:500]


def shown_url(url: str) -> str:
    """``url`` as an error message may name it: no credentials, no query (keys travel there)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}"


def _retry_after(response: httpx.Response) -> int | None:
    """The seconds a refusal asks to wait (``Retry-After`` in seconds; a date is ignored)."""
    value = response.headers.get("retry-after", "").strip()
    if value.isdigit() and len(value) <= 6:
        return min(int(value), 86_400)
    return None


T = TypeVar("T")

if sys.version_info >= (3, 11):

    async def before(deadline: float, step: Awaitable[T]) -> T:
        """``step``'s result, or :class:`asyncio.TimeoutError` once the loop's clock passes
        ``deadline``."""
        async with asyncio.timeout_at(deadline):
            return await step

else:  # pragma: no cover - Python 3.10

    async def before(deadline: float, step: Awaitable[T]) -> T:
        """``step``'s result, or :class:`asyncio.TimeoutError` once the loop's clock passes
        ``deadline``."""
        remaining = deadline - asyncio.get_running_loop().time()
        return await asyncio.wait_for(step, max(0.0, remaining))


class Reply:
    """An upstream's reply as it arrives: its body in chunks, each awaited only until the
    request's deadline, the whole bounded by :data:`MAX_STREAM_BYTES`.

    ``whole`` is true when the upstream answered with one JSON document
    (``application/json``) where a stream was asked for: it is then read whole, bounded.
    """

    def __init__(self, response: httpx.Response, deadline: float, timeout: float) -> None:
        self.response = response
        self.deadline = deadline
        self.timeout = timeout
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        self.whole = kind == "application/json"

    async def chunks(self, limit: int = MAX_STREAM_BYTES) -> AsyncGenerator[bytes, None]:
        """The body's bytes as they come; a :class:`BackendError` past ``limit`` bytes or
        past the deadline."""
        parts = self.response.aiter_bytes()
        size = 0
        try:
            while True:
                try:
                    chunk = await before(self.deadline, anext(parts))
                except StopAsyncIteration:
                    return
                except asyncio.TimeoutError:
                    raise BackendError(
                        f"the reply did not end within the deadline of {self.timeout:g} s",
                        kind="timeout",
                    ) from None
                size += len(chunk)
                if size > limit:
                    raise BackendError(f"the reply is longer than {limit} bytes", kind="unreadable")
                yield chunk
        finally:
            close = getattr(parts, "aclose", None)  # an async generator: let it clean up
            if close is not None:
                await close()

    async def text(self, limit: int) -> tuple[str, bool]:
        """The body as text, read to ``limit`` bytes at most; and whether it was all read."""
        kept = bytearray()
        async with aclosing(self.chunks(MAX_STREAM_BYTES)) as chunks:
            async for chunk in chunks:
                kept += chunk[: limit + 1 - len(kept)]
                if len(kept) > limit:
                    return kept[:limit].decode("utf-8", "replace"), False
        return kept.decode("utf-8", "replace"), True


async def _send(http: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
    """Send ``request``; once more if the server closed the connection before answering.

    A server may close a kept-alive connection just as it is reused (its idle timeout, or a
    server with few connection slots, such as llama-server): the request then fails with no
    reply at all, so nothing was done, and it goes again on another connection. A second
    such failure is the server's answer.
    """
    try:
        return await http.send(request, stream=True)
    except httpx.RemoteProtocolError as exc:
        # httpcore's words for a connection closed with no byte of a reply; a reply that
        # is not HTTP is an answer, not tried again
        if "without sending a response" not in str(exc):
            raise
        return await http.send(request, stream=True)


@functools.lru_cache(maxsize=256)
def _target(url: str) -> tuple[httpx.URL, str]:
    """``url`` parsed, and as a message may name it: once per URL, not per request (a
    backend sends every request to the same one)."""
    return httpx.URL(url), shown_url(url)


async def post_stream(
    client: httpx.AsyncClient | None,
    url: str,
    body: Mapping[str, Any],
    read: Callable[[Reply], AsyncGenerator[Event, None]],
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 120.0,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
) -> AsyncGenerator[Event, None]:
    """POST ``body`` to ``url`` and yield what ``read`` makes of the streamed reply.

    ``timeout`` is the deadline of the whole exchange, in seconds from now: connecting,
    waiting for the headers and every chunk of the body. ``connect_timeout`` bounds opening
    the connection alone. A client made here is closed here; an injected one is the
    caller's to close (the deadline applies to it all the same).
    """
    own = client is None
    limits = httpx.Timeout(timeout, connect=min(connect_timeout, timeout))
    http = client or httpx.AsyncClient(timeout=limits, verify=ssl_context())
    target, where = _target(url)
    deadline = asyncio.get_running_loop().time() + timeout
    response: httpx.Response | None = None
    sent = {"Accept-Encoding": "identity", **(headers or {})}  # bounded bytes are real bytes
    try:
        sent.setdefault("Content-Type", "application/json")
        request = http.build_request(
            "POST", target, content=encode_json(body), headers=sent, timeout=limits
        )
        try:
            response = await before(deadline, _send(http, request))
        except asyncio.TimeoutError:
            raise BackendError(
                f"{where} did not answer within the deadline of {timeout:g} s", kind="timeout"
            ) from None
        reply = Reply(response, deadline, timeout)
        if not 200 <= response.status_code < 300:
            text, _ = await reply.text(MAX_ERROR_BYTES)
            raise BackendError(
                f"{where} answered {response.status_code}: {error_message(text)}",
                status=response.status_code,
                body=text,
                kind="refused",
                retry_after=_retry_after(response),
            )
        async with aclosing(read(reply)) as events:
            async for event in events:
                yield event
    except httpx.TimeoutException as exc:
        what = "connect" if isinstance(exc, httpx.ConnectTimeout) else "read"
        raise BackendError(
            f"{where} did not answer in time ({what} timed out)", kind="timeout"
        ) from exc
    except httpx.HTTPError as exc:
        if response is None:
            raise BackendError(f"{where} could not be reached: {exc}", kind="unreachable") from exc
        raise BackendError(
            f"{where} broke off its reply: {exc or type(exc).__name__}", kind="unreadable"
        ) from exc
    finally:
        if response is not None:
            await response.aclose()
        if own:
            await http.aclose()


def encode_json(value: Any) -> bytes:
    """``value`` as the UTF-8 JSON of a request body: by orjson, or, for what it refuses (a
    lone surrogate, an integer past 64 bits, a key that is not a string), by the standard
    library, in ASCII with escapes (a lone surrogate cannot be UTF-8)."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError is one
        return json.dumps(value, separators=(",", ":")).encode("ascii")


def decode_json(data: bytes | str) -> Any:
    """JSON read by orjson, or by the standard library where orjson refuses (``NaN``,
    ``Infinity``, which some servers write): as lenient as before, faster on the common
    case. Raises ``ValueError`` or ``RecursionError`` as :func:`json.loads` does."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def wire_tools(tools: Sequence[Mapping[str, Any]], dialect: str) -> list[dict[str, Any]]:
    """Tools in OpenAI's wire shape (which Ollama shares), each schema in ``dialect``."""
    return [
        {
            **t,
            "function": {
                **t["function"],
                "parameters": to_dialect(
                    t["function"].get("parameters") or {"type": "object"}, dialect
                ),
            },
        }
        for t in normalize_tools(tools)
    ]


_EOL = re.compile(rb"\r\n|\r|\n")


class Lines:
    """Bytes cut into lines (LF, CRLF or CR, as SSE allows), each refused once it grows past
    ``limit`` bytes without its end: the partial line is the only thing held, so memory
    stays bounded whatever the upstream sends."""

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self._limit = limit
        self._held: list[bytes] = []
        self._size = 0
        self._after_cr = False  # the last chunk ended in CR: an LF next is the same end

    def feed(self, data: bytes) -> list[bytes]:
        """The lines ``data`` completes."""
        if self._after_cr and data.startswith(b"\n"):
            data = data[1:]
        self._after_cr = False
        if b"\r" not in data:  # LF only, as nearly every server sends: split in C
            out = data.split(b"\n")
            rest = out.pop()
            if out and self._held:
                self._held.append(out[0])
                out[0] = b"".join(self._held)
                self._held, self._size = [], 0
            self._hold(rest)
            return out
        out = []
        start = 0
        for end in _EOL.finditer(data):
            self._held.append(data[start : end.start()])
            out.append(b"".join(self._held))
            self._held, self._size = [], 0
            start = end.end()
            self._after_cr = end.group() == b"\r" and start == len(data)
        self._hold(data[start:])
        return out

    def _hold(self, rest: bytes) -> None:
        """Keep the start of a line not yet ended, within the limit."""
        if rest:
            self._size += len(rest)
            if self._size > self._limit:
                raise BackendError(
                    f"the reply has a line longer than {self._limit} bytes", kind="unreadable"
                )
            self._held.append(rest)

    def finish(self) -> list[bytes]:
        """The last line, when the body ended without its line end."""
        last = b"".join(self._held)
        self._held, self._size = [], 0
        return [last] if last else []


_SSE_FIELDS = (b"event:", b"id:", b"retry:", b":")


class Records:
    """The JSON objects of a streamed reply: server-sent ``data:`` lines, or JSON lines.

    Read in chunks, bounded while reading (:class:`Reply`, :class:`Lines`). After its last
    record (SSE's ``[DONE]``, or one ``is_last`` says ends it) the body is read on to its
    end, bounded and unparsed, so the connection goes back to the pool. ``ended`` tells
    whether that last record came. A record that is not JSON, or an error the provider sends
    mid-stream, is a :class:`BackendError` naming ``who`` sent it.

    An upstream that ignores ``stream: true`` and answers with one JSON document (sent as
    ``application/json``, or as SSE without any ``data:`` line) is read whole, bounded by
    :data:`MAX_LINE_BYTES`, and given as one record; ``whole`` then says so.
    """

    def __init__(
        self,
        reply: Reply,
        *,
        sse: bool,
        who: str,
        is_last: Callable[[dict[str, Any]], bool] = lambda record: False,
    ) -> None:
        self._reply = reply
        self._sse = sse
        self._who = who
        self._is_last = is_last
        self.ended = False
        self.whole = False

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        if self._reply.whole:
            text, complete = await self._reply.text(MAX_LINE_BYTES)
            if not complete:
                raise self._too_long()
            record = self._whole(text)
            if record is not None:
                yield record
            return
        lines = Lines()
        stray: list[bytes] = []  # SSE lines that are not SSE: perhaps one JSON document
        stray_size = 0
        seen = False  # a data: record came
        async with aclosing(self._reply.chunks()) as chunks:
            async for chunk in chunks:
                for line in lines.feed(chunk):
                    data = self._data(line)
                    if data is None:
                        if self._sse and not seen and line.strip():
                            stray_size += len(line) + 1
                            if stray_size > MAX_LINE_BYTES:
                                raise self._too_long()
                            stray.append(line)
                        continue
                    seen = True
                    record = self._record(data)
                    if record is not None:
                        yield record
            for line in lines.finish():
                data = self._data(line)
                if data is not None:
                    seen = True
                    record = self._record(data)
                    if record is not None:
                        yield record
                elif self._sse and not seen and line.strip():
                    stray.append(line)
        if stray and not seen:
            record = self._whole(b"\n".join(stray).decode("utf-8", "replace"))
            if record is not None:
                yield record

    def _data(self, line: bytes) -> bytes | None:
        """The payload a line carries, or None (an SSE comment or field, a blank line)."""
        if self._sse:
            if not line.startswith(b"data:"):
                return None
            return line[5:].strip()
        line = line.strip()
        return line or None

    def _record(self, data: bytes) -> dict[str, Any] | None:
        """One payload read: a record, None for one to pass over."""
        if self.ended or (data == b"[DONE]" and self._sse):
            self.ended = True
            return None
        try:
            record = decode_json(data)
        except (ValueError, RecursionError):
            shown = data[:200].decode("utf-8", "replace")
            raise BackendError(
                f"{self._who} sent a line that is not JSON: {shown}", kind="unreadable"
            ) from None
        if not isinstance(record, dict):
            return None
        self._refused(record, data)
        self.ended = self._is_last(record)
        return record

    def _whole(self, text: str) -> dict[str, Any] | None:
        """A reply sent whole as one JSON document: its one record."""
        try:
            record = json.loads(text) if text.strip() else None
        except (ValueError, RecursionError):
            raise BackendError(
                f"{self._who} sent a reply that is not JSON: {text[:200]}", kind="unreadable"
            ) from None
        if not isinstance(record, dict):
            raise BackendError(
                f"{self._who} sent a reply that is not a JSON object", kind="unreadable"
            )
        self._refused(record, text.encode("utf-8", "replace"))
        self.whole = self.ended = True
        return record

    def _refused(self, record: dict[str, Any], data: bytes) -> None:
        if isinstance(record.get("error"), (dict, str)):
            text = data.decode("utf-8", "replace")
            raise BackendError(
                f"{self._who} failed mid-stream: {error_message(text)}",
                body=text[:MAX_ERROR_BYTES],
                kind="refused",
            )

    def _too_long(self) -> BackendError:
        return BackendError(
            f"{self._who} sent a reply longer than {MAX_LINE_BYTES} bytes in one piece",
            kind="unreadable",
        )


class HttpTransport(Transport):
    """What the remote transports share: a JSON body POSTed to one URL, read as it streams.

    Subclasses give :meth:`body` and :meth:`read`, and their defaults as class attributes;
    everything here is I/O.
    """

    native_tools = True
    #: Where the server is by default, the path of its chat endpoint, the deadline of one
    #: whole request (seconds: connect, headers and the last byte of the reply), and the
    #: model's window when none is given.
    default_base_url: ClassVar[str]
    path: ClassVar[str]
    default_timeout: ClassVar[float]
    default_context_tokens: ClassVar[int]

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        context_tokens: int | None = None,
        words: bool = False,
        memory: ModelMemory | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """``timeout`` is each request's deadline and ``connect_timeout`` the time to open a
        connection, in seconds (defaults: the class's ``default_timeout`` and
        :data:`DEFAULT_CONNECT_TIMEOUT`); a stalled upstream ends in a ``timeout``
        :class:`BackendError` when either passes."""
        for name, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if value is not None and not (number and 0 < value < 1e6):
                raise UsageError(f"{name} must be a number of seconds above 0, not {value!r}")
        self.model = model
        self.base_url = self.normal_base(base_url or self.default_base_url)
        self.endpoint = self.base_url
        self.context_tokens = context_tokens or self.default_context_tokens
        self.words = words
        self.memory = memory if memory is not None else default_memory()
        self._url = self.base_url.rstrip("/") + "/" + self.path
        self._client = client
        self._timeout = float(timeout if timeout is not None else self.default_timeout)
        self._connect_timeout = float(
            connect_timeout if connect_timeout is not None else DEFAULT_CONNECT_TIMEOUT
        )
        self._headers = dict(headers or {})
        self._tool_lists: dict[tuple[bytes, str], list[Any]] = {}

    @staticmethod
    def normal_base(base_url: str) -> str:
        """The base URL as this transport keeps it (and keys what a model taught by)."""
        return base_url

    def tools_on_wire(self, tools: Sequence[Mapping[str, Any]], dialect: str) -> list[Any]:
        """:func:`wire_tools`, made once per distinct tool list and dialect: a client sends
        the same tools with every request, and copying and converting their schemas each
        time was a good part of the gateway's own work. The lists are kept by their JSON
        text, at most :data:`TOOL_LISTS_KEPT` of them; a kept list is never changed (each
        body is encoded as it is built)."""
        try:
            key = (orjson.dumps(tools, option=orjson.OPT_SORT_KEYS), dialect)
        except TypeError:  # not JSON as it stands: converted every time
            return wire_tools(tools, dialect)
        kept = self._tool_lists.get(key)
        if kept is None:
            if len(self._tool_lists) >= TOOL_LISTS_KEPT:
                self._tool_lists.pop(next(iter(self._tool_lists)))  # the oldest
            kept = self._tool_lists[key] = wire_tools(tools, dialect)
        return kept

    def body(self, request: Request, dialect: str) -> dict[str, Any]:
        """The JSON body for ``request``, its tool schemas in ``dialect``."""
        raise NotImplementedError

    def read(self, reply: Reply) -> AsyncGenerator[Event, None]:
        """The events of a streamed reply (or of one sent whole: see :class:`Records`)."""
        raise NotImplementedError

    def prepare(self, request: Request, plan: Plan) -> Prepared:
        return Prepared(request, self.body(request, plan.dialect))

    async def send(self, prepared: Prepared) -> AsyncGenerator[Event, None]:
        async with aclosing(
            post_stream(
                self._client,
                self._url,
                prepared.payload,
                self.read,
                headers=self._headers,
                timeout=self._timeout,
                connect_timeout=self._connect_timeout,
            )
        ) as events:
            async for event in events:
                yield event
