"""``toolwire serve --workers N``: N real processes on 127.0.0.1 serve the gateway together.

The command runs as a user runs it, in its own process, in front of an upstream on loopback
that echoes each request's own ticket; which worker sent each upstream request is read from
``/proc`` (the upstream sees the worker's port; ``/proc/net/tcp`` and the workers' open file
descriptors say whose socket that is).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import toolwire
from toolwire.cli import main
from toolwire.testing import ServedApp

from .serving import wait_healthy

pytestmark = pytest.mark.skipif(
    not Path("/proc/net/tcp").exists(), reason="reads which process holds a socket from /proc"
)

TICKET = re.compile(r"ticket-[0-9]+")


class EchoUpstream:
    """An OpenAI-compatible upstream that answers each request with its own ticket, and
    records the port each request came from."""

    def __init__(self) -> None:
        self.ports: list[int] = []

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        assert request.client is not None
        self.ports.append(request.client.port)
        found = TICKET.search(str(body["messages"][-1]["content"]))
        text = f"echo {found.group(0) if found else 'none'}"
        if not body.get("stream"):
            message = {"role": "assistant", "content": text}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            return JSONResponse({"id": "x", "object": "chat.completion", "choices": [choice]})
        return StreamingResponse(self._events(text), media_type="text/event-stream")

    async def _events(self, text: str) -> AsyncIterator[str]:
        for delta, finish in (({"role": "assistant", "content": text}, None), ({}, "stop")):
            chunk = {"id": "x", "object": "chat.completion.chunk", "choices": []}
            chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
            yield f"data: {json.dumps(chunk)}\n\n"
        yield "data: [DONE]\n\n"


@pytest.fixture
def upstream() -> Iterator[tuple[EchoUpstream, str]]:
    echo = EchoUpstream()
    app = Starlette(routes=[Route("/v1/chat/completions", echo.chat, methods=["POST"])])
    with ServedApp(app) as served:
        yield echo, served.url + "/v1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int) -> list[int]:
    """The worker processes uvicorn started under ``pid`` (multiprocessing's spawned ones)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and b"spawn_main" in cmdline:
            out.append(int(stat.parent.name))
    return out


def _owner(port: int, pids: list[int]) -> int | None:
    """Which of ``pids`` holds the loopback TCP socket whose local port is ``port``."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port:
            inodes.add(f"socket:[{fields[9]}]")
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd) in inodes:
                    return pid
            except OSError:
                continue
    return None


async def _asks(url: str, tickets: list[str]) -> list[str]:
    """Streamed requests at once, each on a connection of its own; the text of each reply."""

    async def one(ticket: str) -> str:
        ask = {
            "model": "m",
            "messages": [{"role": "user", "content": f"Say {ticket}."}],
            "stream": True,
        }
        async with (
            httpx.AsyncClient(timeout=30) as client,
            client.stream("POST", url, json=ask) as r,
        ):
            assert r.status_code == 200
            lines = [line async for line in r.aiter_lines() if line.startswith("data: {")]
        chunks = [json.loads(line[6:]) for line in lines]
        return "".join(
            c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]
        )

    return list(await asyncio.gather(*(one(t) for t in tickets)))


def test_workers_serve_from_that_many_processes(
    upstream: tuple[EchoUpstream, str], tmp_path: Path
) -> None:
    echo, base = upstream
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(toolwire.__file__).parents[1])}
    command = [sys.executable, "-m", "toolwire", "serve", "--upstream", base]
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(
        [*command, "--upstream-model", "m", "--port", str(port), "--workers", "2"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    root = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, root, tmp_path / "serve.log")
        deadline = time.monotonic() + 30
        while len(workers := _children(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(workers) == 2, workers
        assert "from 2 processes" in (tmp_path / "serve.log").read_text()

        # the kernel hands connections to either worker: send until both have served
        served_by: set[int | None] = set()
        for n in range(10):
            tickets = [f"ticket-{n * 100 + i}" for i in range(20)]
            echo.ports.clear()
            texts = asyncio.run(_asks(root + "/v1/chat/completions", tickets))
            assert texts == [f"echo {t}" for t in tickets]  # each its own reply, none mixed
            served_by |= {_owner(p, workers) for p in echo.ports}
            if served_by >= set(workers):
                break
        assert served_by >= set(workers), served_by
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()
    assert not _children(proc.pid)  # the workers end with it


def test_workers_must_be_at_least_one(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["serve", "--upstream", "http://127.0.0.1:9/v1", "--upstream-model", "m"]
    assert main([*args, "--workers", "0"]) == 2
    assert "--workers must be at least 1, not 0" in capsys.readouterr().err
