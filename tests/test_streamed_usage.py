"""The engine's usage, rendered in every streamed API as its official client reads it.

A fake upstream over real HTTP ends its stream with a usage chunk; the gateway renders what
the engine reported: Chat Completions' usage chunk (``choices: []``) when the request asks
with ``stream_options.include_usage``, ``usage: null`` on the other chunks; Messages'
``message_start`` estimate and ``message_delta`` figures; Responses' ``response.completed``
usage. Prompt tokens the engine read from its cache are said where each API has a field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import httpx
import pytest
from openai import OpenAI

from toolwire.backends import OpenAIBackend
from toolwire.pipeline import ModelMemory
from toolwire.server import create_app
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas

ASK = [{"role": "user", "content": "Hello?"}]
USAGE = {"prompt_tokens": 120, "completion_tokens": 7}
CACHED = {**USAGE, "cached_tokens": 100}


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def gateway(upstream: FakeOpenAIServer) -> Iterator[str]:
    backend = OpenAIBackend("m", base_url=upstream.base_url, memory=ModelMemory())
    with ServedApp(create_app(backend, model_name="gw")) as served:
        yield served.url


def test_chat_completions_sends_the_usage_chunk_when_asked(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    client = OpenAI(base_url=gateway + "/v1", api_key="unused")
    upstream.add_stream(text_deltas("Hi there."), usage=USAGE)
    chunks = list(
        client.chat.completions.create(
            model="gw",
            messages=ASK,
            stream=True,
            stream_options={"include_usage": True},  # type: ignore[arg-type]
        )
    )
    (last,) = [c for c in chunks if c.usage is not None]
    assert last.choices == [] and last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (120, 7)
    assert last.usage.total_tokens == 127
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hi there."
    # every other chunk says usage null, as OpenAI's do; without the option, no usage at all
    upstream.add_stream(text_deltas("Hi there."), usage=USAGE)
    body = {
        "model": "gw",
        "messages": ASK,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    data = _data(gateway + "/v1/chat/completions", body)
    assert all("usage" in d for d in data)
    assert [d["usage"] for d in data if d["usage"] is not None] == [
        {"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127}
    ]
    upstream.add_stream(text_deltas("Hi there."), usage=USAGE)
    plain = _data(gateway + "/v1/chat/completions", {**body, "stream_options": None})
    assert not any("usage" in d for d in plain)


def test_cached_prompt_tokens_are_said_where_the_api_has_a_field(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(text_deltas("Hi."), usage=CACHED)
    body = {
        "model": "gw",
        "messages": ASK,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    (usage,) = [d["usage"] for d in _data(gateway + "/v1/chat/completions", body) if d["usage"]]
    assert usage["prompt_tokens_details"] == {"cached_tokens": 100}
    upstream.add_stream(text_deltas("Hi."), usage=CACHED)
    claude = anthropic.Anthropic(base_url=gateway, api_key="unused")
    with claude.messages.stream(model="gw", max_tokens=50, messages=ASK) as stream:  # type: ignore[arg-type]
        final = stream.get_final_message()
    assert (final.usage.input_tokens, final.usage.cache_read_input_tokens) == (20, 100)
    upstream.add_stream(text_deltas("Hi."), usage=CACHED)
    client = OpenAI(base_url=gateway + "/v1", api_key="unused")
    with client.responses.stream(model="gw", input="Hello?") as responses:
        done = responses.get_final_response()
    assert done.usage is not None and done.usage.input_tokens_details.cached_tokens == 100


def test_messages_streams_the_usage_claude_code_reads(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(text_deltas("Hi there."), usage=USAGE)
    claude = anthropic.Anthropic(base_url=gateway, api_key="unused")
    with claude.messages.stream(model="gw", max_tokens=50, messages=ASK) as stream:  # type: ignore[arg-type]
        events = list(stream)
        final = stream.get_final_message()
    (start,) = [e for e in events if e.type == "message_start"]
    assert start.message.usage.input_tokens > 0  # an estimate, before the engine counted
    (delta,) = [e for e in events if e.type == "message_delta"]
    assert (delta.usage.input_tokens, delta.usage.output_tokens) == (120, 7)
    assert (final.usage.input_tokens, final.usage.output_tokens) == (120, 7)


def test_responses_streams_the_usage(upstream: FakeOpenAIServer, gateway: str) -> None:
    upstream.add_stream(text_deltas("Hi there."), usage=USAGE)
    client = OpenAI(base_url=gateway + "/v1", api_key="unused")
    with client.responses.stream(model="gw", input="Hello?") as stream:
        events = [e.type for e in stream]
        final = stream.get_final_response()
    assert events[-1] == "response.completed"
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (120, 7)
    assert final.usage.total_tokens == 127


def test_a_malformed_stream_options_is_refused_naming_it(gateway: str) -> None:
    body = {"model": "gw", "messages": ASK, "stream": True, "stream_options": "usage please"}
    r = httpx.post(gateway + "/v1/chat/completions", json=body, timeout=10)
    assert r.status_code == 400
    assert "stream_options" in (r.json()["error"]["param"] or r.json()["error"]["message"])


def _data(url: str, body: dict[str, object]) -> list[dict[str, object]]:
    """The JSON chunks of a raw stream (the notices' chunk left out: it is toolwire's)."""
    with httpx.stream("POST", url, json=body, timeout=10) as r:
        lines = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    chunks = [json.loads(line) for line in lines if line != "[DONE]"]
    return [c for c in chunks if "toolwire" not in c]
