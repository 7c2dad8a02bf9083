"""The upstream client's small pools, over real HTTP on loopback: a request goes to the least
busy pool, a pool's place is given back when its reply is closed (read or not, or failed),
and connections are kept alive and reused."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import anyio.to_thread
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from toolwire.backends.http import new_client, ssl_context
from toolwire.backends.pool import ShardedTransport
from toolwire.testing import ServedApp


class Held:
    """A server whose replies wait until released; it records each request's port."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.ports: list[int] = []
        self.waiting = 0

    async def answer(self, request: Request) -> Response:
        assert request.client is not None
        self.ports.append(request.client.port)
        self.waiting += 1
        await anyio.to_thread.run_sync(self.release.wait)
        self.waiting -= 1
        return PlainTextResponse("x" * 1000)


@pytest.fixture
def held() -> Iterator[tuple[Held, str]]:
    server = Held()
    app = Starlette(routes=[Route("/", server.answer)])
    with ServedApp(app) as served:
        yield server, served.url + "/"
    server.release.set()


async def _until(condition: object, what: str) -> None:
    for _ in range(500):
        if callable(condition) and condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_busy_pool_sends_the_next_request_to_another(held: tuple[Held, str]) -> None:
    server, url = held

    async def run() -> None:
        pools = ShardedTransport(shards=2, connections=1, verify=ssl_context())
        async with httpx.AsyncClient(transport=pools, timeout=10) as client:
            # two pools of one connection: two requests are both at the server at once
            first = asyncio.create_task(client.get(url))
            second = asyncio.create_task(client.get(url))
            await _until(lambda: server.waiting == 2, "both requests at the server")
            server.release.set()
            assert [r.status_code for r in await asyncio.gather(first, second)] == [200, 200]
            ports = set(server.ports)
            assert len(ports) == 2
            # both connections were kept alive: the next two reuse them
            again = await asyncio.gather(client.get(url), client.get(url))
            assert [r.status_code for r in again] == [200, 200]
            assert set(server.ports) == ports

    asyncio.run(run())


def test_a_reply_closed_unread_or_failed_gives_its_place_back(held: tuple[Held, str]) -> None:
    server, url = held
    server.release.set()

    async def run() -> None:
        pools = ShardedTransport(shards=2, connections=2, verify=ssl_context())
        async with httpx.AsyncClient(transport=pools, timeout=10) as client:
            for _ in range(5):  # closed before its body is read
                async with client.stream("GET", url) as r:
                    assert r.status_code == 200
            # at low load every request goes to the first pool, so one connection serves all,
            # before a failed request and after it (a pool of two: the failed one has room)
            server.ports.clear()
            for n in range(6):
                if n == 3:
                    with pytest.raises(httpx.ConnectError):  # nothing listens there
                        await client.get("http://127.0.0.1:9/")
                assert (await client.get(url)).status_code == 200
            assert len(server.ports) == 6 and len(set(server.ports)) == 1
            server.release.clear()
            held_two = [asyncio.create_task(client.get(url)) for _ in range(2)]
            # had a place leaked, the two would share one pool and one would wait for the other
            await _until(lambda: server.waiting == 2, "both requests at the server")
            server.release.set()
            assert [r.status_code for r in await asyncio.gather(*held_two)] == [200, 200]

    asyncio.run(run())


def test_the_long_lived_client_reuses_its_connection(held: tuple[Held, str]) -> None:
    server, url = held
    server.release.set()

    async def run() -> None:
        async with new_client() as client:
            for _ in range(5):
                assert (await client.get(url)).status_code == 200

    asyncio.run(run())
    assert len(server.ports) == 5 and len(set(server.ports)) == 1


def test_a_pool_needs_a_connection() -> None:
    with pytest.raises(ValueError, match="at least one pool of one connection"):
        ShardedTransport(shards=0, connections=4, verify=ssl_context())
