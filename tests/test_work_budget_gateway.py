"""Through the gateway, over real HTTP: a request sized to a check's weak spot costs its own
share and never holds the event loop — ``/health`` and every other client go on. The loop is
watched from inside the server (:mod:`tests.loop_lag`): no request may hold it 100 ms.

Before the work budget, each of these froze every client: 16,000 namespace tools (137 s),
a 1,200-character pattern against a 4,000-character argument (23 s), the same through
``response_format``, 1,000 fanned-out tools (28 s, ``count_tokens`` too), 128 calls against
such tools (424 s), one call of 3,000 objects under ``uniqueItems`` (17.6 s).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolwire.testing import FakeOpenAIServer, text_deltas, tool_call_deltas

from .work_attacks import BIG_PATTERN, fanout_schema, fanout_value, namespaces

#: The longest any one request may hold the gateway's event loop (seconds).
HELD = 0.1


class Gateway:
    """The gateway in a process of its own (see :mod:`tests.loop_lag`), before ``upstream``."""

    def __init__(self, url: str, upstream: FakeOpenAIServer) -> None:
        self.url, self.upstream = url, upstream

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        httpx.get(self.url + "/health", timeout=30)  # the watch is running
        httpx.get(self.url + "/_lag", timeout=30)  # from zero
        reply = httpx.post(self.url + path, json=body, timeout=120)
        held = httpx.get(self.url + "/_lag", timeout=30).json()["worst"]
        assert held < HELD, f"the event loop was held {held:.3f} s"
        assert reply.status_code < 500, reply.text[:500]
        return reply


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    with FakeOpenAIServer() as upstream:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.loop_lag",
                upstream.base_url,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=Path(__file__).parent.parent,
            text=True,
        )
        try:
            assert process.stdout is not None
            url = process.stdout.readline().strip()
            assert url.startswith("http://"), "the gateway did not start"
            yield Gateway(url, upstream)
        finally:
            assert process.stdin is not None
            process.stdin.close()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def _tool(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": schema}}


def _notices(reply: httpx.Response) -> list[str]:
    return [n["code"] for n in reply.json()["toolwire"]["notices"]]


def test_sixteen_thousand_namespaces_hold_no_one(gateway: Gateway) -> None:
    gateway.upstream.add_stream(text_deltas("fine"))
    reply = gateway.post(
        "/v1/responses", {"model": "gw", "input": "hi", "tools": namespaces(16_000)}
    )
    assert reply.status_code == 200
    sent = gateway.upstream.requests[-1]["tools"]
    names = {t["function"]["name"] for t in sent}
    assert len(names) == 16_000


def test_a_big_pattern_against_a_long_argument_holds_no_one(gateway: Gateway) -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": BIG_PATTERN}}}
    arguments = json.dumps({"s": "a" * 4_000 + "!"})
    gateway.upstream.add_stream(
        tool_call_deltas([("c1", "t", arguments)], size=256), finish_reason="tool_calls"
    )
    body = {
        "model": "gw",
        "messages": [{"role": "user", "content": "go"}],
        "tools": [_tool("t", schema)],
    }
    reply = gateway.post("/v1/chat/completions", body)
    assert reply.status_code == 200
    (call,) = reply.json()["choices"][0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"s": "a" * 4_000 + "!"}
    assert "pattern-not-checked" in _notices(reply)


def test_a_pattern_in_a_structured_output_holds_no_one(gateway: Gateway) -> None:
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "pattern": "(a{0,30}b?){0,30}(a{0,30}b?){0,30}x"}},
    }
    gateway.upstream.add_stream(text_deltas(json.dumps({"s": "a" * 40_000}), size=512))
    body = {
        "model": "gw",
        "messages": [{"role": "user", "content": "go"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": schema}},
    }
    reply = gateway.post("/v1/chat/completions", body)
    assert reply.status_code == 200
    assert "check-skipped" in _notices(reply)  # 40,000 characters of 4,000 instructions


def test_a_thousand_fanned_out_tools_hold_no_one(gateway: Gateway) -> None:
    tools = [_tool(f"t{i}", fanout_schema(i)) for i in range(1_000)]
    assert len(json.dumps(tools)) > 1_000_000
    gateway.upstream.add_stream(text_deltas("fine"))
    body = {"model": "gw", "messages": [{"role": "user", "content": "go"}], "tools": tools}
    assert gateway.post("/v1/chat/completions", body).status_code == 200
    counted = {
        "model": "gw",
        "messages": [{"role": "user", "content": "go"}],
        "tools": [
            {"name": f"u{i}", "input_schema": fanout_schema(10_000 + i)} for i in range(1_000)
        ],
    }
    reply = gateway.post("/v1/messages/count_tokens", counted)
    assert reply.status_code == 200 and reply.json()["input_tokens"] > 0


def test_128_calls_against_fanned_out_tools_hold_no_one(gateway: Gateway) -> None:
    tools = [_tool(f"f{i}", fanout_schema(20_000 + i)) for i in range(128)]
    arguments = json.dumps(fanout_value())
    calls = [(f"c{i}", f"f{i}", arguments) for i in range(128)]
    gateway.upstream.add_stream(tool_call_deltas(calls, size=64), finish_reason="tool_calls")
    body = {"model": "gw", "messages": [{"role": "user", "content": "go"}], "tools": tools}
    reply = gateway.post("/v1/chat/completions", body)
    assert reply.status_code == 200
    assert len(reply.json()["choices"][0]["message"]["tool_calls"]) == 128
    codes = _notices(reply)
    assert "check-skipped" in codes  # past the budget, said so: never a frozen gateway


def test_unique_items_over_three_thousand_objects_holds_no_one(gateway: Gateway) -> None:
    schema = {
        "type": "object",
        "properties": {"xs": {"type": "array", "uniqueItems": True, "items": {"type": "object"}}},
    }
    rows = [{"k": i} for i in range(3_000)]
    gateway.upstream.add_stream(
        tool_call_deltas([("c1", "t", json.dumps({"xs": rows}))], size=512),
        finish_reason="tool_calls",
    )
    body = {
        "model": "gw",
        "messages": [{"role": "user", "content": "go"}],
        "tools": [_tool("t", schema)],
    }
    reply = gateway.post("/v1/chat/completions", body)
    assert reply.status_code == 200
    (call,) = reply.json()["choices"][0]["message"]["tool_calls"]
    assert len(json.loads(call["function"]["arguments"])["xs"]) == 3_000


@pytest.mark.parametrize(
    "path,body",
    [
        (
            "/v1/chat/completions",
            {
                "model": "gw",
                "messages": [{"role": "user", "content": "x"}],
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "o", "schema": {"$ref": "#"}},
                },
            },
        ),
        (
            "/v1/responses",
            {
                "model": "gw",
                "input": "x",
                "text": {
                    "format": {
                        "type": "json_schema",
                        "name": "o",
                        "schema": {"allOf": [{"$ref": "#"}]},
                    }
                },
            },
        ),
        (
            "/v1/messages",
            {
                "model": "gw",
                "max_tokens": 10,
                "messages": [{"role": "user", "content": "x"}],
                "output_config": {"format": {"type": "json_schema", "schema": {"$ref": "#"}}},
            },
        ),
        (
            "/v1/chat/completions",
            {
                "model": "gw",
                "messages": [{"role": "user", "content": "x"}],
                "tools": [_tool("t", {"type": "object", "allOf": [{"$ref": "#"}]})],
            },
        ),
    ],
)
def test_a_reference_loop_is_a_400_naming_the_field(
    gateway: Gateway, path: str, body: dict[str, Any]
) -> None:
    reply = gateway.post(path, body)
    assert reply.status_code == 400, reply.text
    text = reply.text
    assert "loop back to the same value" in text and "Traceback" not in text
    assert any(f in text for f in ("response_format", "text.format", "output_config", "tools[0]"))


def test_tools_past_the_budget_are_a_400_naming_what_was_too_costly(gateway: Gateway) -> None:
    # one small request, many distinct patterns near the program bound: compiling them all
    # would cost more than a request of this size may
    tools = [
        _tool(
            f"p{i}",
            {
                "type": "object",
                "properties": {
                    "s": {"type": "string", "pattern": f"[a-z]{{1,1000}}[a-z]{{1,900}}{i}"}
                },
            },
        )
        for i in range(40)
    ]
    body = {"model": "gw", "messages": [{"role": "user", "content": "x"}], "tools": tools}
    reply = gateway.post("/v1/chat/completions", body)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert "past this request's budget" in error["message"]
    assert error["param"].startswith("tools[") and error["param"] in error["message"]


# -- requests sized near every limit, drawn at random


_KINDS = st.sampled_from(["namespaces", "pattern", "fanout", "unique", "calls", "body"])


def _drawn(kind: str, size: float) -> tuple[str, dict[str, Any], list[Any]]:
    """A request of ``kind`` at ``size`` (0–1) of its attack's full size, and the replies
    the upstream is to give."""
    user = [{"role": "user", "content": "go"}]
    if kind == "namespaces":
        return (
            "/v1/responses",
            {"model": "gw", "input": "hi", "tools": namespaces(int(16_000 * size) + 1)},
            [text_deltas("ok")],
        )
    if kind == "pattern":
        pattern = "(?:a{0,30}b?){0,30}" * max(1, int(63 * size)) + "$"
        schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}
        args = json.dumps({"s": "a" * int(40_000 * size) + "!"})
        return (
            "/v1/chat/completions",
            {"model": "gw", "messages": user, "tools": [_tool("t", schema)]},
            [tool_call_deltas([("c", "t", args)], size=1024)],
        )
    if kind == "fanout":
        n = max(1, int(1_000 * size))
        return (
            "/v1/chat/completions",
            {
                "model": "gw",
                "messages": user,
                "tools": [_tool(f"t{i}", fanout_schema(i + 50_000)) for i in range(n)],
            },
            [tool_call_deltas([("c", "t0", json.dumps(fanout_value()))])],
        )
    if kind == "unique":
        rows = [{"k": i % 7, "j": i} for i in range(int(6_000 * size) + 1)]
        schema = {"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True}}}
        return (
            "/v1/chat/completions",
            {"model": "gw", "messages": user, "tools": [_tool("t", schema)]},
            [tool_call_deltas([("c", "t", json.dumps({"xs": rows}))], size=2048)],
        )
    if kind == "calls":
        n = max(1, int(128 * size))
        schema = {
            "type": "object",
            "properties": {"s": {"type": "string", "pattern": "^(a|b){0,40}c$"}},
        }
        calls = [(f"c{i}", "t", json.dumps({"s": "ab" * 2_000})) for i in range(n)]
        return (
            "/v1/chat/completions",
            {"model": "gw", "messages": user, "tools": [_tool("t", schema)]},
            [tool_call_deltas(calls, size=1024)],
        )
    text = "x" * int(7_000_000 * size)
    return (
        "/v1/chat/completions",
        {"model": "gw", "messages": [{"role": "user", "content": text}]},
        [text_deltas("ok")],
    )


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(kind=_KINDS, size=st.floats(min_value=0.5, max_value=1.0))
def test_no_request_near_a_limit_holds_the_event_loop(
    gateway: Gateway, kind: str, size: float
) -> None:
    path, body, replies = _drawn(kind, size)
    gateway.upstream._replies.clear()
    for deltas in replies:
        finish = "tool_calls" if any("tool_calls" in d for d in deltas) else "stop"
        gateway.upstream.add_stream(deltas, finish_reason=finish)
    reply = gateway.post(path, body)
    assert reply.status_code in (200, 400), reply.text[:300]
