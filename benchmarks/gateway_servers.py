"""The servers of the gateway benchmark (see gateway.py), each in a process of its own: the
fake upstream, the gateway wired as ``toolwire serve`` wires it, and LiteLLM's proxy; and
what is read of each process from ``/proc`` (CPU, peak memory).
"""

from __future__ import annotations

import contextlib
import cProfile
import json
import multiprocessing
import os
import re
import secrets
import signal
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from gateway_apis import arguments, call_id
from gateway_stacks import upstream_client
from toolwire.backends import OpenAIBackend
from toolwire.server import create_app, freeze_heap, uvicorn_settings
from toolwire.testing import tool_call_deltas

USAGE = {"prompt_tokens": 61, "completion_tokens": 24}
HEADERS = {"content-type": "application/json", "x-api-key": "unused"}
#: How a request's ticket is written in its question, and found there by the upstream.
TICKET = re.compile(r"ticket-[0-9]+")


# -- the upstream: every request answered with one call that carries its ticket


def _ticket_of(body: dict[str, Any]) -> str:
    found = TICKET.search(str(body.get("messages", [{}])[-1].get("content")))
    return found.group(0) if found else "ticket-none"


async def _upstream_chat(request: Request) -> Response:
    body = await request.json()
    ticket = _ticket_of(body)
    model = body.get("model", "")
    if not body.get("stream"):
        return JSONResponse(_completion(model, ticket))
    return StreamingResponse(_chunks(model, ticket), media_type="text/event-stream")


async def _chunks(model: str, ticket: str) -> AsyncIterator[str]:
    """The SSE a provider streams: the call's id and name, then its arguments in pieces."""
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0}
    deltas = tool_call_deltas([(call_id(ticket), "get_weather", json.dumps(arguments(ticket)))])
    deltas[0] = {"role": "assistant", **deltas[0]}
    for d in deltas:
        chunk = {**base, "model": model, "choices": [{"index": 0, "delta": d}]}
        yield "data: " + json.dumps(chunk) + "\n\n"
    last = {
        **base,
        "model": model,
        "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
        "usage": USAGE,
    }
    yield "data: " + json.dumps(last) + "\n\n"
    yield "data: [DONE]\n\n"


def _completion(model: str, ticket: str) -> dict[str, Any]:
    call = {
        "id": call_id(ticket),
        "type": "function",
        "function": {"name": "get_weather", "arguments": json.dumps(arguments(ticket))},
    }
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {**USAGE, "total_tokens": sum(USAGE.values())},
    }


def upstream_app() -> Starlette:
    return Starlette(
        routes=[
            Route("/v1/chat/completions", _upstream_chat, methods=["POST"]),
            Route("/chat/completions", _upstream_chat, methods=["POST"]),
        ]
    )


# -- the servers, each in a process of its own

#: How long the servers keep an idle connection, in seconds (uvicorn's default is 5).
KEEP_ALIVE = 60


class Inside:
    """The gateway's time for each request, from the app's first look at it to the last byte
    it hands the server (the upstream's reply included), kept until ``GET /_bench/inside``
    takes them: the latency apart from what the sockets to the client and the machine's
    scheduling of the client add."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.times: list[float] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/_bench/inside":
            taken, self.times = self.times, []
            await JSONResponse(taken)(scope, receive, send)
            return
        start = time.perf_counter()

        async def timed(message: Any) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.times.append(time.perf_counter() - start)

        await self.app(scope, receive, timed)


def _serve(
    role: str,
    conn: Connection,
    upstream: str,
    per_request: bool,
    profile: str,
    fast: bool,
    http: str,
) -> None:
    """Child process: serve ``role``, send its URL, serve until told to stop. A gateway's
    upstream client is on the HTTP stack ``http`` (see gateway_stacks.py)."""
    if role == "upstream":
        app = upstream_app()
    else:
        # as `toolwire serve --upstream` (its stack, for "pool")
        client = None if per_request else upstream_client(http)
        backend = OpenAIBackend("up-model", base_url=upstream + "/v1/", client=client)
        app = Inside(create_app(backend, model_name="gw"))
        freeze_heap()  # as serve does
    # the gateway as `toolwire serve` runs it (its server, loop and guards); the upstream
    # on the same server, so that neither side is measured on a slower one
    settings = {**uvicorn_settings(fast=None if fast else False), "timeout_keep_alive": KEEP_ALIVE}
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", **settings
    )
    server = uvicorn.Server(config)

    def tell() -> None:  # the URL once serving; then wait to be told to stop
        while not server.started:
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        conn.send(f"http://127.0.0.1:{port}")
        conn.recv()
        server.should_exit = True

    threading.Thread(target=tell, daemon=True).start()
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    server.run()  # in the main thread, so that the profiler sees it
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)


@dataclass
class Server:
    url: str
    pid: int
    headers: dict[str, str] = field(default_factory=lambda: dict(HEADERS))
    #: Seconds from launch until it served.
    started: float = float("nan")


@contextlib.contextmanager
def serving(
    role: str,
    upstream: str = "",
    per_request: bool = False,
    profile: str = "",
    fast: bool = True,
    http: str = "pool",
) -> Iterator[Server]:
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    proc = ctx.Process(
        target=_serve,
        args=(role, theirs, upstream, per_request, profile, fast, http),
        name=role if role == "upstream" else f"{role} ({http})",
        daemon=True,
    )
    launched = time.perf_counter()
    proc.start()
    try:
        if not ours.poll(60):
            raise RuntimeError(f"the {role} did not start serving")
        assert proc.pid is not None
        url = str(ours.recv())
        yield Server(url, proc.pid, started=time.perf_counter() - launched)
    finally:
        with contextlib.suppress(OSError):
            ours.send("stop")
        proc.join(60 if profile else 10)
        if proc.is_alive():
            proc.terminate()
            proc.join(5)


@contextlib.contextmanager
def litellm_proxy(command: str, upstream: str) -> Iterator[Server]:
    """LiteLLM's proxy in front of the same upstream, as its users start it: one worker, no
    database, the upstream as an OpenAI-compatible model (``openai/up-model``), a master key
    (it refuses to start without one)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    key = "sk-bench-" + secrets.token_hex(16)
    env = {
        **os.environ,
        "LITELLM_MASTER_KEY": key,
        "OPENAI_API_KEY": "unused",
        "LITELLM_TELEMETRY": "False",
    }
    argv = [command, "--model", "openai/up-model", "--api_base", upstream + "/v1"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"]
    launched = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"LiteLLM's proxy exited ({proc.returncode}) before serving")
            if time.perf_counter() - launched > 180:
                raise RuntimeError("LiteLLM's proxy did not start serving within 180 s")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/health/liveliness", timeout=1).status_code == 200:
                    break
            time.sleep(0.2)
        headers = {**HEADERS, "authorization": f"Bearer {key}"}
        yield Server(url, proc.pid, headers, started=time.perf_counter() - launched)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def _tree(pid: int) -> list[int]:
    """``pid`` and every process below it (LiteLLM's proxy may serve from a child)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError):
                parents.setdefault(int(_stat(int(entry))[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(parents.get(p, ()))
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process and those below it have used, all their threads, from
    ``/proc/<pid>/stat``."""
    total = 0
    for p in _tree(pid):
        with contextlib.suppress(OSError):
            fields = _stat(p)
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total / _TICK


def peak_rss_mb(pid: int) -> float:
    """The peak resident memory so far (``VmHWM``) of the process and those below it
    (each one's peak, added), in MB."""
    total = 0
    for p in _tree(pid):
        with contextlib.suppress(OSError), open(f"/proc/{p}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
    return total / 1024 if total else float("nan")
