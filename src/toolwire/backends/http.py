"""The one HTTP exchange every remote backend makes: POST a body, read a streamed reply.

Failures are mapped here, at the edge: a refusal becomes a :class:`BackendError` carrying
the status and what the provider said (kept so a refusal can be classified and healed), an
unreachable server one that says so.
"""

from __future__ import annotations

import functools
import json
import ssl
import urllib.request
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, ClassVar

import httpx

from ..errors import BackendError
from ..events import Event
from ..pipeline import ModelMemory, Plan, Prepared, Request, Transport, default_memory
from ..schemas import to_dialect
from ..templates import normalize_tools
from .pool import ShardedTransport

__all__ = [
    "MAX_STREAM_CHARS",
    "POOLS",
    "POOL_CONNECTIONS",
    "HttpTransport",
    "Records",
    "error_message",
    "new_client",
    "post_stream",
    "ssl_context",
    "wire_tools",
]

#: The largest streamed reply accepted, in characters of JSON records.
MAX_STREAM_CHARS = 32 * 1024 * 1024


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """One verified TLS context, made as httpx makes its own, for every client made here.

    Loading the certificate bundle costs about 25 ms of CPU, and httpx does it for every
    client it builds, even one that only speaks plain HTTP: paid per request, that blocked
    the event loop long enough to make the gateway twenty times slower than its upstream.
    """
    return httpx.create_ssl_context()


#: A long-lived client's connections: this many small pools (see :func:`new_client`) ...
POOLS = 32
#: ... of at most this many connections each, all kept alive while idle.
POOL_CONNECTIONS = 64


def new_client(timeout: float = 120.0) -> httpx.AsyncClient:
    """A client for a long-lived caller (the gateway, the bench): connections are reused.

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
    if any(urllib.request.getproxies().get(k) for k in ("http", "https", "all")):
        size = POOLS * POOL_CONNECTIONS
        limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
        return httpx.AsyncClient(timeout=timeout, verify=ssl_context(), limits=limits)
    pools = ShardedTransport(shards=POOLS, connections=POOL_CONNECTIONS, verify=ssl_context())
    return httpx.AsyncClient(timeout=timeout, transport=pools)


def error_message(text: str) -> str:
    """The provider's own words from an error body (OpenAI's and Ollama's shapes)."""
    try:
        data = json.loads(text)
    except ValueError:
        return text[:500]
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])[:500]
        if isinstance(err, str):
            return err[:500]
    return text[:500]


async def post_stream(
    client: httpx.AsyncClient | None,
    url: str,
    body: Mapping[str, Any],
    read: Callable[[httpx.Response], AsyncGenerator[Event, None]],
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 120.0,
) -> AsyncGenerator[Event, None]:
    """POST ``body`` to ``url`` and yield what ``read`` makes of the streamed reply.

    A client made here is closed here; an injected one is the caller's to close.
    """
    own = client is None
    http = client or httpx.AsyncClient(timeout=timeout, verify=ssl_context())
    try:
        async with http.stream("POST", url, json=dict(body), headers=dict(headers or {})) as r:
            if r.status_code >= 400:
                text = (await r.aread()).decode("utf-8", "replace")
                raise BackendError(
                    f"{url} answered {r.status_code}: {error_message(text)}",
                    status=r.status_code,
                    body=text,
                )
            async for event in read(r):
                yield event
    except httpx.HTTPError as exc:
        raise BackendError(f"{url} could not be reached: {exc}") from exc
    finally:
        if own:
            await http.aclose()


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


class Records:
    """The JSON objects of a streamed reply: server-sent ``data:`` lines, or JSON lines.

    The reply is bounded (:data:`MAX_STREAM_CHARS`). After its last record (SSE's
    ``[DONE]``, or one ``is_last`` says ends it) the body is read on to its end, bounded and
    unparsed, so the connection goes back to the pool. ``ended`` tells whether that last
    record came. A record that is not JSON, or an error the provider sends mid-stream, is a
    :class:`BackendError` naming ``who`` sent it.
    """

    def __init__(
        self,
        response: httpx.Response,
        *,
        sse: bool,
        who: str,
        is_last: Callable[[dict[str, Any]], bool] = lambda record: False,
    ) -> None:
        self._response = response
        self._sse = sse
        self._who = who
        self._is_last = is_last
        self.ended = False

    async def __aiter__(self) -> AsyncGenerator[dict[str, Any], None]:
        size = 0
        async for line in self._response.aiter_lines():
            if self._sse:
                if not line.startswith("data:"):
                    continue  # comments, event names, keep-alives
                data = line[5:].strip()
            else:
                data = line.strip()
                if not data:
                    continue
            size += len(data)
            if self.ended or (data == "[DONE]" and self._sse):
                self.ended = True
                if size > MAX_STREAM_CHARS:
                    break
                continue
            if size > MAX_STREAM_CHARS:
                raise BackendError(
                    f"the streamed reply is longer than {MAX_STREAM_CHARS} characters"
                )
            try:
                record = json.loads(data)
            except (ValueError, RecursionError):
                raise BackendError(
                    f"{self._who} sent a line that is not JSON: {data[:200]}"
                ) from None
            if not isinstance(record, dict):
                continue
            if isinstance(record.get("error"), (dict, str)):
                raise BackendError(
                    f"{self._who} failed mid-stream: {error_message(data)}", body=data
                )
            self.ended = self._is_last(record)
            yield record


class HttpTransport(Transport):
    """What the remote transports share: a JSON body POSTed to one URL, read as it streams.

    Subclasses give :meth:`body` and :meth:`read`, and their defaults as class attributes;
    everything here is I/O.
    """

    native_tools = True
    #: Where the server is by default, the path of its chat endpoint, how long a reply
    #: may take (seconds), and the model's window when none is given.
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
        context_tokens: int | None = None,
        words: bool = False,
        memory: ModelMemory | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.model = model
        self.base_url = self.normal_base(base_url or self.default_base_url)
        self.endpoint = self.base_url
        self.context_tokens = context_tokens or self.default_context_tokens
        self.words = words
        self.memory = memory if memory is not None else default_memory()
        self._url = self.base_url.rstrip("/") + "/" + self.path
        self._client = client
        self._timeout = timeout if timeout is not None else self.default_timeout
        self._headers = dict(headers or {})

    @staticmethod
    def normal_base(base_url: str) -> str:
        """The base URL as this transport keeps it (and keys what a model taught by)."""
        return base_url

    def body(self, request: Request, dialect: str) -> dict[str, Any]:
        """The JSON body for ``request``, its tool schemas in ``dialect``."""
        raise NotImplementedError

    def read(self, response: httpx.Response) -> AsyncGenerator[Event, None]:
        """The events of a streamed reply."""
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
            )
        ) as events:
            async for event in events:
                yield event
