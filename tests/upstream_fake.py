"""A fake upstream for the failing-upstream tests: a plain socket server on 127.0.0.1.

It reads each request whole and then plays a scripted act on the connection, so it can do
what a well-behaved HTTP server cannot: stall after its headers, trickle, break the chunked
encoding, send a line of 200 MB. The helpers build the acts and the SSE they send.
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from toolwire.backends import OpenAIBackend, Request, stream_sync

from .replies import TOOLS

#: Planted in every upstream body and in the upstream's URL: it must never reach a client.
SECRET = "upstream-secret-7f3a"
DEADLINE = 1.5
#: Long enough that a loaded machine never times out a loopback connect (the one test of a
#: connect that hangs allows 10 s), short enough to be a bound.
CONNECT = 3.0

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
        #: Bumped by :meth:`reset`: a request read before it never takes a later test's act.
        self._generation = 0
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/{SECRET}/v1/"
        self.root = f"http://127.0.0.1:{self.port}/{SECRET}"
        threading.Thread(target=self._serve, daemon=True).start()

    def reset(self) -> None:
        """Forget what an earlier test left unplayed, so one test's failure cannot hand its
        acts to the next test's requests."""
        while True:
            try:
                self._acts.get_nowait()
            except queue.Empty:
                break
        self.for_model.clear()
        self._generation += 1

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
            act = self.for_model.get(sent.get("model")) or self._next_act(self._generation)
            if act is None:
                return
            with contextlib.suppress(OSError):  # the client went away: what faults are about
                act(conn)

    def _next_act(self, generation: int) -> Act | None:
        """The next scripted act, waited for up to 5 s while the test that sent the request
        is still the one running (on a loaded machine an earlier test's straggler must not
        take the act the next test played for its own request)."""
        deadline = time.monotonic() + 5
        while self._generation == generation and time.monotonic() < deadline:
            try:
                return self._acts.get(timeout=0.05)
            except queue.Empty:
                continue
        return None

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


OK_TEXT = (chunk({"content": "Sunny."}), chunk({}, "stop"), DONE)


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


def events_of(backend: Any, request: Request | None = None) -> list[Any]:
    return list(stream_sync(backend.stream(request or Request(ASK["messages"], TOOLS))))


def backend_for(upstream: RawUpstream, **options: Any) -> OpenAIBackend:
    options.setdefault("timeout", DEADLINE)
    return OpenAIBackend("m", base_url=upstream.base_url, connect_timeout=CONNECT, **options)


UNDECLARED = (
    chunk({"tool_calls": [call(0, "a", "get_weather", '{"city": "Oslo"}')]}),
    chunk({"tool_calls": [call(1, "b", "delete_everything", '{"really": true}')]}),
    chunk({}, "tool_calls"),
    DONE,
)
