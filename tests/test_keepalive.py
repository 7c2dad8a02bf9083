"""While a streamed request waits on the model, the client hears from the gateway.

An upstream over real HTTP that says nothing for 3 seconds (a long prompt being read), the
gateway's keep-alive every second: each API's raw stream shows the status line and its own
keep-alives before the first token (Chat Completions and Responses an SSE comment, which
the official clients skip; Messages ``event: ping``), and again in a long silence mid-way.
A failure known quickly still gets its own status; one after the wait is the stream's own
error event.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest
from openai import OpenAI

from toolwire.backends import OpenAIBackend
from toolwire.pipeline import ModelMemory
from toolwire.server import create_app
from toolwire.testing import ServedApp

from .streamed_upstream import Paced, PacedUpstream, text_pieces

ASK = [{"role": "user", "content": "Hello?"}]
BODIES: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {"model": "gw", "messages": ASK, "stream": True},
    "/v1/responses": {"model": "gw", "input": "Hello?", "stream": True},
    "/v1/messages": {"model": "gw", "max_tokens": 50, "messages": ASK, "stream": True},
}
KEEPALIVE = {
    "/v1/chat/completions": ": keep-alive",
    "/v1/responses": ": keep-alive",
    "/v1/messages": "event: ping",
}
#: The line that carries the reply's first text, per API.
TEXT = {
    "/v1/chat/completions": '"content":"Hel',
    "/v1/responses": "response.output_text.delta",
    "/v1/messages": "text_delta",
}


@pytest.fixture
def upstream() -> Iterator[PacedUpstream]:
    with PacedUpstream() as up:
        yield up


@pytest.fixture
def gateway(upstream: PacedUpstream) -> Iterator[str]:
    backend = OpenAIBackend("m", base_url=upstream.base_url, memory=ModelMemory())
    app = create_app(backend, model_name="gw", keepalive_every=1.0, first_event_wait=0.5)
    with ServedApp(app) as served:
        yield served.url


def _lines(gateway: str, path: str) -> tuple[int, float, list[tuple[float, str]]]:
    """The status, when it came, and every line of the raw stream with its time."""
    with httpx.stream("POST", gateway + path, json=BODIES[path], timeout=30) as r:
        began = time.monotonic()
        lines = [(time.monotonic(), line) for line in r.iter_lines() if line]
        return r.status_code, began, lines


@pytest.mark.parametrize("path", list(BODIES))
def test_the_status_and_keepalives_come_before_the_first_token(
    upstream: PacedUpstream, gateway: str, path: str
) -> None:
    reply = upstream.add(Paced(text_pieces("Hello there.", 3), wait=3.0, every=0.05))
    status, began, lines = _lines(gateway, path)
    assert status == 200
    first_text = next(t for t, line in lines if TEXT[path] in line)
    assert began < reply.sent[0] and first_text >= reply.sent[0]
    before = [t for t, line in lines if line.startswith(KEEPALIVE[path]) and t < first_text]
    assert len(before) >= 2, lines  # three silent seconds, a keep-alive each second
    assert began < before[0] < reply.sent[0]


@pytest.mark.parametrize("path", list(BODIES))
def test_keepalives_fill_a_long_silence_mid_stream(
    upstream: PacedUpstream, gateway: str, path: str
) -> None:
    reply = upstream.add(Paced([{"content": "Hel"}, {"content": "lo."}], every=2.5))
    status, _, lines = _lines(gateway, path)
    assert status == 200
    between = [
        line
        for t, line in lines
        if line.startswith(KEEPALIVE[path]) and reply.sent[0] < t < reply.sent[1]
    ]
    assert between, lines


def test_the_official_clients_skip_the_keepalives(upstream: PacedUpstream, gateway: str) -> None:
    client = OpenAI(base_url=gateway + "/v1", api_key="unused")
    upstream.add(Paced(text_pieces("Hello there.", 3), wait=2.2, every=0.05))
    chunks = client.chat.completions.create(model="gw", messages=ASK, stream=True)  # type: ignore[arg-type]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello there."
    upstream.add(Paced(text_pieces("Hello there.", 3), wait=2.2, every=0.05))
    with client.responses.stream(model="gw", input="Hello?") as stream:
        assert stream.get_final_response().output_text == "Hello there."
    upstream.add(Paced(text_pieces("Hello there.", 3), wait=2.2, every=0.05))
    claude = anthropic.Anthropic(base_url=gateway, api_key="unused")
    with claude.messages.stream(model="gw", max_tokens=50, messages=ASK) as messages:  # type: ignore[arg-type]
        assert messages.get_final_text() == "Hello there."


@pytest.mark.parametrize("path", list(BODIES))
def test_a_failure_known_quickly_gets_its_own_status(
    upstream: PacedUpstream, gateway: str, path: str
) -> None:
    upstream.add(Paced([], status=500))
    r = httpx.post(gateway + path, json=BODIES[path], timeout=30)
    assert r.status_code >= 400 and "text/event-stream" not in r.headers["content-type"]


#: The stream's own error event, per API.
FAILED = {
    "/v1/chat/completions": '"error"',
    "/v1/responses": "event: response.failed",
    "/v1/messages": "event: error",
}


@pytest.mark.parametrize("path", list(BODIES))
def test_a_failure_after_the_wait_is_the_streams_error_event(
    upstream: PacedUpstream, gateway: str, path: str
) -> None:
    upstream.add(Paced([], status=500, wait=1.8))
    status, _, lines = _lines(gateway, path)
    assert status == 200
    assert any(line.startswith(KEEPALIVE[path]) for _, line in lines)
    assert any(FAILED[path] in line for _, line in lines), lines
    assert not any("Traceback" in line for _, line in lines)
