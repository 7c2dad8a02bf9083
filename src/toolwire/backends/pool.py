"""Many small connection pools behind one httpx transport, so a pool's cost stays flat.

httpcore's pool does work in proportion to its size on every request and every response
closed: it checks each pooled connection (``has_expired`` asks the socket whether it is
readable), lists the idle ones once per idle connection, and scans every connection for every
queued request. At 1,000 concurrent streams through one pool of 1,000 connections that work
is quadratic, and it was most of the gateway's CPU (measured: 51 ms of gateway CPU per
streamed request at 1,000 concurrent, 5.6 ms at 10). Raising the pool's limits alone stops
requests queueing but leaves each request scanning a thousand connections.

:class:`ShardedTransport` keeps the pools small instead: each request goes to the pool with
the fewest requests in flight (the first such, so that at low load requests keep to the
first pools and their connections are reused), so each pool holds about ``in flight /
shards`` connections and the scans stay short at any load. Only httpx's public transport
API is used; each shard is an ordinary :class:`httpx.AsyncHTTPTransport`.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import httpx

__all__ = ["ShardedTransport"]


class _Counted(httpx.AsyncByteStream):
    """A response body that gives its shard's place back once, when it is closed."""

    def __init__(self, stream: httpx.AsyncByteStream, done: list[int], shard: int) -> None:
        self._stream = stream
        self._done = done
        self._shard = shard
        self._open = True

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self._stream:
            yield piece

    async def aclose(self) -> None:
        if self._open:
            self._open = False
            self._done[self._shard] -= 1
        await self._stream.aclose()


class ShardedTransport(httpx.AsyncBaseTransport):
    """``shards`` pools of at most ``connections`` connections each, all kept alive; each
    request goes to the least busy pool. Environment proxies are not read (a caller behind
    one uses httpx's own client)."""

    def __init__(self, *, shards: int, connections: int, verify: ssl.SSLContext) -> None:
        if shards < 1 or connections < 1:
            raise ValueError("a sharded transport needs at least one pool of one connection")
        limits = httpx.Limits(
            # keep-alive as many as may open: httpcore closes an idle connection whenever
            # the pool holds more connections than it may keep alive, so fewer would churn
            max_connections=connections,
            max_keepalive_connections=connections,
        )
        self._shards = [
            httpx.AsyncHTTPTransport(verify=verify, limits=limits) for _ in range(shards)
        ]
        self._busy = [0] * shards  # requests in flight per shard: sent, body not yet closed

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        busy = self._busy
        shard = busy.index(min(busy))
        busy[shard] += 1
        try:
            response = await self._shards[shard].handle_async_request(request)
        except BaseException:
            busy[shard] -= 1
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Counted(response.stream, busy, shard),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        for transport in self._shards:
            await transport.aclose()
