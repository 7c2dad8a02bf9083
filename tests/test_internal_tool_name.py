"""A call named like the reader's own name for a call it could not read
(``unreadable_tool_call``), which the client never declared, is a call to an undeclared tool
like any other: held back as an ``undeclared-tool`` notice, and with ``strict`` a 502.
Through the gateway over HTTP, before a raw upstream on 127.0.0.1
(:mod:`tests.upstream_fake`); the reader for words still names its own unreadable calls so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from toolwire import events as ev
from toolwire.formats.words import UNREADABLE
from toolwire.pipeline import Plan, Request
from toolwire.pipeline.reply import read
from toolwire.server import create_app
from toolwire.testing import ServedApp

from .replies import TOOLS
from .upstream_fake import ASK, CONNECT, DONE, RawUpstream, ask, call, chunk, chunked, streamed

NAMED_LIKE_OURS = (
    chunk({"tool_calls": [call(0, "a", "get_weather", '{"city": "Oslo"}')]}),
    chunk({"tool_calls": [call(1, "b", UNREADABLE, '{"cmd": "rm -rf /"}')]}),
    chunk({}, "tool_calls"),
    DONE,
)


@pytest.fixture(scope="module")
def upstream() -> Iterator[RawUpstream]:
    server = RawUpstream()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _fresh(upstream: RawUpstream) -> None:
    upstream.reset()


@pytest.fixture(scope="module")
def gateway(upstream: RawUpstream) -> Iterator[str]:
    from toolwire.backends import OpenAIBackend

    backend = OpenAIBackend("m", base_url=upstream.base_url, timeout=30, connect_timeout=CONNECT)
    with ServedApp(create_app(backend)) as served:
        yield served.url


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_call_named_like_the_internal_tool_is_held_back(
    upstream: RawUpstream, gateway: str, stream: bool
) -> None:
    upstream.play(chunked(*NAMED_LIKE_OURS))
    r = ask(gateway, stream=stream)
    assert r.status_code == 200
    if stream:
        events = streamed(r)
        names = [
            c["function"]["name"]
            for e in events[:-1]
            for ch in e["choices"]
            for c in ch["delta"].get("tool_calls", [])
            if c.get("function", {}).get("name")
        ]
        notices = events[-2]["toolwire"]["notices"]
    else:
        names = [c["function"]["name"] for c in r.json()["choices"][0]["message"]["tool_calls"]]
        notices = r.json()["toolwire"]["notices"]
    assert names == ["get_weather"]
    (undeclared,) = [n for n in notices if n["code"] == "undeclared-tool"]
    assert UNREADABLE in undeclared["message"]


def test_a_call_named_like_the_internal_tool_is_an_error_when_strict(
    upstream: RawUpstream, gateway: str
) -> None:
    upstream.play(chunked(*NAMED_LIKE_OURS))
    r = ask(gateway, stream=False, body={**ASK, "toolwire": {"strict": True}})
    assert r.status_code == 502
    assert "did not declare" in r.json()["error"]["message"]


def test_the_reader_for_words_still_names_its_own_unreadable_call() -> None:
    """On a turn read by the reader for words, a block it cannot read is passed as its own
    unreadable call (whose result teaches the model how to call)."""

    async def raw() -> object:
        yield ev.TextDelta("<tool_call>\n{not json at all\n</tool_call>")
        yield ev.Done("stop")

    request = Request([{"role": "user", "content": "hi"}], TOOLS)

    async def collect() -> list[ev.Event]:
        return [e async for e in read(raw(), Plan("words"), request)]  # type: ignore[arg-type]

    events = asyncio.run(collect())
    assert [e.call.name for e in events if isinstance(e, ev.CallEnd)] == [UNREADABLE]
    assert not [e for e in events if isinstance(e, ev.Notice) and e.code == "undeclared-tool"]
