"""Failing upstreams as the backends read them, against a fake server speaking real HTTP on
127.0.0.1 (:mod:`tests.upstream_fake`): memory bounded while a 200 MB line arrives, the
deadline, a full pool freed by it, calls at one index kept apart, ``tool_calls`` in other
shapes, undeclared tools for every transport, a plain JSON answer read whole, Ollama's faults.
The last test counts every fault mode tried here and in ``tests/test_upstream_faults.py``.
"""

from __future__ import annotations

import asyncio
import json
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from toolwire.backends import OpenAIBackend, Request
from toolwire.backends.http import MAX_LINE_BYTES, Lines, new_client
from toolwire.backends.ollama import OllamaBackend
from toolwire.errors import BackendError, UsageError
from toolwire.events import CallEnd, Done, Notice, TextDelta

from .replies import TOOLS
from .test_upstream_faults import FAULTS
from .upstream_fake import (
    ASK,
    CONNECT,
    DEADLINE,
    DONE,
    HTML,
    OK_TEXT,
    WHOLE,
    RawUpstream,
    backend_for,
    call,
    chunk,
    chunked,
    endless,
    events_of,
    hang_up,
    respond,
    then_stall,
)


@pytest.fixture(scope="module")
def upstream() -> Iterator[RawUpstream]:
    server = RawUpstream()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _fresh(upstream: RawUpstream) -> None:
    upstream.reset()


@pytest.fixture(params=["a client per request", "serve's client"])
def backend(request: pytest.FixtureRequest) -> Callable[..., OpenAIBackend]:
    """:func:`backend_for`, its backend with a client of its own per request (a new
    connection pool each time) or with the long-lived one ``toolwire serve`` gives it (one
    pool, connections kept alive)."""
    lean = request.param == "serve's client"

    def make(upstream: RawUpstream, **options: Any) -> OpenAIBackend:
        if lean:
            options["client"] = new_client(
                options.get("timeout", DEADLINE), connect_timeout=CONNECT
            )
        return backend_for(upstream, **options)

    return make


def test_a_line_of_200_mb_is_refused_at_the_limit_with_memory_bounded(
    upstream: RawUpstream,
    backend: Callable[..., OpenAIBackend],
) -> None:
    upstream.sent.clear()
    upstream.play(endless(b"data: ", b"a", upstream, 200 * 1024 * 1024))
    tracemalloc.start()
    try:
        with pytest.raises(BackendError, match="longer than") as info:
            events_of(backend(upstream, timeout=30))
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


def test_a_stalled_upstream_ends_within_the_deadline(
    upstream: RawUpstream, backend: Callable[..., OpenAIBackend]
) -> None:
    upstream.play(then_stall(chunk({"content": "Sun"})))
    started = time.monotonic()
    with pytest.raises(BackendError, match="deadline") as info:
        events_of(backend(upstream, timeout=1.0))
    assert info.value.kind == "timeout"
    assert 0.9 < time.monotonic() - started < 6  # not the stall's 30 s (a loaded machine's margin)


def test_stalled_upstreams_do_not_starve_other_requests(upstream: RawUpstream) -> None:
    # Stalled requests fill every connection of a small pool; each ends at its deadline and
    # frees its connection, so an ordinary request made meanwhile is served soon after.
    async def run() -> tuple[list[Any], list[Any], float]:
        limits = httpx.Limits(max_connections=4, max_keepalive_connections=4)
        async with httpx.AsyncClient(limits=limits) as client:
            upstream.for_model["stalls"] = then_stall()
            stalls = OpenAIBackend("stalls", base_url=upstream.base_url, client=client, timeout=1.0)
            # Its reply is the model's own, so no other request can take it.
            upstream.for_model["patient"] = chunked(*OK_TEXT)
            patient = OpenAIBackend(
                "patient", base_url=upstream.base_url, client=client, timeout=10.0
            )

            async def one(backend: OpenAIBackend) -> Any:
                try:
                    return [e async for e in backend.stream(Request(ASK["messages"]))]
                except BackendError as exc:
                    return exc

            stalled = [asyncio.create_task(one(stalls)) for _ in range(8)]
            await asyncio.sleep(0.2)  # the pool is full
            started = time.monotonic()
            after = await one(patient)
            waited = time.monotonic() - started
            return list(await asyncio.gather(*stalled)), after, waited

    try:
        stalled, after, waited = asyncio.run(run())
    finally:
        upstream.for_model.clear()
    assert all(isinstance(e, BackendError) and e.kind == "timeout" for e in stalled)
    assert not isinstance(after, BackendError), after
    assert [e.text for e in after if isinstance(e, TextDelta)] == ["Sunny."]
    assert waited < 8  # two rounds of 1 s deadlines (and a loaded machine's margin), not 10 s


def test_calls_at_one_index_with_different_ids_are_kept_apart(
    upstream: RawUpstream, backend: Callable[..., OpenAIBackend]
) -> None:
    upstream.play(
        chunked(
            chunk({"tool_calls": [call(0, "a", "get_weather", '{"city": "Oslo"}')]}),
            chunk({"tool_calls": [call(0, "b", "get_weather", '{"city": "Rome"}')]}),
            chunk({}, "tool_calls"),
            DONE,
        )
    )
    events = events_of(backend(upstream))
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


def test_one_call_in_pieces_at_one_index_stays_one_call(
    upstream: RawUpstream, backend: Callable[..., OpenAIBackend]
) -> None:
    upstream.play(
        chunked(
            chunk({"tool_calls": [call(0, "a", "get_weather", "")]}),
            chunk({"tool_calls": [call(0, "a", "get_weather", '{"city": ')]}),
            chunk({"tool_calls": [call(0, None, None, '"Oslo"}')]}),
            chunk({}, "tool_calls"),
            DONE,
        )
    )
    events = events_of(backend(upstream))
    (end,) = [e.call for e in events if isinstance(e, CallEnd)]
    assert end.arguments == {"city": "Oslo"}
    assert not [e for e in events if isinstance(e, Notice)]


def test_tool_calls_of_another_shape_are_named_and_never_a_finish_with_no_calls(
    upstream: RawUpstream,
) -> None:
    upstream.play(chunked(chunk({"tool_calls": "get_weather"}), chunk({}, "tool_calls"), DONE))
    events = events_of(backend_for(upstream))
    assert not [e for e in events if isinstance(e, CallEnd)]
    assert [e.code for e in events if isinstance(e, Notice)] == ["call-not-read"]
    assert events[-1] == Done("stop", None)  # not "tool_calls" with no call


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


def test_a_plain_json_answer_is_read_whole(
    upstream: RawUpstream, backend: Callable[..., OpenAIBackend]
) -> None:
    upstream.play(respond(200, json.dumps(WHOLE).encode()))
    events = events_of(backend(upstream))
    ends = [e.call for e in events if isinstance(e, CallEnd)]
    assert [(c.id, c.arguments) for c in ends] == [
        ("w1", {"city": "Oslo"}),
        ("w2", {"city": "Rome"}),
    ]
    assert events[-1] == Done("tool_calls", {"prompt_tokens": 9, "completion_tokens": 4})


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
    # The fault modes tried here and through the gateway (the attack tried 49);
    # each gateway fault is tried streamed and not.
    assert len(FAULTS) + len(BACKEND_CASES) >= 49
    assert len({f.name for f in FAULTS} | set(BACKEND_CASES)) == len(FAULTS) + len(BACKEND_CASES)


def test_a_connection_closed_before_any_reply_is_tried_once_more(
    upstream: RawUpstream, backend: Callable[..., OpenAIBackend]
) -> None:
    """A server closing a kept-alive connection as it is reused answers nothing: the
    request goes once more; a second hang-up is the server's answer (unreachable)."""
    before = len(upstream.requests)
    upstream.play(hang_up, chunked(chunk({"content": "Hi there."}), chunk({}, "stop"), DONE))
    events = events_of(backend(upstream))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hi there."
    assert len(upstream.requests) == before + 2
    upstream.play(hang_up, hang_up)
    with pytest.raises(BackendError) as raised:
        events_of(backend(upstream))
    assert raised.value.kind == "unreachable"
    assert len(upstream.requests) == before + 4
