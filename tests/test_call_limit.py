"""A reply passes on at most ``Request.max_calls`` calls (128 by default), whatever the
upstream writes: past them the reply is closed and ends in the calls passed on, named once
(``calls-past-limit``) — through the gateway with the official client, whole and streamed, for
native calls and for a family's text calls."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from openai import OpenAI

from toolwire.backends import OpenAIBackend
from toolwire.errors import UsageError
from toolwire.events import CallEnd, Done, Event, Notice
from toolwire.pipeline import ModelMemory, Request
from toolwire.pipeline.limits import DEFAULT_MAX_CALLS
from toolwire.server import create_app
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas, tool_call_deltas

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def native(n: int) -> list[dict[str, Any]]:
    calls = [(f"call_{i}", "get_weather", json.dumps({"city": f"c{i}"})) for i in range(n)]
    return tool_call_deltas(calls, size=500)


def hermes(n: int) -> str:
    return "".join(
        "<tool_call>\n"
        + json.dumps({"name": "get_weather", "arguments": {"city": f"c{i}"}})
        + "\n</tool_call>\n"
        for i in range(n)
    )


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


async def _events(backend: OpenAIBackend, request: Request) -> list[Event]:
    return [e async for e in backend.stream(request)]


@pytest.mark.parametrize("limit", [1, 3, 50])
def test_the_library_passes_on_max_calls_and_names_the_rest(
    server: FakeOpenAIServer, limit: int
) -> None:
    server.add_stream(native(60), finish_reason="tool_calls")
    backend = OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory())
    request = Request([{"role": "user", "content": "x"}], [TOOL], max_calls=limit)
    events = asyncio.run(_events(backend, request))
    ends = [e for e in events if isinstance(e, CallEnd)]
    assert [e.call.arguments for e in ends] == [{"city": f"c{i}"} for i in range(limit)]
    notices = [e for e in events if isinstance(e, Notice) and e.code == "calls-past-limit"]
    assert len(notices) == 1 and f"closed after the first {limit}" in notices[0].message
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "tool_calls"


def test_under_the_limit_nothing_is_said(server: FakeOpenAIServer) -> None:
    server.add_stream(native(5), finish_reason="tool_calls")
    backend = OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory())
    events = asyncio.run(_events(backend, Request([{"role": "user", "content": "x"}], [TOOL])))
    assert len([e for e in events if isinstance(e, CallEnd)]) == 5
    assert not [e for e in events if isinstance(e, Notice)]


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "3"])
def test_max_calls_is_a_whole_number_of_at_least_one(bad: Any) -> None:
    with pytest.raises(UsageError, match="max_calls"):
        Request([{"role": "user", "content": "x"}], [TOOL], max_calls=bad)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("form", ["native", "hermes"])
def test_the_gateway_passes_on_at_most_the_default(
    server: FakeOpenAIServer, stream: bool, form: str
) -> None:
    n = DEFAULT_MAX_CALLS + 72
    if form == "native":
        server.add_stream(native(n), finish_reason="tool_calls")
    else:
        server.add_stream(text_deltas(hermes(n), size=2000))
    backend: Any = OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory())
    if form == "hermes":
        inner = backend

        class _Hermes:
            name = inner.name

            def stream(self, request: Request) -> Any:
                from dataclasses import replace

                return inner.stream(replace(request, tool_format="hermes"))

        backend = _Hermes()
    with ServedApp(create_app(backend, model_name="gw")) as served:
        client = OpenAI(base_url=served.url + "/v1", api_key="x", max_retries=0)
        ask: dict[str, Any] = {
            "model": "gw",
            "messages": [{"role": "user", "content": "Weather everywhere?"}],
            "tools": [TOOL],
        }
        if stream:
            calls: dict[int, str] = {}
            finish = None
            for chunk in client.chat.completions.create(stream=True, **ask):
                for choice in chunk.choices:
                    for call in choice.delta.tool_calls or []:
                        calls[call.index] = calls.get(call.index, "") + (
                            call.function.arguments or "" if call.function else ""
                        )
                    finish = choice.finish_reason or finish
            got = [json.loads(calls[i]) for i in sorted(calls)]
        else:
            reply = client.chat.completions.create(**ask)
            finish = reply.choices[0].finish_reason
            message = reply.choices[0].message
            got = [json.loads(c.function.arguments) for c in message.tool_calls or []]  # type: ignore[union-attr]
            notices = (reply.model_extra or {})["toolwire"]["notices"]
            assert [x["code"] for x in notices] == ["calls-past-limit"]
    assert got == [{"city": f"c{i}"} for i in range(DEFAULT_MAX_CALLS)]
    assert finish == "tool_calls"
