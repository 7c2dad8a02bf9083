"""What an operator of ``toolwire serve`` reads: JSON logs (``--log-format json``), traces
(``--traces`` or ``$OTEL_EXPORTER_OTLP_ENDPOINT``) and ``/metrics`` across ``--workers N``.

Each runs the real command in a process of its own before an upstream over real HTTP, and
reads what an operator would: its stderr line by line, its stdout, its scrapes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from toolwire.cli.serve import LOG_FORMATS
from toolwire.server.logs import FORMATS
from toolwire.server.metrics import MULTIPROC_DIR, shared_values
from toolwire.server.tracing import traces_wanted

from .gateway_process import gateway, serve_env, slow_upstream

SECRET = "sk-very-secret-0123456789"
PROMPT = "the-prompt-nobody-logs-7f3a"


def _lines(text: str) -> list[dict[str, Any]]:
    """Every line of stderr as JSON (a line that is not JSON fails the test)."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_json_logs_are_one_object_a_line_naming_the_key_never_showing_it(
    tmp_path: Path,
) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"alice {SECRET}\n")
    with slow_upstream(["hello"], 0.0) as (_, base):
        args = ("--upstream", base, "--upstream-model", "m", "--api-keys", str(keys))
        with gateway(tmp_path, *args, "--log-format", "json") as served:
            client = openai.OpenAI(base_url=served.root + "/v1", api_key=SECRET, max_retries=0)
            reply = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": PROMPT}]
            )
            assert reply.choices[0].message.content == "hello"
            bad = httpx.post(served.root + "/v1/chat/completions", json={"messages": 3})
            assert bad.status_code == 401
            served.stop()
            assert served.proc.wait(30) == 0
            text = served.stderr()
    assert SECRET not in text and PROMPT not in text
    lines = _lines(text)
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    chat = [line for line in lines if line.get("path") == "/v1/chat/completions"]
    assert len(chat) == 2, lines
    ok, refused = chat
    assert ok["method"] == "POST" and ok["status"] == 200 and ok["api"] == "chat"
    assert ok["model"] == "m" and ok["key"] == "alice"
    assert isinstance(ok["duration_ms"], float) and ok["duration_ms"] > 0
    assert refused["status"] == 401 and "key" not in refused
    said = [line["message"] for line in lines]
    assert any("serving at http://127.0.0.1:" in m for m in said), said
    assert any(m == "toolwire: stopped" for m in said), said
    assert any(line["logger"].startswith("uvicorn") for line in lines), said


def test_the_text_format_logs_no_request(tmp_path: Path) -> None:
    with (
        slow_upstream(["hello"], 0.0) as (_, base),
        gateway(tmp_path, "--upstream", base, "--upstream-model", "m") as served,
    ):
        client = openai.OpenAI(base_url=served.root + "/v1", api_key="x", max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": PROMPT}])
        served.stop()
        assert served.proc.wait(30) == 0
    text = served.stderr()
    assert "toolwire: serving at" in text and PROMPT not in text
    assert "/v1/chat/completions" not in text


def test_the_log_formats_of_the_flag_are_the_formats_logs_knows() -> None:
    assert LOG_FORMATS == FORMATS


def test_traces_flag_exports_a_span_per_request(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk")
    with slow_upstream(["hello"], 0.0) as (_, base):
        args = ("--upstream", base, "--upstream-model", "m", "--traces")
        with gateway(tmp_path, *args, OTEL_TRACES_EXPORTER="console") as served:
            client = openai.OpenAI(base_url=served.root + "/v1", api_key="x", max_retries=0)
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            served.stop()
            assert served.proc.wait(30) == 0
    text = served.stderr()
    assert '"name": "POST /v1/chat/completions"' in text, text
    assert '"name": "upstream"' in text


def test_traces_need_the_extra_a_usage_error_at_start(tmp_path: Path) -> None:
    # the extra not installed: opentelemetry's modules cannot be imported
    code = (
        "import sys; sys.modules['opentelemetry'] = None; from toolwire.cli import main; "
        "sys.exit(main(['serve', '--upstream', 'http://127.0.0.1:9/v1', '--traces']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=serve_env(tmp_path), capture_output=True, timeout=60
    )
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "pip install 'toolwire[otel]'" in err and "Traceback" not in err


def test_an_otlp_endpoint_in_the_environment_turns_traces_on() -> None:
    pytest.importorskip("opentelemetry.sdk")
    assert traces_wanted(False, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert traces_wanted(False, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x:4318"})
    assert not traces_wanted(False, {})
    assert not traces_wanted(
        False, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318", "OTEL_SDK_DISABLED": "true"}
    )
    assert traces_wanted(True, {})


def test_one_process_needs_no_shared_directory_and_an_operators_is_kept(
    tmp_path: Path,
) -> None:
    environ: dict[str, str] = {}
    with shared_values(1, environ) as directory:
        assert directory is None and MULTIPROC_DIR not in environ
    own = {MULTIPROC_DIR: str(tmp_path)}
    with shared_values(4, own) as directory:
        assert directory == str(tmp_path)
    assert own == {MULTIPROC_DIR: str(tmp_path)} and tmp_path.is_dir()
    with shared_values(2, environ) as directory:
        assert directory is not None and Path(directory).is_dir()
        assert environ[MULTIPROC_DIR] == directory
    assert not Path(directory).exists() and MULTIPROC_DIR not in environ


REQUESTS = re.compile(r'^toolwire_requests_total\{api="chat",model="m",status="200"\} (\S+)$', re.M)


def test_metrics_of_any_worker_count_every_workers_requests(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    sent = 12
    with slow_upstream(["hello"], 0.0) as (_, base):
        args = ("--upstream", base, "--upstream-model", "m", "--workers", "2")
        with gateway(tmp_path, *args, TMPDIR=str(scratch)) as served:
            assert [p.name[:16] for p in scratch.iterdir()] == ["toolwire-metrics"]
            for _ in range(sent):  # a connection each: the kernel hands them to either worker
                with httpx.Client(timeout=30) as client:
                    r = client.post(
                        served.root + "/v1/chat/completions",
                        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                    )
                    assert r.status_code == 200, r.text
            counts = []
            for _ in range(6):  # whichever worker answers the scrape
                with httpx.Client(timeout=30) as client:
                    scraped = client.get(served.root + "/metrics").text
                found = REQUESTS.search(scraped)
                assert found, scraped
                counts.append(float(found.group(1)))
                time.sleep(0.1)
            served.stop()
            assert served.proc.wait(30) == 0, served.stderr()
    assert counts == [sent] * 6
    assert list(scratch.iterdir()) == []  # the directory went with the gateway
