"""The gateway's upstream HTTP stacks the benchmark can pick (``--http``), so that the choice
of the one ``toolwire serve`` uses is measured, and can be measured again, in one run.

Each stack is one long-lived :class:`httpx.AsyncClient` (the backend's interface) with the
same timeouts, room for as many connections, all kept alive, and no cookies; only what is
under the client differs:

- ``pool``: :func:`toolwire.backends.http.new_client`, exactly as ``toolwire serve`` makes it
  (toolwire's own connection pool, :mod:`toolwire.backends.connections`);
- ``httpx``: httpx's own :class:`httpx.AsyncHTTPTransport` (httpcore over h11), HTTP/1.1
  only, tuned: one pool as large, every connection kept alive;
- ``aiohttp``: aiohttp's client (its C parser, its connector's pool) under httpx through
  the ``httpx-aiohttp`` package's transport (``pip install httpx-aiohttp``). A thinner
  transport of our own over the same client (timeouts and URLs made once, the body read as
  it is buffered) measured no cheaper, on the client alone: aiohttp's own request is the cost.
"""

from __future__ import annotations

import http.cookiejar
from typing import Any

import httpx

from toolwire.backends.connections import KEEPALIVE_EXPIRY
from toolwire.backends.http import (
    DEFAULT_CONNECT_TIMEOUT,
    MAX_CONNECTIONS,
    new_client,
    ssl_context,
)

#: The stacks, the first the default.
STACKS = ("pool", "httpx", "aiohttp")
#: Seconds an idle connection is kept: the pool's own expiry, for every stack (a round at
#: 1,000 concurrent leaves each gateway idle for longer while the others are measured).
EXPIRY = KEEPALIVE_EXPIRY
#: As many connections as ``new_client`` allows.
SIZE = MAX_CONNECTIONS


class _NoCookies(http.cookiejar.CookieJar):
    """A jar that keeps nothing, as ``new_client``'s (one reply's cookie rides on no other
    caller's request)."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None

    def add_cookie_header(self, request: Any) -> None:
        return None


def upstream_client(stack: str, timeout: float = 120.0) -> httpx.AsyncClient:
    """The gateway's long-lived upstream client on ``stack`` (one of :data:`STACKS`)."""
    if stack == "pool":
        return new_client(timeout)
    timeouts = httpx.Timeout(timeout, connect=DEFAULT_CONNECT_TIMEOUT)
    transport: httpx.AsyncBaseTransport
    if stack == "httpx":
        limits = httpx.Limits(
            max_connections=SIZE, max_keepalive_connections=SIZE, keepalive_expiry=EXPIRY
        )
        transport = httpx.AsyncHTTPTransport(
            verify=ssl_context(), limits=limits, http1=True, http2=False
        )
    elif stack == "aiohttp":
        import aiohttp
        from httpx_aiohttp import AiohttpTransport

        def session() -> aiohttp.ClientSession:  # made on the first request, in its loop
            connector = aiohttp.TCPConnector(
                limit=SIZE, limit_per_host=SIZE, keepalive_timeout=EXPIRY, ssl=ssl_context()
            )
            return aiohttp.ClientSession(
                connector=connector, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False
            )

        transport = AiohttpTransport(client=session)
    else:
        raise ValueError(f"no stack {stack!r}: one of {', '.join(STACKS)}")
    return httpx.AsyncClient(timeout=timeouts, transport=transport, cookies=_NoCookies())
