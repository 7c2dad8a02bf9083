"""A model's name a client sends never becomes a metric label: the labels of ``/metrics``
are the names the gateway was configured with, every other name is ``other`` — in one
process's registry and in the files ``--workers`` share alike. Over real HTTP, before an
upstream that takes any name (one the gateway passes every client's model to).
"""

from __future__ import annotations

import secrets
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from toolwire.backends import OpenAIBackend
from toolwire.backends.factory import BackendSpec
from toolwire.server import create_app
from toolwire.server.config import ModelEntry, Models
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas

from .gateway_process import gateway, slow_upstream


def _names(n: int, size: int) -> list[str]:
    """``n`` model names no configuration has, each ``size`` characters long."""
    return [f"rand-{secrets.token_hex(size // 2)}"[:size] for _ in range(n)]


def _model_labels(text: str) -> set[str]:
    return {
        s.labels["model"]
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if "model" in s.labels
    }


def test_client_model_names_are_counted_as_other(tmp_path: Path) -> None:
    with FakeOpenAIServer() as upstream:
        spec = BackendSpec("openai", base_url=upstream.base_url)
        models = Models(
            [ModelEntry("gw", spec)],
            lambda entry: OpenAIBackend(entry.spec.model or "gw", base_url=upstream.base_url),
            passed=ModelEntry("passed", spec),
        )
        names = _names(80, 4000)
        with ServedApp(create_app(models)) as served:
            for name in ["gw", *names]:
                upstream.add_stream(text_deltas("Hello."))
                ask = {"model": name, "messages": [{"role": "user", "content": "hi"}]}
                r = httpx.post(served.url + "/v1/chat/completions", json=ask, timeout=10)
                assert r.status_code == 200, r.text
                assert r.json()["model"] == name  # the reply names it: only the labels do not
            text = httpx.get(served.url + "/metrics", timeout=10).text
    assert not any(name in text for name in names)
    assert _model_labels(text) == {"gw", "other"}
    assert 'toolwire_requests_total{api="chat",model="other",status="200"} 80.0' in text
    assert 'toolwire_requests_total{api="chat",model="gw",status="200"} 1.0' in text
    assert len(text) < 20_000  # the same few series, however many names were sent


def test_workers_keep_no_series_of_a_clients_name(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    names = _names(24, 2000)
    # no --upstream-model: every client's name is passed to the upstream
    args = ("--workers", "2")
    with (
        slow_upstream(["hello"], 0.0) as (_, base),
        gateway(tmp_path, "--upstream", base, *args, TMPDIR=str(scratch)) as gw,
    ):
        for name in names:  # a connection each: the kernel hands them to either worker
            with httpx.Client(timeout=30) as client:
                ask = {"model": name, "messages": [{"role": "user", "content": "hi"}]}
                r = client.post(gw.root + "/v1/chat/completions", json=ask)
                assert r.status_code == 200, r.text
        (shared,) = scratch.iterdir()  # every worker's values, in files
        kept = b"".join(f.read_bytes() for f in shared.rglob("*") if f.is_file())
        text = httpx.get(gw.root + "/metrics", timeout=30).text
        gw.stop()
        assert gw.proc.wait(30) == 0, gw.stderr()
    assert not any(name.encode() in kept for name in names)
    assert not any(name in text for name in names)
    assert 'toolwire_requests_total{api="chat",model="other",status="200"} 24.0' in text
