"""``/metrics``: what the gateway did, in Prometheus's text format, over real HTTP.

The gateway stands before a fake upstream on loopback; each scrape is parsed with
``prometheus_client.parser``, as Prometheus reads it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from toolwire.backends import OpenAIBackend
from toolwire.pipeline import ModelMemory
from toolwire.server import create_app
from toolwire.server.metrics import Metrics
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
ASK = {"model": "gw", "messages": [{"role": "user", "content": "Weather in Paris?"}]}
TAGGED = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
USAGE = {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}


def scrape(url: str, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics``, by name and labels."""
    r = httpx.get(url + "/metrics", headers=headers, timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def gateway(upstream: FakeOpenAIServer) -> Iterator[str]:
    backend = OpenAIBackend("up", base_url=upstream.base_url, memory=ModelMemory())
    with ServedApp(create_app(backend, model_name="gw")) as served:
        yield served.url


def test_a_recovered_call_shows_by_code_and_model(upstream: FakeOpenAIServer, gateway: str) -> None:
    # a Hermes call written in the text of an engine with native tools: recovered-tagged
    upstream.add_stream(text_deltas(TAGGED), usage=USAGE)
    r = httpx.post(gateway + "/v1/chat/completions", json={**ASK, "tools": TOOLS}, timeout=10)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    # and streamed, through the Messages API with the official client
    upstream.add_stream(text_deltas(TAGGED), usage=USAGE)
    client = anthropic.Anthropic(base_url=gateway, api_key="none", max_retries=0)
    tool = {"name": "get_weather", "input_schema": TOOLS[0]["function"]["parameters"]}
    with client.messages.stream(
        model="gw",
        max_tokens=100,
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[tool],  # type: ignore[list-item]
    ) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["tool_use"]

    samples = scrape(gateway)
    assert value(samples, "toolwire_notices_total", code="recovered-tagged", model="gw") == 2
    assert value(samples, "toolwire_calls_total", model="gw", way="recovered") == 2
    assert value(samples, "toolwire_calls_total", model="gw", way="plain") == 0
    for api in ("chat", "messages"):
        assert value(samples, "toolwire_requests_total", api=api, model="gw", status="200") == 1
        assert value(samples, "toolwire_request_seconds_count", api=api, model="gw") == 1
    assert value(samples, "toolwire_tokens_total", kind="prompt", model="gw") == 24
    assert value(samples, "toolwire_tokens_total", kind="completion", model="gw") == 14


def test_a_plain_call_and_a_healed_one_are_told_apart(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    native = {
        "content": None,
        "tool_calls": [
            {
                "index": 0,
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            }
        ],
    }
    upstream.add_stream([native], finish_reason="tool_calls")
    r = httpx.post(gateway + "/v1/chat/completions", json={**ASK, "tools": TOOLS}, timeout=10)
    assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] == "tool_calls"
    # an engine that takes no tools: the turn is sent again with the tools in words
    upstream.add_error(400, {"message": "library/gemma:2b does not support tools"})
    upstream.add_stream(text_deltas("ok"))  # the gateway's probe, taken: this request only
    upstream.add_stream(text_deltas(TAGGED))
    r = httpx.post(gateway + "/v1/chat/completions", json={**ASK, "tools": TOOLS}, timeout=10)
    assert r.status_code == 200, r.text
    codes = [n["code"] for n in r.json()["toolwire"]["notices"]]
    assert "healed-tools" in codes

    samples = scrape(gateway)
    assert value(samples, "toolwire_calls_total", model="gw", way="plain") == 1
    assert value(samples, "toolwire_notices_total", code="healed-tools", model="gw") == 1
    way = "recovered" if any(c.startswith("recovered-") for c in codes) else "healed"
    assert value(samples, "toolwire_calls_total", model="gw", way=way) == 1


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_upstream_errors_are_counted_by_kind(upstream: FakeOpenAIServer, gateway: str) -> None:
    upstream.add_error(500, {"message": "boom at 10.0.0.7"})
    r = httpx.post(gateway + "/v1/chat/completions", json=ASK, timeout=10)
    assert r.status_code == 502
    # one that fails mid-stream, after the 200
    upstream.add_raw(['{"id": "x", "choices": [{"index": 0, "delta": {"content": "Hel"}}]}'])
    r = httpx.post(gateway + "/v1/chat/completions", json={**ASK, "stream": True}, timeout=10)
    assert r.status_code == 200
    # and one whose upstream cannot be reached
    away = OpenAIBackend("up", base_url=f"http://127.0.0.1:{_closed_port()}/v1")
    with ServedApp(create_app(away, model_name="gone")) as served:
        r = httpx.post(served.url + "/v1/chat/completions", json=ASK, timeout=10)
        assert r.status_code == 502
        other = scrape(served.url)
    samples = scrape(gateway)
    assert value(samples, "toolwire_upstream_errors_total", kind="refused", model="gw") == 1
    assert value(samples, "toolwire_upstream_errors_total", kind="unreadable", model="gw") == 1
    assert value(samples, "toolwire_requests_total", api="chat", model="gw", status="502") == 1
    assert value(other, "toolwire_upstream_errors_total", kind="unreachable", model="gone") == 1
    # two apps in one process keep their own counts
    assert value(other, "toolwire_upstream_errors_total", kind="refused", model="gw") == 0
    assert value(samples, "toolwire_upstream_errors_total", kind="unreachable", model="gone") == 0


def test_a_refused_request_is_counted_without_a_model(gateway: str) -> None:
    r = httpx.post(gateway + "/v1/responses", json={"model": "gw", "input": 3}, timeout=10)
    assert r.status_code == 400
    samples = scrape(gateway)
    assert value(samples, "toolwire_requests_total", api="responses", model="", status="400") == 1


def test_metrics_need_the_api_key_when_one_is_set(upstream: FakeOpenAIServer) -> None:
    backend = OpenAIBackend("up", base_url=upstream.base_url)
    with ServedApp(create_app(backend, model_name="gw", api_key="sesame")) as served:
        r = httpx.get(served.url + "/metrics", timeout=10)
        assert r.status_code == 401
        assert "toolwire_" not in r.text
        samples = scrape(served.url, authorization="Bearer sesame")
    assert value(samples, "toolwire_requests_total", api="metrics", model="", status="401") == 1


def test_a_metrics_object_handed_over_is_the_one_counted(upstream: FakeOpenAIServer) -> None:
    metrics = Metrics()
    backend = OpenAIBackend("up", base_url=upstream.base_url)
    with ServedApp(create_app(backend, model_name="gw", metrics=metrics)) as served:
        upstream.add_stream(text_deltas("Hello."))
        assert httpx.post(served.url + "/v1/chat/completions", json=ASK).status_code == 200
    text = metrics.exposition().decode()
    assert 'toolwire_requests_total{api="chat",model="gw",status="200"} 1.0' in text
