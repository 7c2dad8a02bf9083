"""What is the operator's stays the operator's, and says whose request it was: ``/metrics``
is read with an operator's key only (a key marked ``operator`` in the keys file, or the one
``--api-key``; anyone when the gateway has no keys); a stored response's GET and DELETE log
the name of the key as a POST does; a span is named by its route's template, never by an id
a request carries. Over real HTTP, before a fake upstream on loopback.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolwire.backends import OpenAIBackend
from toolwire.server import create_app
from toolwire.server.keys import Keys
from toolwire.store.responses_sqlite import SqliteResponseStore
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas

from .work_count import calls_made

KEYS = "alice sk-alice-1\nops sk-ops-22 operator\n"


def _bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def test_metrics_need_an_operators_key() -> None:
    keys = Keys.parse(KEYS, "the keys")
    assert keys.operators == {"ops"}
    with FakeOpenAIServer() as upstream:
        backend = OpenAIBackend("up", base_url=upstream.base_url)
        with ServedApp(create_app(backend, model_name="gw", keys=keys)) as gw:
            refused = httpx.get(gw.url + "/metrics", headers=_bearer("sk-alice-1"), timeout=10)
            assert refused.status_code == 403, refused.text
            assert "toolwire_" not in refused.text and "operator" in refused.text
            # alice's key still serves her everything else
            models = httpx.get(gw.url + "/v1/models", headers=_bearer("sk-alice-1"), timeout=10)
            assert models.status_code == 200
            assert httpx.get(gw.url + "/metrics", timeout=10).status_code == 401
            ops = httpx.get(gw.url + "/metrics", headers={"x-api-key": "sk-ops-22"}, timeout=10)
            assert ops.status_code == 200 and "toolwire_requests_total" in ops.text
        # one --api-key is the gateway's one key, its operator's; no keys: anyone, as before
        for app, headers in (
            (create_app(backend, model_name="gw", api_key="sk-one"), _bearer("sk-one")),
            (create_app(backend, model_name="gw"), {}),
        ):
            with ServedApp(app) as gw:
                r = httpx.get(gw.url + "/metrics", headers=headers, timeout=10)
                assert r.status_code == 200 and "toolwire_requests_total" in r.text


def test_an_operator_mark_is_read_from_a_keys_line() -> None:
    keys = Keys.parse("a:k1 operator\nb k2\nc  k3\toperator", "f")
    assert keys.operators == {"a", "c"} and keys.owner("Bearer k1") == "a"
    assert keys.owner("Bearer k3") == "c" and keys.owner("Bearer operator") is None
    # a key is one word: two words not ending in the mark are refused, as before
    with pytest.raises(Exception, match="line 2: the key of 'b'"):
        keys.parse("a k1\nb k2 extra", "f")


def _lines(records: list[logging.LogRecord]) -> list[dict[str, Any]]:
    return [r.toolwire_request for r in records if hasattr(r, "toolwire_request")]  # type: ignore[attr-defined]


def test_a_stored_responses_get_and_delete_log_the_keys_name(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolwire.access")
    keys = Keys.parse(KEYS, "the keys")
    store = SqliteResponseStore(tmp_path / "gateway.db")
    with FakeOpenAIServer() as upstream:
        backend = OpenAIBackend("up", base_url=upstream.base_url)
        with ServedApp(create_app(backend, model_name="gw", keys=keys, store=store)) as gw:
            alice = _bearer("sk-alice-1")
            upstream.add_stream(text_deltas("Hello."))
            made = httpx.post(
                gw.url + "/v1/responses", json={"model": "gw", "input": "Hi"}, headers=alice
            )
            assert made.status_code == 200, made.text
            rid = made.json()["id"]
            for method, path in (
                ("GET", f"/v1/responses/{rid}"),
                ("GET", f"/v1/responses/{rid}/input_items"),
                ("DELETE", f"/v1/responses/{rid}"),
            ):
                r = httpx.request(method, gw.url + path, headers=alice, timeout=10)
                assert r.status_code == 200, r.text
            assert httpx.get(gw.url + f"/v1/responses/{rid}", timeout=10).status_code == 401
            deadline = time.monotonic() + 5
            while len(_lines(caplog.records)) < 5 and time.monotonic() < deadline:
                time.sleep(0.02)
    lines = _lines(caplog.records)
    assert [(line["method"], line["status"]) for line in lines] == [
        ("POST", 200),
        ("GET", 200),
        ("GET", 200),
        ("DELETE", 200),
        ("GET", 401),
    ]
    assert [line.get("key") for line in lines] == ["alice"] * 4 + [None]


def test_a_span_is_named_by_its_route_never_by_an_id(tmp_path: Path) -> None:
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    store = SqliteResponseStore(tmp_path / "gateway.db")
    with FakeOpenAIServer() as upstream:
        backend = OpenAIBackend("up", base_url=upstream.base_url)
        app = create_app(backend, model_name="gw", store=store, tracer=provider.get_tracer("test"))
        with ServedApp(app) as gw:
            upstream.add_stream(text_deltas("Hello."))
            rid = httpx.post(gw.url + "/v1/responses", json={"model": "gw", "input": "Hi"}).json()[
                "id"
            ]
            assert httpx.get(gw.url + f"/v1/responses/{rid}").status_code == 200
            assert httpx.get(gw.url + f"/v1/responses/{rid}/input_items").status_code == 200
            assert httpx.delete(gw.url + f"/v1/responses/{rid}").status_code == 200
            assert httpx.get(gw.url + f"/v1/responses/{rid}").status_code == 404
            assert httpx.get(gw.url + "/v1/responses/v1").status_code == 404
            assert httpx.get(gw.url + f"/no/such/{rid}").status_code == 404
            deadline = time.monotonic() + 5
            while len(exporter.get_finished_spans()) < 8 and time.monotonic() < deadline:
                time.sleep(0.02)
    servers = [s for s in exporter.get_finished_spans() if s.name != "upstream"]
    assert [s.name for s in servers] == [
        "POST /v1/responses",
        "GET /v1/responses/{rid}",
        "GET /v1/responses/{rid}/input_items",
        "DELETE /v1/responses/{rid}",
        "GET /v1/responses/{rid}",
        "GET /v1/responses/{rid}",  # an id that is also a segment of the path
        "GET",  # no route: the method alone, never the client's path
    ]
    for span in servers:
        assert span.attributes is not None
        assert rid not in span.name
        assert span.attributes.get("http.route", "") == span.name.partition(" ")[2]
    assert servers[1].attributes is not None
    assert servers[1].attributes["url.path"] == f"/v1/responses/{rid}"  # an id: an attribute


def test_ten_thousand_keys_load_and_are_found_fast(tmp_path: Path) -> None:
    # reading and joining keys is linear: each name and key looked up in a set, not in the
    # keys read so far (which took tens of seconds for 10,000). Counted, not timed (see
    # tests/work_count.py): twice the keys, about twice the calls; quadratic, four times.
    def loaded(n: int) -> tuple[Keys, dict[str, str], int]:
        path = tmp_path / f"keys{n}"
        secret = {f"k{i}": f"sk-{i:05d}-{'x' * 40}" for i in range(n)}
        path.write_text("".join(f"{name} {key}\n" for name, key in secret.items()))
        keys, calls = calls_made(
            lambda: Keys.joined([Keys.given(None, str(path), {}), Keys.single("sk-admin", "admin")])
        )
        return keys, secret, calls

    loaded(100)  # warm: what is made once is not the keys' cost
    _, _, small = loaded(5_000)
    keys, secret, large = loaded(10_000)
    assert large < 2.5 * small, (small, large)
    assert len(keys.names()) == 10_001 and keys.operators == {"admin"}
    for name in ("k0", "k4999", "k9999"):
        assert keys.owner(f"Bearer {secret[name]}") == name
    assert keys.owner("Bearer sk-00001-" + "x" * 39) is None
    with pytest.raises(Exception, match="'again' is also given under another name"):
        Keys.joined([keys, Keys.single(secret["k7"], "again")])
    with pytest.raises(Exception, match="the key name 'k7' is given twice"):
        Keys.joined([keys, Keys.single("sk-new", "k7")])
