"""``serve --config``: an entry's ``api_key_env`` names a variable that must be set when the
gateway starts (else exit 2 naming the entry and the variable, not an upstream's 401 on each
request later), and an ``upstream`` URL with a query (Azure's ``?api-version=…``) keeps its
query after the path each request adds. Over real HTTP, before an upstream on loopback that
records what it was asked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from toolwire.cli import _parser
from toolwire.cli.serve import served_models
from toolwire.server import create_app
from toolwire.server.config import check_environment, read_config
from toolwire.testing import ServedApp

from .gateway_process import free_port, serve_env

UNSET = "TOOLWIRE_TEST_KEY_NOBODY_SETS"


class Recorder:
    """An OpenAI-compatible upstream at any path, answering "hello", recording each
    request's path, query and authorization."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str]] = []

    async def any(self, request: Request) -> Response:
        self.asked.append(
            (request.url.path, request.url.query, request.headers.get("authorization", ""))
        )
        return StreamingResponse(self._events(), media_type="text/event-stream")

    async def _events(self) -> AsyncIterator[str]:
        for delta, finish in (({"role": "assistant", "content": "hello"}, None), ({}, "stop")):
            chunk: dict[str, Any] = {"id": "x", "object": "chat.completion.chunk"}
            chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
            yield f"data: {json.dumps(chunk)}\n\n"
        yield "data: [DONE]\n\n"


@pytest.fixture
def recorder() -> Iterator[tuple[Recorder, str]]:
    rec = Recorder()
    app = Starlette(routes=[Route("/{path:path}", rec.any, methods=["POST"])])
    with ServedApp(app) as served:
        yield rec, served.url


def _config(tmp_path: Path, upstream: str, variable: str) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(
        f"""
[[models]]
name = "local"
upstream = "{upstream}"
upstream_model = "m"

[[models]]
name = "azure"
upstream = "{upstream}"
upstream_model = "gpt-4o"
api_key_env = "{variable}"
"""
    )
    return path


def test_an_unset_api_key_env_stops_the_start_naming_entry_and_variable(tmp_path: Path) -> None:
    path = _config(tmp_path, "http://127.0.0.1:9/v1", UNSET)
    command = [sys.executable, "-m", "toolwire", "serve", "--config", str(path)]
    done = subprocess.run(
        [*command, "--port", str(free_port())],
        env=serve_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert f"models[1] (azure).api_key_env: the variable {UNSET} is not set" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    entries = read_config(path)
    check_environment(entries, {UNSET: "sk-set"})  # set: the start goes on
    with pytest.raises(Exception, match="is not set"):
        check_environment(entries, {UNSET: ""})  # empty sends no key either


def test_an_upstream_query_stays_after_the_path(
    tmp_path: Path, recorder: tuple[Recorder, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rec, root = recorder
    monkeypatch.setenv("AZURE_TEST_KEY", "sk-azure")
    path = _config(tmp_path, f"{root}/openai/v1?api-version=2024-10-21", "AZURE_TEST_KEY")
    args = _parser().parse_args(["serve", "--config", str(path)])
    with ServedApp(create_app(served_models(args))) as gw:
        for model in ("azure", "local"):
            for stream in (False, True):
                ask = {
                    "model": model,
                    "stream": stream,
                    "messages": [{"role": "user", "content": "hi"}],
                }
                r = httpx.post(gw.url + "/v1/chat/completions", json=ask, timeout=10)
                assert r.status_code == 200, r.text
                assert "hello" in r.text
    assert rec.asked == [
        ("/openai/v1/chat/completions", "api-version=2024-10-21", "Bearer sk-azure"),
        ("/openai/v1/chat/completions", "api-version=2024-10-21", "Bearer sk-azure"),
        ("/openai/v1/chat/completions", "api-version=2024-10-21", ""),
        ("/openai/v1/chat/completions", "api-version=2024-10-21", ""),
    ]
