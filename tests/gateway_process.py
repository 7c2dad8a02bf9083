"""A real ``toolwire serve`` process on 127.0.0.1, and a slow upstream for it to stand before,
for the tests of what an operator sees: shutdown, logs, metrics across workers.

The gateway runs as an operator runs it: ``python -m toolwire serve …`` in a process of its
own, its ``TOOLWIRE_HOME`` in a temporary directory, its stderr kept in a file the test
reads. The upstream is a Starlette app over real HTTP that streams a reply in chunks, a
pause between each, so a stream can be in flight when the gateway is told to stop.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import toolwire
from toolwire.testing import ServedApp

from .serving import wait_healthy


class SlowUpstream:
    """An OpenAI-compatible upstream whose streamed reply is ``words``, one chunk each
    ``pause`` seconds, then ``finish_reason: stop`` and ``[DONE]``; a reply not streamed is
    the words at once."""

    def __init__(self, words: list[str], pause: float) -> None:
        self.words = words
        self.pause = pause
        self.bodies: list[dict[str, object]] = []

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        self.bodies.append(body)
        if not body.get("stream"):
            message = {"role": "assistant", "content": "".join(self.words)}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            return JSONResponse({"id": "x", "object": "chat.completion", "choices": [choice]})
        return StreamingResponse(self._events(), media_type="text/event-stream")

    async def _events(self) -> AsyncIterator[str]:
        deltas: list[tuple[dict[str, str], str | None]] = [({"role": "assistant"}, None)]
        deltas += [({"content": word}, None) for word in self.words]
        deltas.append(({}, "stop"))
        for delta, finish in deltas:
            chunk = {"id": "x", "object": "chat.completion.chunk", "model": "m"}
            chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
            yield f"data: {json.dumps(chunk)}\n\n"
            await asyncio.sleep(self.pause)
        yield "data: [DONE]\n\n"


@contextmanager
def slow_upstream(words: list[str], pause: float) -> Iterator[tuple[SlowUpstream, str]]:
    """A :class:`SlowUpstream` served on loopback, and its base URL (``…/v1``)."""
    upstream = SlowUpstream(words, pause)
    app = Starlette(routes=[Route("/v1/chat/completions", upstream.chat, methods=["POST"])])
    with ServedApp(app) as served:
        yield upstream, served.url + "/v1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Gateway:
    """A ``toolwire serve`` process: its root URL and the file its stderr goes to."""

    proc: subprocess.Popen[bytes]
    root: str
    log: Path

    def stop(self) -> None:
        """SIGTERM, as an operator's supervisor sends it."""
        self.proc.send_signal(signal.SIGTERM)

    def stderr(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def serve_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a gateway process: this checkout's toolwire, a home of its own."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(Path(toolwire.__file__).parents[1])}
    env["TOOLWIRE_HOME"] = str(home)
    for name in ("PROMETHEUS_MULTIPROC_DIR", "OTEL_EXPORTER_OTLP_ENDPOINT", "TOOLWIRE_API_KEY"):
        env.pop(name, None)
    env.update(extra)
    return env


@contextmanager
def gateway(tmp_path: Path, *args: str, **extra_env: str) -> Iterator[Gateway]:
    """``toolwire serve ARGS`` on a free port, healthy; ended (killed if it must be) after."""
    port = free_port()
    log = tmp_path / "serve.log"
    command = [sys.executable, "-m", "toolwire", "serve", *args, "--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command,
            stdout=out,
            stderr=out,
            env=serve_env(tmp_path, **extra_env),
        )
    root = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, root, log)
        yield Gateway(proc, root, log)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
