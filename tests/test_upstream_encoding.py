"""A hostile upstream's gzip bomb: the gateway asks for ``identity`` and decodes nothing.

A reply of under a kilobyte, gzip inside gzip, decodes to 256 MiB in one piece (the
issue's 1.8 KB became 2.1 GB). Such a reply is refused unread, naming its encoding, for a
stream, for one JSON document and for an error body alike; the client gets a 502 with
nothing of the upstream's body, memory stays far below one decoded piece, and the event
loop is not held. Played by a raw socket upstream on 127.0.0.1 (:mod:`tests.upstream_fake`).
"""

from __future__ import annotations

import asyncio
import json
import tracemalloc
import zlib
from collections.abc import Iterator

import pytest

from toolwire import events as ev
from toolwire.backends import OpenAIBackend, Request
from toolwire.errors import BackendError
from toolwire.server import create_app
from toolwire.testing import ServedApp

from .replies import TOOLS
from .upstream_fake import ASK, CONNECT, SECRET, RawUpstream, ask, no_leak, respond

#: What the bomb decodes to.
DECODED = 256 * 1024 * 1024
#: The most memory one request may take while refusing it: far below one decoded piece.
BOUND = 16 * 1024 * 1024


def _gzip(data: bytes | None = None, *, zeros: int = 0) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [packer.compress(data)] if data is not None else []
    block = bytes(1 << 20)
    out += [packer.compress(block) for _ in range(zeros >> 20)]
    return b"".join(out) + packer.flush()


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """256 MiB of zeros, gzip inside gzip: under a kilobyte on the wire."""
    return _gzip(_gzip(zeros=DECODED))


@pytest.fixture(scope="module")
def upstream() -> Iterator[RawUpstream]:
    server = RawUpstream()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _fresh(upstream: RawUpstream) -> None:
    upstream.reset()


def _bomb(bomb: bytes, status: int = 200, kind: str = "text/event-stream") -> object:
    return respond(status, bomb, kind, extra="Content-Encoding: gzip, gzip\r\n")


def test_the_bomb_is_one(bomb: bytes) -> None:
    """What the upstream sends would decode to 256 MiB: the case is real."""
    assert len(bomb) < 4096
    inner = zlib.decompressobj(31).decompress(bomb)
    assert len(zlib.decompressobj(31).decompress(inner, 4096)) == 4096


@pytest.mark.parametrize("kind", ["text/event-stream", "application/json"])
def test_a_gzip_bomb_is_refused_unread_by_the_backend(
    upstream: RawUpstream, bomb: bytes, kind: str
) -> None:
    """Streamed or whole: a BackendError naming the encoding; memory stays bounded and the
    event loop keeps turning."""
    upstream.play(_bomb(bomb, kind=kind))  # type: ignore[arg-type]
    backend = OpenAIBackend("m", base_url=upstream.base_url, timeout=30, connect_timeout=CONNECT)
    gaps: list[float] = []

    async def go() -> BackendError:
        loop = asyncio.get_running_loop()
        done = False

        async def tick() -> None:
            last = loop.time()
            while not done:
                await asyncio.sleep(0.01)
                now = loop.time()
                gaps.append(now - last)
                last = now

        ticker = asyncio.create_task(tick())
        try:
            with pytest.raises(BackendError) as caught:
                async for _ in backend.stream(Request(ASK["messages"], TOOLS)):
                    pass
        finally:
            done = True
            await ticker
        return caught.value

    tracemalloc.start()
    try:
        error = asyncio.run(go())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert error.kind == "unreadable"
    assert "encoding not asked for (gzip, gzip)" in str(error)
    assert peak < BOUND, f"{peak} bytes held while refusing a gzip bomb"
    assert max(gaps, default=0.0) < 2.0  # generous: the loop was never held by a decode


def test_an_error_body_in_gzip_keeps_its_status_and_is_not_read(
    upstream: RawUpstream, bomb: bytes
) -> None:
    upstream.play(_bomb(bomb, status=429, kind="application/json"))  # type: ignore[arg-type]
    backend = OpenAIBackend("m", base_url=upstream.base_url, timeout=30, connect_timeout=CONNECT)

    async def go() -> BackendError:
        with pytest.raises(BackendError) as caught:
            async for _ in backend.stream(Request(ASK["messages"], TOOLS)):
                pass
        return caught.value

    tracemalloc.start()
    try:
        error = asyncio.run(go())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (error.status, error.body) == (429, "")
    assert "gzip, gzip" in str(error)
    assert peak < BOUND


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("kind", ["text/event-stream", "application/json"])
def test_the_gateway_answers_a_gzip_bomb_with_a_502(
    upstream: RawUpstream, bomb: bytes, stream: bool, kind: str
) -> None:
    """Through the gateway over HTTP: a clean 502 of ours, nothing of the upstream's."""
    backend = OpenAIBackend("m", base_url=upstream.base_url, timeout=30, connect_timeout=CONNECT)
    with ServedApp(create_app(backend)) as served:
        upstream.play(_bomb(bomb, kind=kind))  # type: ignore[arg-type]
        tracemalloc.start()
        try:
            reply = ask(served.url, stream=stream)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert reply.status_code == 502
    error = reply.json()["error"]
    assert error["type"] == "upstream_error"
    no_leak(reply.text)
    assert SECRET not in json.dumps(error)
    assert peak < BOUND


def test_a_reply_in_identity_is_read_as_ever(upstream: RawUpstream) -> None:
    """The check refuses only encodings not asked for: ``identity`` named is read."""
    body = (
        b'data: {"choices": [{"index": 0, "delta": {"content": "Sunny."}}]}\n\n'
        b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'
        b"data: [DONE]\n\n"
    )
    upstream.play(respond(200, body, "text/event-stream", extra="Content-Encoding: identity\r\n"))
    backend = OpenAIBackend("m", base_url=upstream.base_url, timeout=30, connect_timeout=CONNECT)

    async def go() -> list[ev.Event]:
        return [e async for e in backend.stream(Request(ASK["messages"], TOOLS))]

    events = asyncio.run(go())
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == "Sunny."
