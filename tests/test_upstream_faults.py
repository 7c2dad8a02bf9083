"""Failing upstreams through the gateway: each fault played by a fake server speaking real
HTTP on 127.0.0.1 (:mod:`tests.upstream_fake`).

The client gets the status class of the failure and a short message of ours, never the
upstream's body, URL or a traceback (those are logged); streamed, the same status when the
failure comes before the reply begins, else an error event in OpenAI's shape as the stream's
last. ``FAULTS`` lists the cases, each tried streamed and not;
``tests/test_upstream_faults_backend.py`` has the cases read by the backends themselves, and
counts them all.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from toolwire.backends import OpenAIBackend, Request
from toolwire.backends.http import MAX_STREAM_BYTES, new_client
from toolwire.errors import BackendError
from toolwire.server import create_app
from toolwire.testing import ServedApp

from .replies import TOOLS
from .upstream_fake import (
    ASK,
    CONNECT,
    DEADLINE,
    DONE,
    HTML,
    OK_TEXT,
    SECRET,
    UNDECLARED,
    WHOLE,
    Act,
    RawUpstream,
    ask,
    backend_for,
    call,
    chunk,
    chunked,
    endless,
    error_json,
    events_of,
    hang_up,
    no_leak,
    raw,
    respond,
    stall_before_headers,
    streamed,
    then_stall,
    trickle,
)


@pytest.fixture(scope="module")
def upstream() -> Iterator[RawUpstream]:
    server = RawUpstream()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _fresh(upstream: RawUpstream) -> None:
    upstream.reset()


@pytest.fixture(scope="module", params=["a client per request", "serve's client"])
def gateway(upstream: RawUpstream, request: pytest.FixtureRequest) -> Iterator[str]:
    """The gateway in front of the upstream, its backend with a client of its own per
    request (a new connection pool each time), or with the long-lived one ``toolwire
    serve`` gives it (:func:`~toolwire.backends.http.new_client`: one pool, connections
    kept alive)."""
    client = (
        new_client(DEADLINE, connect_timeout=CONNECT)
        if request.param != "a client per request"
        else None
    )
    backend = OpenAIBackend(
        "m", base_url=upstream.base_url, timeout=DEADLINE, connect_timeout=CONNECT, client=client
    )
    with ServedApp(create_app(backend)) as served:
        yield served.url


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


def _hang_up_twice(upstream: RawUpstream) -> Act:
    """A hang-up before any reply is tried once more (a kept-alive connection may have been
    closed as it was reused): the fault is the server hanging up on both."""
    upstream.play(hang_up)
    return hang_up


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
    Fault("hang-up-before-reply", lambda s: _hang_up_twice(s), 502),
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
    # no fault holds the client past the deadline (and what a loaded machine adds; a stall
    # would hold it 30 s, a trickle 60)
    assert took < DEADLINE + 8
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
        assert took < 20  # the connect timeout (and a busy machine's margin), not the 30 s
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def merged(deltas: Any) -> list[dict[str, Any]]:
    """Streamed call chunks joined as a client joins them: by index, the arguments
    concatenated (a call's first chunk names it; its arguments follow in pieces)."""
    calls: dict[int, dict[str, Any]] = {}
    for delta in deltas:
        call = calls.setdefault(
            delta["index"], {"index": delta["index"], "function": {"name": "", "arguments": ""}}
        )
        function = delta.get("function") or {}
        call["function"]["name"] += function.get("name") or ""
        call["function"]["arguments"] += function.get("arguments") or ""
    return list(calls.values())


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
        calls = merged(
            c for e in events[:-1] for ch in e["choices"] for c in ch["delta"].get("tool_calls", [])
        )
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


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_call_to_an_undeclared_tool_is_a_notice_never_a_call(
    upstream: RawUpstream, gateway: str, stream: bool
) -> None:
    upstream.play(chunked(*UNDECLARED))
    r = ask(gateway, stream=stream)
    if stream:
        events = streamed(r)
        calls = merged(
            c for e in events[:-1] for ch in e["choices"] for c in ch["delta"].get("tool_calls", [])
        )
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


def test_a_plain_json_answer_is_served_as_a_stream(upstream: RawUpstream, gateway: str) -> None:
    upstream.play(respond(200, json.dumps(WHOLE).encode()))
    r = ask(gateway, stream=True)
    assert r.headers["content-type"].startswith("text/event-stream")
    events = streamed(r)
    calls = merged(
        c for e in events[:-1] for ch in e["choices"] for c in ch["delta"].get("tool_calls", [])
    )
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"city": "Oslo"},
        {"city": "Rome"},
    ]
    assert events[-1] == "[DONE]"
