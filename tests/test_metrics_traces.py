"""OpenTelemetry traces (the ``otel`` extra): a span per request, its turn's API, model,
status, calls and notices as attributes, and a child span for the upstream exchange —
read from the SDK's in-memory exporter, over real HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import toolwire
from toolwire.backends import OpenAIBackend
from toolwire.pipeline import ModelMemory
from toolwire.server import create_app
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas

sdk = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
ASK = {"model": "gw", "messages": [{"role": "user", "content": "Weather in Paris?"}]}
TAGGED = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


@pytest.fixture
def traced() -> Iterator[tuple[FakeOpenAIServer, str, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with FakeOpenAIServer() as upstream:
        backend = OpenAIBackend("up", base_url=upstream.base_url, memory=ModelMemory())
        app = create_app(backend, model_name="gw", tracer=provider.get_tracer("test"))
        with ServedApp(app) as served:
            yield upstream, served.url, exporter


def _finished(exporter: InMemorySpanExporter, count: int) -> dict[str, Any]:
    """The spans ended, by name, once ``count`` have (the upstream's ends as its stream is
    closed, which may be a moment after the client has the last byte)."""
    deadline = time.monotonic() + 5
    while len(exporter.get_finished_spans()) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return {span.name: span for span in exporter.get_finished_spans()}


def test_a_request_is_a_span_with_its_turn_and_a_child_for_the_upstream(
    traced: tuple[FakeOpenAIServer, str, InMemorySpanExporter],
) -> None:
    upstream, url, exporter = traced
    upstream.add_stream(text_deltas(TAGGED), usage={"prompt_tokens": 9, "completion_tokens": 4})
    body = {**ASK, "tools": TOOLS, "stream": True}
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=10) as r:
        assert r.status_code == 200
        assert [line for line in r.iter_lines() if line][-1] == "data: [DONE]"
    spans = _finished(exporter, 2)
    request = spans["POST /v1/chat/completions"]
    child = spans["upstream"]
    assert request.kind == SpanKind.SERVER and child.kind == SpanKind.CLIENT
    assert request.attributes is not None
    assert dict(request.attributes) == {
        "http.request.method": "POST",
        "url.path": "/v1/chat/completions",
        "http.route": "/v1/chat/completions",
        "http.response.status_code": 200,
        "toolwire.api": "chat",
        "toolwire.model": "gw",
        "toolwire.calls": 1,
        "toolwire.calls.way": "recovered",
        "toolwire.notices": ("recovered-tagged",),
        "gen_ai.usage.input_tokens": 9,
        "gen_ai.usage.output_tokens": 4,
    }
    assert child.parent is not None and child.parent.span_id == request.context.span_id
    assert child.context.trace_id == request.context.trace_id
    assert request.start_time <= child.start_time <= child.end_time <= request.end_time


def test_a_failed_upstream_marks_both_spans(
    traced: tuple[FakeOpenAIServer, str, InMemorySpanExporter],
) -> None:
    upstream, url, exporter = traced
    upstream.add_error(500, {"message": "internal"})
    assert httpx.post(url + "/v1/chat/completions", json=ASK, timeout=10).status_code == 502
    spans = _finished(exporter, 2)
    request, child = spans["POST /v1/chat/completions"], spans["upstream"]
    assert request.attributes is not None and child.attributes is not None
    assert request.attributes["http.response.status_code"] == 502
    assert request.attributes["error.type"] == child.attributes["error.type"] == "refused"
    assert request.status.status_code == child.status.status_code == StatusCode.ERROR


def test_without_traces_the_gateway_imports_no_opentelemetry(tmp_path: Path) -> None:
    # a whole request served, in a fresh process: not a module of OpenTelemetry is loaded
    script = tmp_path / "serve_once.py"
    script.write_text(
        "import sys\n"
        "from starlette.testclient import TestClient\n"
        "from toolwire.server import create_app\n"
        "from toolwire.testing import FakeOpenAIServer, text_deltas\n"
        "from toolwire.backends import OpenAIBackend\n"
        "with FakeOpenAIServer() as up:\n"
        "    up.add_stream(text_deltas('Hello.'))\n"
        "    app = create_app(OpenAIBackend('m', base_url=up.base_url))\n"
        "    ask = {'model': 'm', 'messages': [{'role': 'user', 'content': 'Hi'}]}\n"
        "    r = TestClient(app).post('/v1/chat/completions', json=ask)\n"
        "    assert r.status_code == 200, r.text\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(toolwire.__file__).parents[1])}
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
