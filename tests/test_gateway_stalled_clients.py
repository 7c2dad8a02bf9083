"""A client that stops reading is cut: the gateway's send deadline, over real HTTP.

A client that sends a request and then reads nothing of the reply makes the gateway's
writes wait for ever (the socket's buffers fill, uvicorn pauses the app's ``send``); while it
waits, the upstream stream it reads from holds a connection of the pool. The guarded
protocols (:mod:`toolwire.server.deadlines`) cut such a connection once the client has taken
no byte for the send deadline, and the upstream's stream is closed with it, so stalled
clients cannot take every upstream connection and starve honest ones.

Everything runs on 127.0.0.1: uvicorn with toolwire's settings (its listening socket with a
small send buffer, as is a stalled client's receive buffer, so backpressure comes within a
fraction of a second), in front of :class:`tests.upstream_fake.RawUpstream`, which streams
deltas until the gateway hangs up and notes when it does.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import re
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn

from toolwire.backends import OpenAIBackend
from toolwire.backends.connections import ConnectionPool
from toolwire.cli import _parser
from toolwire.cli.serve import _gateway
from toolwire.server import create_app, uvicorn_settings
from toolwire.server.config import ModelEntry, Models
from toolwire.server.deadlines import SEND_TIMEOUT
from toolwire.server.logs import ACCESS

from .upstream_fake import DONE, OK_TEXT, RawUpstream, chunk, chunked

#: The send deadline of the gateways here, in seconds.
DEADLINE = 0.5
#: How long after a request a stalled client's cut may come at most: the deadline, the time
#: the buffers take to fill, and room for a loaded machine (a bound, not a measure).
CUT_WITHIN = DEADLINE + 6.0
#: Upstream connections the gateways here may open (all their models share the pool).
POOL = 2

SERVERS = pytest.mark.parametrize("fast", [True, False], ids=["httptools", "h11"])


class Slow:
    """The slow model's upstream: deltas of 1 KB every 2 ms, for up to a minute, until the
    gateway hangs up; then the time it did is put in :attr:`gone`."""

    def __init__(self) -> None:
        self.gone: queue.Queue[float] = queue.Queue()

    def __call__(self, conn: socket.socket) -> None:
        piece = chunk({"content": "x" * 1000})
        try:
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            for _ in range(30_000):
                conn.sendall(b"%x\r\n%b\r\n" % (len(piece), piece))
                time.sleep(0.002)
            conn.sendall(b"%x\r\n%b\r\n0\r\n\r\n" % (len(DONE), DONE))
        except OSError:
            self.gone.put(time.monotonic())

    def hung_up(self, count: int, within: float) -> list[float]:
        """The times the gateway hung up on ``count`` streams, waiting ``within`` seconds at
        most for them all (fewer when it did not)."""
        until = time.monotonic() + within
        times: list[float] = []
        while len(times) < count:
            with contextlib.suppress(queue.Empty):
                times.append(self.gone.get(timeout=max(0.0, until - time.monotonic())))
                continue
            break
        return times


#: A whole reply of 2 MB: 250 deltas of 8 KB.
BIG = chunked(*[chunk({"content": "y" * 8000})] * 250, chunk({}, "stop"), DONE)


@pytest.fixture
def upstream() -> Iterator[RawUpstream]:
    server = RawUpstream()
    yield server
    server.close()


def gateway_app(upstream: RawUpstream) -> Any:
    """The gateway before ``upstream``'s models ``slow``, ``honest`` and ``big``, one pool of
    :data:`POOL` connections for all, and a send deadline of :data:`DEADLINE` seconds."""
    client = httpx.AsyncClient(
        timeout=httpx.Timeout(30.0, connect=3.0),
        transport=ConnectionPool(connections=POOL, verify=ssl.create_default_context()),
    )
    backends = {
        name: OpenAIBackend(name, base_url=upstream.base_url, client=client, timeout=30.0)
        for name in ("slow", "honest", "big")
    }
    models = Models([ModelEntry(name) for name in backends], lambda entry: backends[entry.name])
    return create_app(models, send_timeout=DEADLINE)


@contextlib.contextmanager
def served(app: Any, fast: bool) -> Iterator[int]:
    """``app`` under uvicorn with toolwire's settings, on a socket of 127.0.0.1 whose
    connections have a small send buffer; its port."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=2,
        **uvicorn_settings(fast=fast),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def request(model: str, stream: bool) -> bytes:
    body = json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    ).encode()
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%b" % (len(body), body)
    )


def stalled(port: int, model: str = "slow", stream: bool = True) -> socket.socket:
    """A client that sends its request and never reads (with a small receive buffer)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(request(model, stream))
    return sock


def closed_by_gateway(sock: socket.socket, within: float) -> bytes:
    """What the client had been sent, read now to the connection's end, which must come
    within ``within`` seconds (a ``socket.timeout`` if the gateway still holds it)."""
    sock.settimeout(within)
    got = b""
    with contextlib.suppress(ConnectionResetError):
        while piece := sock.recv(65536):
            got += piece
    sock.close()
    return got


def honest(port: int) -> None:
    """An honest client's streamed request is served whole, within 10 s."""
    reply = httpx.post(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        json={"model": "honest", "messages": [{"role": "user", "content": "hi"}], "stream": True},
        timeout=10,
    )
    assert reply.status_code == 200
    assert "Sunny." in reply.text and reply.text.rstrip().endswith("data: [DONE]")


def cuts(port: int) -> float:
    """The gateway's count of clients cut for reading nothing (of Chat Completions)."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    found = re.search(r'^toolwire_clients_cut_total\{api="chat"\} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


@SERVERS
def test_a_client_that_reads_nothing_is_cut_and_its_upstream_stream_closed(
    upstream: RawUpstream, fast: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS)
    slow = Slow()
    upstream.for_model.update(slow=slow, honest=chunked(*OK_TEXT))
    with served(gateway_app(upstream), fast) as port:
        began = time.monotonic()
        client = stalled(port)
        honest(port)  # served meanwhile
        gone = slow.hung_up(1, CUT_WITHIN)
        assert gone, f"the upstream stream was still held {CUT_WITHIN} s after the request"
        assert gone[0] - began > DEADLINE  # not before the client had its deadline
        sent = closed_by_gateway(client, within=5)
        assert sent.startswith(b"HTTP/1.1 200") and b"x" * 1000 in sent
        honest(port)  # and after
        assert cuts(port) == 1
    said = [getattr(r, "toolwire_request", {}) for r in caplog.records if r.name == ACCESS]
    cut = [line for line in said if "cut" in line]
    assert len(cut) == 1 and cut[0]["api"] == "chat" and cut[0]["model"] == "slow"


def test_a_client_that_reads_slowly_is_not_cut_until_it_stops(upstream: RawUpstream) -> None:
    # The deadline is for taking nothing: a client reading slower than the model writes
    # (16 KB every 0.1 s, under the 500 KB a second of the slow model) is served on.
    slow = Slow()
    upstream.for_model.update(slow=slow)
    with served(gateway_app(upstream), fast=True) as port:
        client = stalled(port)
        reading = time.monotonic() + 4 * DEADLINE
        got = 0
        while time.monotonic() < reading:
            got += len(client.recv(16384))
            time.sleep(0.1)
        assert slow.gone.empty() and cuts(port) == 0
        assert got > 100_000  # it read all along, backpressure or not
        assert slow.hung_up(1, CUT_WITHIN)  # then stops reading: cut
        closed_by_gateway(client, within=5)
        assert cuts(port) == 1


@SERVERS
def test_stalled_clients_past_the_pool_cannot_starve_honest_ones(
    upstream: RawUpstream, fast: bool
) -> None:
    slow = Slow()
    upstream.for_model.update(slow=slow, honest=chunked(*OK_TEXT))
    with served(gateway_app(upstream), fast) as port:
        clients = [stalled(port) for _ in range(2 * POOL)]
        until = time.monotonic() + 5
        while sum(sent.get("model") == "slow" for sent in upstream.requests) < POOL:
            assert time.monotonic() < until, "the stalled clients' streams did not begin"
            time.sleep(0.02)
        # every upstream connection is a stalled client's, and as many wait for one
        honest(port)
        assert len(slow.hung_up(2 * POOL, 2 * CUT_WITHIN)) == 2 * POOL
        for client in clients:
            closed_by_gateway(client, within=5)
        honest(port)
        assert cuts(port) == 2 * POOL


@SERVERS
def test_a_whole_reply_to_a_client_that_reads_nothing_is_cut(
    upstream: RawUpstream, fast: bool
) -> None:
    upstream.for_model.update(big=BIG)
    with served(gateway_app(upstream), fast) as port:
        client = stalled(port, "big", stream=False)
        until = time.monotonic() + CUT_WITHIN
        while cuts(port) < 1:
            assert time.monotonic() < until, "the reply was still held, unread"
            time.sleep(0.1)
        sent = closed_by_gateway(client, within=5)
        head, _, body = sent.partition(b"\r\n\r\n")
        length = int(re.search(rb"content-length: (\d+)", head, re.I).group(1))  # type: ignore[union-attr]
        assert length > 2_000_000 and len(body) < length  # cut, not sent whole
        assert cuts(port) == 1


def test_serve_sets_the_send_deadline_by_its_flag(
    upstream: RawUpstream, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("toolwire.server.freeze_heap", lambda: None)  # the test process's heap
    with pytest.raises(SystemExit):
        _parser().parse_args(["serve", "--help"])
    assert f"(default: {SEND_TIMEOUT:g})" in " ".join(capsys.readouterr().out.split())
    argv = ["serve", "--upstream", upstream.base_url, "--no-store", "--send-timeout", "0.5"]
    slow = Slow()
    upstream.for_model.update(slow=slow)  # the client's model, passed on to the upstream
    with served(_gateway(_parser().parse_args(argv)), fast=True) as port:
        began = time.monotonic()
        client = stalled(port)
        gone = slow.hung_up(1, 0.5 + 6.0)
        assert gone and gone[0] - began > 0.5
        closed_by_gateway(client, within=5)
