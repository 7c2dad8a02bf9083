"""The one HTTP exchange every remote backend makes: POST a body, read a streamed reply.

Failures are mapped here, at the edge, to a :class:`BackendError` whose ``kind`` says what
happened: a refusal (``refused``, with the status and what the provider said, kept so a
refusal can be classified and healed), an unreachable server, a deadline passed
(``timeout``), or a reply that cannot be read (``unreadable``). The message names the server
(its URL without query or credentials) for the library's caller; an edge that answers
someone else (the gateway) answers from ``kind`` and ``status`` alone.

Everything read is bounded while it is read, never after (see
:mod:`toolwire.backends.reading`, whose names are given here too), and the whole exchange
(connect, headers, every chunk) ends at the request's deadline, so a stalled upstream holds
nobody longer than that.
"""

from __future__ import annotations

import asyncio
import functools
import http.cookiejar
import json
import ssl
import urllib.request
from collections.abc import (
    AsyncGenerator,
    Callable,
    Mapping,
    Sequence,
)
from contextlib import aclosing
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

import httpx
import orjson

from ..budget import paid
from ..errors import BackendError, UsageError
from ..events import Event
from ..formats.registry import FORMAT_SETTINGS, get_family
from ..pipeline import ModelMemory, Plan, Prepared, Request, Transport, default_memory
from ..schemas import to_dialect
from ..templates import normalize_tools
from .connections import KEEPALIVE_EXPIRY, ClosedBeforeReply, ConnectionPool
from .reading import (
    MAX_ERROR_BYTES,
    MAX_LINE_BYTES,
    MAX_STREAM_BYTES,
    Lines,
    Records,
    Reply,
    before,
    decode_json,
    error_message,
)

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "MAX_CONNECTIONS",
    "MAX_ERROR_BYTES",
    "MAX_LINE_BYTES",
    "MAX_STREAM_BYTES",
    "ONE_REQUEST_CONNECTIONS",
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

#: A long-lived client's connections to one upstream: at most this many (see
#: :func:`new_client`), ...
MAX_CONNECTIONS = 2048
#: ... and a client made for one request (:func:`post_stream` given none): room for a
#: redirect's second connection.
ONE_REQUEST_CONNECTIONS = 2


class _NoCookies(http.cookiejar.CookieJar):
    """A cookie jar that keeps nothing. A long-lived client serves many callers (the
    gateway: many clients): a cookie one reply set must never ride on another caller's
    request. Keeping none also spares the parsing httpx does of every reply's headers
    for cookies (a message object built per reply, about a tenth of a millisecond)."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None

    def add_cookie_header(self, request: Any) -> None:
        return None


def _behind_proxy() -> bool:
    """Whether the environment names a proxy (``HTTPS_PROXY`` and the like)."""
    return any(urllib.request.getproxies().get(k) for k in ("http", "https", "all"))


def _client(
    timeouts: httpx.Timeout, connections: int, cookies: http.cookiejar.CookieJar | None = None
) -> httpx.AsyncClient:
    """A client on toolwire's connection pool (:mod:`toolwire.backends.connections`), or,
    behind a proxy, on httpx's own transport (the pool speaks to origins only), with as
    many connections, kept alive as long."""
    if _behind_proxy():
        limits = httpx.Limits(
            max_connections=connections,
            max_keepalive_connections=connections,
            keepalive_expiry=KEEPALIVE_EXPIRY,
        )
        return httpx.AsyncClient(
            timeout=timeouts, verify=ssl_context(), limits=limits, cookies=cookies
        )
    transport = ConnectionPool(connections=connections, verify=ssl_context())
    return httpx.AsyncClient(timeout=timeouts, transport=transport, cookies=cookies)


def new_client(
    timeout: float = 120.0, *, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
) -> httpx.AsyncClient:
    """A client for a long-lived caller (the gateway, the bench): connections are reused.

    ``timeout`` bounds each read and write and ``connect_timeout`` each connect; a backend
    using the client still applies its own deadline to each whole request.

    Its transport is toolwire's own connection pool
    (:class:`~toolwire.backends.connections.ConnectionPool`: httptools' parser, one write
    per request, taking and giving back a connection in constant time), with room for
    :data:`MAX_CONNECTIONS` connections to each upstream, each kept alive while idle
    for :data:`~toolwire.backends.connections.KEEPALIVE_EXPIRY` seconds. Measured through
    the gateway (benchmarks/gateway.py ``--http pool,httpx,aiohttp``), httpx's own
    transport, tuned the same way, spends over twice its CPU per request at 32 concurrent
    and ten times at 1,000 (httpcore's pool scans every connection for every request, so
    its work grows with the load), and aiohttp's client under httpx 15 to 30 % more on a
    request not streamed (as much streamed): past the 10 % a library may cost to be taken
    instead (the figures: :mod:`toolwire.backends.connections`).

    Behind a proxy named in the environment (``HTTPS_PROXY`` and the like) every
    connection goes to the proxy, which httpx's own transport handles, so it is used, with
    as many connections.
    """
    timeouts = httpx.Timeout(timeout, connect=connect_timeout)
    # a jar as it is: httpx would copy one given as Cookies
    return _client(timeouts, MAX_CONNECTIONS, _NoCookies())


def endpoint_url(base_url: str, path: str) -> str:
    """``path`` after a base URL's own path, the base's query kept after it: an upstream
    given as ``http://h/v1?api-version=1`` (Azure's way) is asked at
    ``http://h/v1/chat/completions?api-version=1``."""
    if "?" not in base_url and "#" not in base_url:
        return base_url.rstrip("/") + "/" + path
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/" + path, fragment=""))


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


async def _send(http: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
    """Send ``request``; once more if the server closed the connection before answering.

    A server may close a kept-alive connection just as it is reused (its idle timeout, or a
    server with few connection slots, such as llama-server): the request then fails with no
    reply at all, so nothing was done, and it goes again on another connection. A second
    such failure is the server's answer. The pool says so by its error's type
    (:class:`~toolwire.backends.connections.ClosedBeforeReply`); any other failure, a reply
    that is not HTTP among them, is an answer, not tried again. (httpx's own transport,
    used behind a proxy, has no such type: its requests are not tried again.)
    """
    try:
        return await http.send(request, stream=True)
    except ClosedBeforeReply:
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
    http = client or _client(limits, ONE_REQUEST_CONNECTIONS)
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
            if reply.encoding is not None:  # not decoded, so not read: its status stands
                text, said = "", f"(a body in {reply.encoding}, not asked for, not read)"
            else:
                text, _ = await reply.text(MAX_ERROR_BYTES)
                said = error_message(text)
            raise BackendError(
                f"{where} answered {response.status_code}: {said}",
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


def wire_tools(tools: Sequence[Mapping[str, Any]], dialect: str) -> list[dict[str, Any]]:
    """Tools in OpenAI's wire shape (which Ollama shares), each schema in ``dialect``
    (each one's work counted, so that shaping many in a worker thread gives the event loop
    its turn: :func:`toolwire.budget.paid`)."""
    out: list[dict[str, Any]] = []
    for t in normalize_tools(tools):
        paid(1)  # a dialect's copy of each schema: see normalize_tools
        schema = t["function"].get("parameters") or {"type": "object"}
        out.append({**t, "function": {**t["function"], "parameters": to_dialect(schema, dialect)}})
    return out


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
        tool_format: str | None = None,
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
        if tool_format is not None and tool_format not in FORMAT_SETTINGS:
            get_family(tool_format)  # an unknown name is a FormatError now, not per request
        #: The family the server's model writes its calls in as text, when it leaves them in
        #: the content (a turn's own ``tool_format`` wins): read as the reply streams.
        self.tool_format = tool_format
        self.memory = memory if memory is not None else default_memory()
        self._url = endpoint_url(self.base_url, self.path)
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
