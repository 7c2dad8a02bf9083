"""Failing upstreams: each fault played by a fake server speaking real HTTP on 127.0.0.1.

The server below is a plain socket server, so it can do what a well-behaved HTTP server
cannot: stall after its headers, trickle, break the chunked encoding, send a line of 200 MB.
Every fault is checked where it matters: through the gateway (the client gets the status
class of the failure and a short message of ours, never the upstream's body, URL or a
traceback; streamed, an error event in OpenAI's shape) and, for what the backends read,
through the backend itself (the events, bounded memory, the deadline).

``FAULTS`` lists the gateway cases; with the backend cases below, :func:`test_the_count`
counts every fault mode tried here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import queue
import socket
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from toolwire.backends import OpenAIBackend, Request, stream_sync
from toolwire.backends.http import MAX_LINE_BYTES, MAX_STREAM_BYTES, Lines
from toolwire.backends.ollama import OllamaBackend
from toolwire.errors import BackendError, UsageError
from toolwire.events import CallEnd, Done, Notice, TextDelta
from toolwire.server import create_app
from toolwire.testing import ServedApp

from .replies import TOOLS

#: Planted in every upstream body and in the upstream's URL: it must never reach a client.
SECRET = "upstream-secret-7f3a"
DEADLINE = 1.5
CONNECT = 0.5

Act = Callable[[socket.socket], None]


class RawUpstream:
    """A socket server on 127.0.0.1: each request is read whole, then the next scripted
    act is played on the connection (then it is closed)."""

    def __init__(self) -> None:
        self._acts: queue.Queue[Act] = queue.Queue()
        self.requests: list[dict[str, Any]] = []
        self.sent: list[int] = []  # bytes each act managed to send
        #: Acts played for every request naming the model (the queue is for the others).
        self.for_model: dict[str, Act] = {}
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/{SECRET}/v1/"
        self.root = f"http://127.0.0.1:{self.port}/{SECRET}"
        threading.Thread(target=self._serve, daemon=True).start()

    def play(self, *acts: Act) -> None:
        for act in acts:
            self._acts.put(act)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                piece = conn.recv(65536)
                if not piece:
                    return
                data += piece
            head, _, body = data.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                key, _, value = line.partition(b":")
                if key.strip().lower() == b"content-length":
                    length = int(value)
            while len(body) < length:
                body += conn.recv(65536)
            sent = json.loads(body or b"{}")
            self.requests.append(sent)
            act = self.for_model.get(sent.get("model"))
            if act is None:
                try:
                    act = self._acts.get(timeout=5)
                except queue.Empty:
                    return
            with contextlib.suppress(OSError):  # the client went away: what faults are about
                act(conn)

    def close(self) -> None:
        self._sock.close()


# ---------------------------------------------------------------- acts


def _wait_gone(conn: socket.socket, seconds: float = 30) -> None:
    """Hold the connection, sending nothing, until the client closes it."""
    conn.settimeout(seconds)
    try:
        while conn.recv(4096):
            pass
    except OSError:
        pass


def respond(status: int, body: bytes, kind: str = "application/json", extra: str = "") -> Act:
    def act(conn: socket.socket) -> None:
        head = (
            f"HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
            f"{extra}Connection: close\r\n\r\n"
        )
        conn.sendall(head.encode() + body)

    return act


def chunked(*pieces: bytes, kind: str = "text/event-stream", pause: float = 0.0) -> Act:
    """A chunked 200 reply of these pieces; a ``None``-like empty piece ends the body."""

    def act(conn: socket.socket) -> None:
        conn.sendall(
            f"HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nTransfer-Encoding: chunked\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        for piece in pieces:
            conn.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            time.sleep(pause)
        conn.sendall(b"0\r\n\r\n")

    return act


def then_stall(*pieces: bytes) -> Act:
    """Headers and these chunks, then nothing, the connection held open."""

    def act(conn: socket.socket) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        for piece in pieces:
            conn.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        _wait_gone(conn)

    return act


def trickle(conn: socket.socket) -> None:
    """A comment line every 0.2 s, for ever: alive, never done."""
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    for _ in range(300):
        conn.sendall(b"3\r\n:\n\n\r\n")
        time.sleep(0.2)


def stall_before_headers(conn: socket.socket) -> None:
    _wait_gone(conn)


def hang_up(conn: socket.socket) -> None:
    conn.shutdown(socket.SHUT_RDWR)


def raw(data: bytes) -> Act:
    def act(conn: socket.socket) -> None:
        conn.sendall(data)

    return act


def endless(
    prefix: bytes, filler: bytes, server: RawUpstream, total: int, status: int = 200
) -> Act:
    """Headers, ``prefix``, then ``filler`` until ``total`` bytes or the client leaves."""

    def act(conn: socket.socket) -> None:
        sent = 0
        conn.sendall(
            f"HTTP/1.1 {status} X\r\n".encode()
            + b"Content-Type: text/event-stream\r\nContent-Length: "
            + str(len(prefix) + total).encode()
            + b"\r\n\r\n"
            + prefix
        )
        block = filler * (65536 // len(filler))
        try:
            while sent < total:
                conn.sendall(block)
                sent += len(block)
        finally:
            server.sent.append(sent)

    return act


# ---------------------------------------------------------------- SSE helpers


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    body = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"
HTML = (
    f"<html><body><h1>Internal Server Error</h1><pre>Traceback (most recent call last):\n"
    f'  File "/srv/{SECRET}/app.py", line 12, in handler\nKeyError: {SECRET}</pre>'
    f"</body></html>"
).encode()


def error_json(message: str) -> bytes:
    return json.dumps({"error": {"message": f"{message} ({SECRET})", "type": "x"}}).encode()


def call(index: int, cid: str | None, name: str | None, args: str | None) -> dict[str, Any]:
    fn: dict[str, Any] = {}
    if name is not None:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    tc: dict[str, Any] = {"index": index, "function": fn}
    if cid is not None:
        tc["id"] = cid
    return tc


WHOLE = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "w1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    },
                    {
                        "id": "w2",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                    },
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 9, "completion_tokens": 4},
}


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def upstream() -> Iterator[RawUpstream]:
    server = RawUpstream()
    yield server
    server.close()


@pytest.fixture(scope="module")
def gateway(upstream: RawUpstream) -> Iterator[str]:
    backend = OpenAIBackend(
        "m", base_url=upstream.base_url, timeout=DEADLINE, connect_timeout=CONNECT
    )
    with ServedApp(create_app(backend)) as served:
        yield served.url


ASK = {
    "model": "toolwire",
    "messages": [{"role": "user", "content": "Weather in Oslo?"}],
    "tools": TOOLS[:1],
}


def ask(gateway: str, *, stream: bool, body: dict[str, Any] | None = None) -> httpx.Response:
    return httpx.post(
        gateway + "/v1/chat/completions", json={**(body or ASK), "stream": stream}, timeout=30
    )


def streamed(response: httpx.Response) -> list[Any]:
    """The JSON payloads of a streamed reply, ``[DONE]`` as the string."""
    out: list[Any] = []
    for line in response.text.splitlines():
        if line.startswith("data: "):
            data = line[6:]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def no_leak(text: str) -> None:
    assert SECRET not in text
    assert "Traceback" not in text and "127.0.0.1" not in text and "<html" not in text


# ---------------------------------------------------------------- gateway cases


@dataclass
class Fault:
    """One way an upstream fails, what the client gets (non-streamed status, or 200 for a
    fault the gateway serves), and the error ``type`` a streamed client reads."""

    name: str
    act: Callable[[RawUpstream], Act]
    status: int
    kind: str = "upstream_error"
    headers: dict[str, str] = field(default_factory=dict)
    slow: bool = False


def _stream(*pieces: bytes) -> Callable[[RawUpstream], Act]:
    return lambda server: chunked(*pieces)


OK_TEXT = (chunk({"content": "Sunny."}), chunk({}, "stop"), DONE)

FAULTS = [
    Fault("400-json", lambda s: respond(400, error_json("max_tokens too large")), 400,
          "invalid_request_error"),
    Fault("401", lambda s: respond(401, error_json("bad key sk-live-123")), 502),
    Fault("403", lambda s: respond(403, error_json("forbidden")), 502),
    Fault("404", lambda s: respond(404, error_json("model m not found")), 502),
    Fault("408", lambda s: respond(408, error_json("request timeout")), 504, "timeout_error"),
    Fault("413", lambda s: respond(413, error_json("too large")), 400, "invalid_request_error"),
    Fault("422", lambda s: respond(422, error_json("unprocessable")), 400,
          "invalid_request_error"),
    Fault("429-retry-after", lambda s: respond(
        429, error_json("slow down"), extra="Retry-After: 7\r\n"),
        429, "rate_limit_error", {"retry-after": "7"}),
    Fault("429-http-date", lambda s: respond(
        429, error_json("slow down"), extra="Retry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\n"),
        429, "rate_limit_error"),
    Fault("500-html-traceback", lambda s: respond(500, HTML, "text/html"), 502),
    Fault("502", lambda s: respond(502, HTML, "text/html"), 502),
    Fault("503", lambda s: respond(503, error_json("overloaded")), 503),
    Fault("504", lambda s: respond(504, HTML, "text/html"), 504, "timeout_error"),
    Fault("418-odd-status", lambda s: respond(
        418, b"I'm a teapot " + SECRET.encode(), "text/plain"), 502),
    Fault("302-redirect", lambda s: respond(
        302, b"", extra=f"Location: http://127.0.0.1:9/{SECRET}\r\n"), 502),
    Fault("500-not-utf8", lambda s: respond(500, b"\xff\xfe" + SECRET.encode() + b"\x80"), 502),
    Fault("500-body-of-50mb", lambda s: endless(b"", SECRET.encode(), s, 50 * 1024 * 1024, 500),
          502),
    Fault("error-mid-stream", _stream(chunk({"content": "Hel"}),
          b"data: " + error_json("overloaded mid-way") + b"\n\n"), 502),
    Fault("hang-up-before-reply", lambda s: hang_up, 502),
    Fault("not-http", lambda s: raw(b"SSH-2.0-OpenSSH " + SECRET.encode() + b"\r\n\r\n"), 502),
    Fault("broken-chunked-encoding", lambda s: raw(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        b"\r\nzz\r\n" + SECRET.encode() + b"\r\n"), 502),
    Fault("cut-mid-body", lambda s: raw(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 5000\r\n\r\n"
        + chunk({"content": "Hel"})), 502),
    Fault("cut-mid-call-no-finish", _stream(
        chunk({"tool_calls": [call(0, "a", "get_weather", '{"city": "Os')]})), 502),
    Fault("empty-200", lambda s: respond(200, b"", "text/event-stream"), 502),
    Fault("html-200", lambda s: respond(200, HTML, "text/html"), 502),
    Fault("line-not-json", _stream(chunk({"content": "a"}), b"data: {oops " + SECRET.encode()
                                   + b"\n\n"), 502),
    Fault("deeply-nested-json", _stream(b"data: " + b"[" * 100_000 + b"\n\n", DONE), 502),
    Fault("delta-not-an-object", _stream(
        b'data: {"choices": [{"index": 0, "delta": "' + SECRET.encode() + b'"}]}\n\n', DONE), 502),
    Fault("choices-not-a-list", _stream(b'data: {"choices": 7}\n\n', DONE), 502),
    Fault("function-not-an-object", _stream(
        chunk({"tool_calls": [{"index": 0, "id": "a", "function": SECRET}]}), DONE), 502),
    Fault("line-over-the-limit", lambda s: endless(b"data: ", b"a", s, 200 * 1024 * 1024), 502),
    Fault("reply-over-the-limit", lambda s: endless(
        b"", b": " + b"k" * 1021 + b"\n", s, 2 * MAX_STREAM_BYTES), 502),
    Fault("plain-json-answer", lambda s: respond(200, json.dumps(WHOLE).encode()), 200),
    Fault("plain-json-as-event-stream", lambda s: respond(
        200, json.dumps(WHOLE, indent=2).encode(), "text/event-stream"), 200),
    Fault("plain-json-error-200", lambda s: respond(200, error_json("quota")), 502),
    Fault("cr-line-ends", _stream(b"".join(OK_TEXT).replace(b"\n", b"\r")), 200),
    Fault("finish-without-done", _stream(chunk({"content": "Sunny."}), chunk({}, "stop")), 200),
    Fault("stall-before-headers", lambda s: stall_before_headers, 504, "timeout_error", slow=True),
    Fault("stall-after-headers", lambda s: then_stall(), 504, "timeout_error", slow=True),
    Fault("stall-mid-reply", lambda s: then_stall(chunk({"content": "Sun"})), 504,
          "timeout_error", slow=True),
    Fault("trickle-past-the-deadline", lambda s: trickle, 504, "timeout_error", slow=True),
]  # fmt: skip


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_failing_upstream_gets_its_status_and_a_short_message_of_ours(
    upstream: RawUpstream,
    gateway: str,
    fault: Fault,
    stream: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    upstream.play(fault.act(upstream))
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="toolwire.gateway"):
        r = ask(gateway, stream=stream)
    took = time.monotonic() - started
    assert took < DEADLINE + 3  # no fault holds the client past the deadline (and a margin)
    no_leak(r.text)
    if fault.status == 200:  # served
        assert r.status_code == 200
        if stream:
            events = streamed(r)
            assert events[-1] == "[DONE]" and not any("error" in e for e in events[:-1])
        else:
            assert r.json()["choices"][0]["finish_reason"] in ("stop", "tool_calls")
        return
    if not stream or r.headers["content-type"].startswith("application/json"):
        # before the reply began (or not streamed): the status says what failed
        assert r.status_code == fault.status, r.text
        error = r.json()["error"]
        for key, value in fault.headers.items():
            assert r.headers[key] == value
    else:  # the reply had begun: its last event is the error
        assert r.status_code == 200
        events = streamed(r)
        assert "[DONE]" not in events
        error = events[-1]["error"]
    assert error["type"] == fault.kind
    assert error["message"].startswith("the model behind the gateway")
    assert len(error["message"]) < 120
    # what the client is not told is in the log, for the operator
    if fault.name.startswith(("500-html", "400-json")):
        assert SECRET in caplog.text


def test_a_streamed_failure_before_the_reply_has_its_status(
    upstream: RawUpstream, gateway: str
) -> None:
    # Failures before the first event get a real status even when streamed; a failure
    # after it (cut mid-body above) is the stream's last event.
    for status in (429, 503):
        upstream.play(respond(status, error_json("busy")))
        r = ask(gateway, stream=True)
        assert r.status_code == status and r.json()["error"]["message"]


def test_an_unreachable_upstream_is_a_502() -> None:
    backend = OpenAIBackend(f"m-{SECRET}", base_url=f"http://127.0.0.1:9/{SECRET}/v1/")
    with ServedApp(create_app(backend)) as served:
        for stream in (False, True):
            r = ask(served.url, stream=stream)
            assert r.status_code == 502 and "could not be reached" in r.json()["error"]["message"]
            no_leak(r.text)


def test_a_connect_that_hangs_ends_at_the_connect_timeout() -> None:
    # A listener whose accept queue is full: the SYN gets no answer, the connect hangs.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    try:
        backend = OpenAIBackend(
            "m", base_url=f"http://127.0.0.1:{port}/v1/", timeout=30, connect_timeout=CONNECT
        )
        with ServedApp(create_app(backend)) as served:
            started = time.monotonic()
            r = ask(served.url, stream=False)
            took = time.monotonic() - started
        assert r.status_code == 504 and r.json()["error"]["type"] == "timeout_error"
        assert took < 10  # the connect timeout, not the 30 s deadline
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


# ---------------------------------------------------------------- backend cases


def events_of(backend: Any, request: Request | None = None) -> list[Any]:
    return list(stream_sync(backend.stream(request or Request(ASK["messages"], TOOLS))))


def backend_for(upstream: RawUpstream, **options: Any) -> OpenAIBackend:
    options.setdefault("timeout", DEADLINE)
    return OpenAIBackend("m", base_url=upstream.base_url, connect_timeout=CONNECT, **options)


def test_a_line_of_200_mb_is_refused_at_the_limit_with_memory_bounded(
    upstream: RawUpstream,
) -> None:
    upstream.sent.clear()
    upstream.play(endless(b"data: ", b"a", upstream, 200 * 1024 * 1024))
    tracemalloc.start()
    try:
        with pytest.raises(BackendError, match="longer than") as info:
            events_of(backend_for(upstream, timeout=30))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.kind == "unreadable"
    assert peak < 3 * MAX_LINE_BYTES  # the partial line, and never the whole of it
    for _ in range(100):
        if upstream.sent:
            break
        time.sleep(0.05)
    assert upstream.sent and upstream.sent[0] < 64 * 1024 * 1024  # reading stopped early


def test_a_stalled_upstream_ends_within_the_deadline(upstream: RawUpstream) -> None:
    upstream.play(then_stall(chunk({"content": "Sun"})))
    started = time.monotonic()
    with pytest.raises(BackendError, match="deadline") as info:
        events_of(backend_for(upstream, timeout=1.0))
    assert info.value.kind == "timeout"
    assert 0.9 < time.monotonic() - started < 3


def test_stalled_upstreams_do_not_starve_other_requests(upstream: RawUpstream) -> None:
    # Stalled requests fill every connection of a small pool; each ends at its deadline and
    # frees its connection, so an ordinary request made meanwhile is served soon after.
    async def run() -> tuple[list[Any], list[Any], float]:
        limits = httpx.Limits(max_connections=4, max_keepalive_connections=4)
        async with httpx.AsyncClient(limits=limits) as client:
            upstream.for_model["stalls"] = then_stall()
            stalls = OpenAIBackend("stalls", base_url=upstream.base_url, client=client, timeout=1.0)
            patient = backend_for(upstream, client=client, timeout=10.0)

            async def one(backend: OpenAIBackend) -> Any:
                try:
                    return [e async for e in backend.stream(Request(ASK["messages"]))]
                except BackendError as exc:
                    return exc

            upstream.play(chunked(*OK_TEXT))
            stalled = [asyncio.create_task(one(stalls)) for _ in range(8)]
            await asyncio.sleep(0.2)  # the pool is full
            started = time.monotonic()
            after = await one(patient)
            waited = time.monotonic() - started
            return list(await asyncio.gather(*stalled)), after, waited

    try:
        stalled, after, waited = asyncio.run(run())
    finally:
        del upstream.for_model["stalls"]
    assert all(isinstance(e, BackendError) and e.kind == "timeout" for e in stalled)
    assert [e.text for e in after if isinstance(e, TextDelta)] == ["Sunny."]
    assert waited < 4  # two rounds of 1 s deadlines, not the patient one's 10 s


def test_calls_at_one_index_with_different_ids_are_kept_apart(upstream: RawUpstream) -> None:
    upstream.play(
        chunked(
            chunk({"tool_calls": [call(0, "a", "get_weather", '{"city": "Oslo"}')]}),
            chunk({"tool_calls": [call(0, "b", "get_weather", '{"city": "Rome"}')]}),
            chunk({}, "tool_calls"),
            DONE,
        )
    )
    events = events_of(backend_for(upstream))
    ends = [e.call for e in events if isinstance(e, CallEnd)]
    assert [(c.id, c.arguments) for c in ends] == [("a", {"city": "Oslo"}), ("b", {"city": "Rome"})]
    assert [e.index for e in events if isinstance(e, CallEnd)] == [0, 1]
    assert "calls-kept-apart" in [e.code for e in events if isinstance(e, Notice)]


def test_calls_at_one_index_without_ids_but_other_names_are_kept_apart(
    upstream: RawUpstream,
) -> None:
    upstream.play(
        chunked(
            chunk({"tool_calls": [call(0, None, "get_weather", '{"city": "Oslo"}')]}),
            chunk({"tool_calls": [call(0, None, "write_file", '{"path": "a", "text": "b"}')]}),
            chunk({}, "tool_calls"),
            DONE,
        )
    )
    ends = [e.call for e in events_of(backend_for(upstream)) if isinstance(e, CallEnd)]
    assert [(c.name, c.arguments) for c in ends] == [
        ("get_weather", {"city": "Oslo"}),
        ("write_file", {"path": "a", "text": "b"}),
    ]


def test_one_call_in_pieces_at_one_index_stays_one_call(upstream: RawUpstream) -> None:
    upstream.play(
        chunked(
            chunk({"tool_calls": [call(0, "a", "get_weather", "")]}),
            chunk({"tool_calls": [call(0, "a", "get_weather", '{"city": ')]}),
            chunk({"tool_calls": [call(0, None, None, '"Oslo"}')]}),
            chunk({}, "tool_calls"),
            DONE,
        )
    )
    events = events_of(backend_for(upstream))
    (end,) = [e.call for e in events if isinstance(e, CallEnd)]
    assert end.arguments == {"city": "Oslo"}
    assert not [e for e in events if isinstance(e, Notice)]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_tool_calls_sent_as_an_object_are_read_as_one_call(
    upstream: RawUpstream, gateway: str, stream: bool
) -> None:
    one = {
        "index": 0,
        "id": "a",
        "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
    }
    upstream.play(chunked(chunk({"tool_calls": one}), chunk({}, "tool_calls"), DONE))
    r = ask(gateway, stream=stream)
    assert r.status_code == 200
    if stream:
        events = streamed(r)
        calls = [
            c for e in events[:-1] for ch in e["choices"] for c in ch["delta"].get("tool_calls", [])
        ]
        finish = [
            ch["finish_reason"] for e in events[:-1] for ch in e["choices"] if ch["finish_reason"]
        ]
        notices = events[-2]["toolwire"]["notices"]
    else:
        choice = r.json()["choices"][0]
        calls, finish = choice["message"]["tool_calls"], [choice["finish_reason"]]
        notices = r.json()["toolwire"]["notices"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"city": "Oslo"}]
    assert finish == ["tool_calls"]
    assert "recovered-tool-calls-object" in [n["code"] for n in notices]


def test_tool_calls_of_another_shape_are_named_and_never_a_finish_with_no_calls(
    upstream: RawUpstream,
) -> None:
    upstream.play(chunked(chunk({"tool_calls": "get_weather"}), chunk({}, "tool_calls"), DONE))
    events = events_of(backend_for(upstream))
    assert not [e for e in events if isinstance(e, CallEnd)]
    assert [e.code for e in events if isinstance(e, Notice)] == ["call-not-read"]
    assert events[-1] == Done("stop", None)  # not "tool_calls" with no call


UNDECLARED = (
    chunk({"tool_calls": [call(0, "a", "get_weather", '{"city": "Oslo"}')]}),
    chunk({"tool_calls": [call(1, "b", "delete_everything", '{"really": true}')]}),
    chunk({}, "tool_calls"),
    DONE,
)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_call_to_an_undeclared_tool_is_a_notice_never_a_call(
    upstream: RawUpstream, gateway: str, stream: bool
) -> None:
    upstream.play(chunked(*UNDECLARED))
    r = ask(gateway, stream=stream)
    if stream:
        events = streamed(r)
        calls = [
            c for e in events[:-1] for ch in e["choices"] for c in ch["delta"].get("tool_calls", [])
        ]
        notices = events[-2]["toolwire"]["notices"]
    else:
        calls = r.json()["choices"][0]["message"]["tool_calls"]
        notices = r.json()["toolwire"]["notices"]
    assert [c["function"]["name"] for c in calls] == ["get_weather"]
    assert [c["index"] for c in calls if "index" in c] == ([0] if stream else [])
    (undeclared,) = [n for n in notices if n["code"] == "undeclared-tool"]
    assert "delete_everything" in undeclared["message"]


def test_a_call_to_an_undeclared_tool_is_an_error_when_strict(
    upstream: RawUpstream, gateway: str
) -> None:
    upstream.play(chunked(*UNDECLARED))
    r = ask(gateway, stream=False, body={**ASK, "toolwire": {"strict": True}})
    assert r.status_code == 502 and "did not declare" in r.json()["error"]["message"]
    upstream.play(chunked(*UNDECLARED))
    with pytest.raises(BackendError) as info:
        events_of(backend_for(upstream), Request(ASK["messages"], TOOLS[:1], strict=True))
    assert info.value.kind == "undeclared-tool"


def test_every_transport_drops_undeclared_calls(upstream: RawUpstream) -> None:
    # The same decision for Ollama's native API: it is the pipeline's, not a backend's.
    line = {
        "message": {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "rm_rf", "arguments": {}}}],
        },
        "done": True,
    }
    upstream.play(chunked(json.dumps(line).encode() + b"\n", kind="application/x-ndjson"))
    backend = OllamaBackend("q", base_url=upstream.root, timeout=DEADLINE)
    events = events_of(backend, Request(ASK["messages"], TOOLS[:1]))
    assert not [e for e in events if isinstance(e, CallEnd)]
    assert [e.code for e in events if isinstance(e, Notice)] == ["undeclared-tool"]
    assert events[-1] == Done("stop", None)


def test_a_plain_json_answer_is_read_whole(upstream: RawUpstream) -> None:
    upstream.play(respond(200, json.dumps(WHOLE).encode()))
    events = events_of(backend_for(upstream))
    ends = [e.call for e in events if isinstance(e, CallEnd)]
    assert [(c.id, c.arguments) for c in ends] == [
        ("w1", {"city": "Oslo"}),
        ("w2", {"city": "Rome"}),
    ]
    assert events[-1] == Done("tool_calls", {"prompt_tokens": 9, "completion_tokens": 4})


def test_a_plain_json_answer_is_served_as_a_stream(upstream: RawUpstream, gateway: str) -> None:
    upstream.play(respond(200, json.dumps(WHOLE).encode()))
    r = ask(gateway, stream=True)
    assert r.headers["content-type"].startswith("text/event-stream")
    events = streamed(r)
    calls = [
        c for e in events[:-1] for ch in e["choices"] for c in ch["delta"].get("tool_calls", [])
    ]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"city": "Oslo"},
        {"city": "Rome"},
    ]
    assert events[-1] == "[DONE]"


@pytest.mark.parametrize("pretty", [False, True], ids=["one-line", "pretty"])
def test_ollama_ignoring_stream_is_read_whole(upstream: RawUpstream, pretty: bool) -> None:
    whole = {"message": {"role": "assistant", "content": "Sunny."}, "done": True,
             "done_reason": "stop", "eval_count": 2}  # fmt: skip
    upstream.play(respond(200, json.dumps(whole, indent=2 if pretty else None).encode()))
    events = events_of(OllamaBackend("q", base_url=upstream.root, timeout=DEADLINE))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Sunny."]
    assert events[-1] == Done("stop", {"completion_tokens": 2})


def test_ollama_faults(upstream: RawUpstream) -> None:
    backend = OllamaBackend("q", base_url=upstream.root, timeout=1.0, connect_timeout=CONNECT)
    upstream.play(respond(500, HTML, "text/html"))
    with pytest.raises(BackendError) as info:
        events_of(backend)
    assert (info.value.kind, info.value.status) == ("refused", 500)
    upstream.play(then_stall())
    with pytest.raises(BackendError) as info:
        events_of(backend)
    assert info.value.kind == "timeout"
    upstream.play(endless(b"", b"{", upstream, 100 * 1024 * 1024))
    with pytest.raises(BackendError) as info:
        events_of(backend)
    assert info.value.kind == "unreadable"


def test_timeouts_are_checked_and_reach_the_cli() -> None:
    with pytest.raises(UsageError):
        OpenAIBackend("m", timeout=0)
    with pytest.raises(UsageError):
        OpenAIBackend("m", connect_timeout=-1)
    from toolwire.cli import _parser

    args = _parser().parse_args(
        ["serve", "--upstream", "http://x/v1", "--upstream-model", "m",
         "--upstream-timeout", "30", "--connect-timeout", "2.5"]
    )  # fmt: skip
    assert (args.upstream_timeout, args.connect_timeout) == (30.0, 2.5)
    with pytest.raises(SystemExit):
        _parser().parse_args(["serve", "--upstream-timeout", "0"])


@pytest.mark.parametrize(
    ("pieces", "lines"),
    [
        ([b"a\nb\r\nc\rd"], [b"a", b"b", b"c"]),
        ([b"a\r", b"\nb\n"], [b"a", b"b"]),  # CRLF cut between two chunks is one end
        ([b"ab", b"cd", b"\n"], [b"abcd"]),
    ],
)
def test_lines_are_cut_at_every_line_end(pieces: list[bytes], lines: list[bytes]) -> None:
    cutter = Lines(limit=100)
    assert [line for piece in pieces for line in cutter.feed(piece)] == lines


def test_a_line_is_refused_while_it_grows() -> None:
    cutter = Lines(limit=10)
    cutter.feed(b"12345")
    with pytest.raises(BackendError, match="longer than 10"):
        cutter.feed(b"678901")


BACKEND_CASES = [
    "line-of-200-mb-memory",
    "stalled-backend-deadline",
    "stalled-do-not-starve",
    "duplicate-index-ids",
    "duplicate-index-names",
    "one-call-in-pieces",
    "tool-calls-object",
    "tool-calls-string",
    "undeclared-tool",
    "undeclared-tool-strict",
    "undeclared-tool-ollama",
    "plain-json-read-whole",
    "plain-json-served-as-stream",
    "ollama-plain-json",
    "ollama-plain-json-pretty",
    "ollama-500",
    "ollama-stall",
    "ollama-endless-line",
    "unreachable",
    "connect-hangs",
    "streamed-status-before-reply",
]


def test_the_count() -> None:
    # The fault modes tried in this file (the attack tried 49); each gateway fault
    # is tried streamed and not.
    assert len(FAULTS) + len(BACKEND_CASES) >= 49
    assert len({f.name for f in FAULTS} | set(BACKEND_CASES)) == len(FAULTS) + len(BACKEND_CASES)
