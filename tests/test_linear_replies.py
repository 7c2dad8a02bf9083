"""A reply of many calls costs work linear in its calls: each per-reply step (the repeated
call check above all, which compared each call with every earlier one) looks a call up
rather than comparing it with the others. Counted, not timed (a busy machine stretches a
time; see :mod:`tests.work_count`): the function calls reading a reply of 5,000 calls makes
against one of 2,500, over real HTTP from a fake OpenAI-compatible upstream on 127.0.0.1 —
native ``tool_calls`` deltas, and Hermes ``<tool_call>`` blocks in the text. Linear is about
2x; quadratic about 4x. And while such a reply is read through the gateway, ``/health``
still answers."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.events import CallEnd, Event, Notice
from toolwire.pipeline import ModelMemory, Request
from toolwire.pipeline.limits import DEFAULT_MAX_CALLS
from toolwire.server import create_app
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas, tool_call_deltas

from .work_count import calls_made

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
SMALL, LARGE = 2_500, 5_000


def arguments(i: int) -> dict[str, Any]:
    """Each call of one tool, each with its own arguments: every one is a candidate repeat
    of every earlier one until its arguments part from theirs."""
    return {"city": f"city {i}", "days": i}


def native(n: int) -> list[dict[str, Any]]:
    calls = [(f"call_{i}", "get_weather", json.dumps(arguments(i))) for i in range(n)]
    return tool_call_deltas(calls, size=1000)


def hermes(n: int) -> list[dict[str, Any]]:
    blocks = "".join(
        "<tool_call>\n"
        + json.dumps({"name": "get_weather", "arguments": arguments(i)})
        + "\n</tool_call>\n"
        for i in range(n)
    )
    return text_deltas(blocks, size=4000)


async def _collect(backend: OpenAIBackend, request: Request) -> list[Event]:
    return [event async for event in backend.stream(request)]


def read_reply(
    server: FakeOpenAIServer, deltas: list[dict[str, Any]], family: str | None
) -> tuple[list[Event], int]:
    """The events of reading ``deltas`` as a reply, and the function calls this thread (the
    backend's, its pipeline's, its HTTP client's) made reading them."""
    backend = OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory())
    server.add_stream(deltas, finish_reason="tool_calls" if family is None else "stop")
    request = Request(
        [{"role": "user", "content": "Weather everywhere?"}],
        [TOOL],
        parallel_calls=True,
        tool_format=family,
        max_calls=None,  # every call passed on: the steps after the reader are measured too
    )
    return calls_made(lambda: asyncio.run(_collect(backend, request)))


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.mark.parametrize(
    ("family", "make"), [(None, native), ("hermes", hermes)], ids=["native", "hermes"]
)
def test_a_reply_of_twice_the_calls_takes_about_twice_the_work(
    family: str | None, make: Any, server: FakeOpenAIServer
) -> None:
    read_reply(server, make(20), family)  # warm: what is made once is not the reply's cost
    work: dict[int, int] = {}
    for n in (SMALL, LARGE):
        events, work[n] = read_reply(server, make(n), family)
        ends = [e for e in events if isinstance(e, CallEnd)]
        assert [json.loads(e.arguments or "") for e in ends] == [arguments(i) for i in range(n)]
        assert not [e for e in events if isinstance(e, Notice) and e.code == "repeated-call"]
    ratio = work[LARGE] / work[SMALL]
    assert ratio < 2.5, f"{LARGE} calls made {ratio:.2f}x the calls of {SMALL}: {work}"


def test_the_gateway_answers_health_while_it_reads_a_reply_of_many_calls(
    server: FakeOpenAIServer,
) -> None:
    backend = OpenAIBackend("engine", base_url=server.base_url, client=new_client())
    server.add_stream(native(10_000), finish_reason="tool_calls")
    body = {
        "model": "gw",
        "messages": [{"role": "user", "content": "Weather everywhere?"}],
        "tools": [TOOL],
    }
    with ServedApp(create_app(backend, model_name="gw")) as served:
        reply: dict[str, Any] = {}

        def ask() -> None:
            got = httpx.post(served.url + "/v1/chat/completions", json=body, timeout=600)
            reply["status"], reply["body"] = got.status_code, got.json()

        asker = threading.Thread(target=ask)
        asker.start()
        slowest = 0.0
        checks = 0
        while asker.is_alive():
            start = time.perf_counter()
            health = httpx.get(served.url + "/health", timeout=10)
            slowest = max(slowest, time.perf_counter() - start)
            assert health.status_code == 200
            checks += 1
            time.sleep(0.05)
        asker.join()
    assert reply["status"] == 200
    calls = reply["body"]["choices"][0]["message"]["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        arguments(i) for i in range(DEFAULT_MAX_CALLS)
    ]
    codes = [n["code"] for n in reply["body"]["toolwire"]["notices"]]
    assert "calls-past-limit" in codes
    assert checks > 1
    assert slowest < 2.0, f"/health took {slowest:.2f} s while the reply was read"
