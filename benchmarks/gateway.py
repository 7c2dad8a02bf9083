"""What the gateway adds to a request: latency, throughput, CPU and memory, beside going direct.

A fake OpenAI-compatible upstream on 127.0.0.1 answers every request with one tool call
(``get_weather``, its arguments arriving in pieces, as providers stream them). The same
chat-completion request, with one tool, is sent either straight to the upstream or to the
gateway in front of it, which does its real work on every reply: it assembles the call,
parses its arguments and re-emits OpenAI's shape. Conditions: not streamed and streamed (read
to the last byte), at concurrency 1 and 32 (workers, each sending its next request when its
last reply has ended), and any other levels given with ``--concurrency`` (``--concurrency
1000``: a thousand streams at once, one request per worker, each round).

Every request carries a ticket of its own, which the upstream writes into the call's id and
its ``city`` argument; every reply is checked (status 200; one ``get_weather`` call carrying
the request's own ticket and the arguments sent, ``finish_reason`` ``tool_calls``; a stream
ends with ``[DONE]``), so a reply that reached the wrong client, or that was cut or mixed
with another, is counted and shown, never dropped.

Printed per condition and path: latency at the median and the 99th percentile, requests per
second, the serving process's CPU per request (the upstream's when direct, the gateway's own
when through the gateway; user + system time from ``/proc/<pid>/stat``), its peak resident
memory so far (``VmHWM`` from ``/proc/<pid>/status``), failures; then what the gateway adds
(milliseconds at p50 and p99) and the ratios gateway/direct.

The machine is shared and noisy, so the figures are ratios measured in one run, never
assertions, and the two paths alternate: each round runs one direct batch and one gateway
batch (in turn order), after a warm-up of both. Percentiles come from all rounds' requests
pooled (both pools span the same stretch of time); requests per second is the median of the
rounds, CPU per request the total over the rounds, and the spread of the per-round p50 ratio
is shown as a measure of the noise.

Each worker sends from an ``httpx.AsyncClient`` of its own that keeps one connection alive.
One pooled client for all workers would measure the client: httpx's pool scans every
connection for every queued request, so at 32 its own work grows to several milliseconds a
request and caps the direct path at a few hundred requests a second on two cores, hiding the
gateway's cost in the baseline. ``--one-client`` sends from one pooled client instead.

The upstream and the gateway each run in a process of their own, as they would in use: in
one process they would share one interpreter lock with each other and with the client, and
the contention would be counted as overhead. The gateway is wired as ``toolwire serve
--upstream`` wires it (one pooled client, :func:`toolwire.backends.http.new_client`, for as
long as it serves); ``--client-per-request`` injects none, so the backend makes a client per
request, as a library caller who hands in no client gets.

Both servers keep idle connections for a minute. With uvicorn's 5 s, a thousand streams on two
shared cores lose a few percent of their requests to resets that measure the machine, not
the gateway: a client starved of CPU reads the end of a reply seconds after it was sent, so
its connection stays alive to it for seconds after the server's 5 s have run out, and a
request it sends then meets a server closing that connection. (A gateway in use meets the
same race with an upstream that keeps connections as briefly, under as much load.)

``--profile FILE`` runs the gateway under cProfile and writes its stats to FILE when it stops.

    python benchmarks/gateway.py [--requests 150] [--rounds 5] [--quick]
                                 [--concurrency 1000] [--only] [--one-client]
                                 [--streamed-only] [--client-per-request] [--profile FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import itertools
import json
import multiprocessing
import os
import platform
import re
import ssl
import statistics
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.server import create_app
from toolwire.testing import tool_call_deltas

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city, for the next few days.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    "days": {"type": "integer"},
                },
                "required": ["city"],
            },
        },
    }
]
USAGE = {"prompt_tokens": 61, "completion_tokens": 24}
HEADERS = {"content-type": "application/json"}
PATHS = ("direct", "gateway")
#: How a request's ticket is written in its question, and found there by the upstream.
TICKET = re.compile(r"ticket-[0-9]+")
_tickets = itertools.count()


def ask(ticket: str, stream: bool) -> bytes:
    """The request body: one tool, a question that carries ``ticket``."""
    return json.dumps(
        {
            "model": "up-model",
            "messages": [
                {"role": "system", "content": "You answer questions about the weather."},
                {
                    "role": "user",
                    "content": f"What will the weather be in Paris for the next 3 days? "
                    f"(request {ticket})",
                },
            ],
            "tools": TOOLS,
            "stream": stream,
        }
    ).encode()


def arguments(ticket: str) -> dict[str, Any]:
    """The call's arguments in the reply to the request carrying ``ticket``."""
    return {"city": f"Paris {ticket}", "unit": "celsius", "days": 3}


def call_id(ticket: str) -> str:
    return f"call_{ticket.replace('-', '_')}"


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


def _serve(role: str, conn: Connection, upstream: str, per_request: bool, profile: str) -> None:
    """Child process: serve ``role``, send its URL, serve until told to stop."""
    if role == "upstream":
        app = upstream_app()
    else:
        client = None if per_request else new_client()  # as `toolwire serve --upstream`
        backend = OpenAIBackend("up-model", base_url=upstream + "/v1/", client=client)
        app = create_app(backend, model_name="gw")
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        lifespan="off",
        timeout_keep_alive=KEEP_ALIVE,
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


@contextlib.contextmanager
def _process(
    role: str, upstream: str = "", per_request: bool = False, profile: str = ""
) -> Iterator[Server]:
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    proc = ctx.Process(
        target=_serve,
        args=(role, theirs, upstream, per_request, profile),
        name=role,
        daemon=True,
    )
    proc.start()
    try:
        if not ours.poll(60):
            raise RuntimeError(f"the {role} did not start serving")
        assert proc.pid is not None
        yield Server(str(ours.recv()), proc.pid)
    finally:
        with contextlib.suppress(OSError):
            ours.send("stop")
        proc.join(60 if profile else 10)
        if proc.is_alive():
            proc.terminate()
            proc.join(5)


_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process has used, all its threads, from ``/proc/<pid>/stat``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14, 15)


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident memory so far (``VmHWM``), in MB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# -- checking replies


def check(stream: bool, ticket: str, status: int, data: bytes) -> str | None:
    """Why a reply is wrong, or None: one get_weather call, the request's own ticket in its
    id and arguments."""
    if status != 200:
        return f"status {status}: {data[:160]!r}"
    name = ""
    ids: list[str] = []
    pieces: list[str] = []
    finish: str | None = None
    try:
        if stream:
            text = data.decode()
            if not text.endswith("data: [DONE]\n\n"):
                return f"the stream does not end with [DONE]: ...{text[-120:]!r}"
            for event in text.split("\n\n"):
                if not event.startswith("data: ") or event == "data: [DONE]":
                    continue
                chunk = json.loads(event[6:])
                if "error" in chunk:
                    return f"an error chunk: {event[:160]!r}"
                for choice in chunk["choices"]:
                    for tc in choice["delta"].get("tool_calls") or ():
                        if tc.get("id"):
                            ids.append(tc["id"])
                        name += tc["function"].get("name") or ""
                        pieces.append(tc["function"].get("arguments") or "")
                    finish = choice.get("finish_reason") or finish
        else:
            choice = json.loads(data)["choices"][0]
            calls = choice["message"].get("tool_calls") or []
            if len(calls) != 1:
                return f"{len(calls)} tool calls, not 1: {data[:160]!r}"
            name = calls[0]["function"]["name"]
            ids.append(calls[0]["id"])
            pieces.append(calls[0]["function"]["arguments"])
            finish = choice["finish_reason"]
        args = json.loads("".join(pieces))
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        return f"unreadable reply ({type(exc).__name__}: {exc}): {data[:160]!r}"
    if name != "get_weather":
        return f"the call is named {name!r}"
    if ids != [call_id(ticket)] or args != arguments(ticket):
        return f"MIXED: request {ticket} got call {ids} with {args!r}"
    if finish != "tool_calls":
        return f"finish_reason is {finish!r}"
    return None


# -- sending


@dataclass
class Batch:
    latencies: list[float]
    seconds: float
    failures: list[str]
    cpu: float  # the serving process's CPU seconds over the batch

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds


async def batch(
    clients: Sequence[httpx.AsyncClient], url: str, stream: bool, n: int, pid: int
) -> Batch:
    """``n`` requests from one worker per client (the same client may be given more than
    once), each with a ticket of its own; replies are checked after the clock stops."""
    latencies: list[float] = []
    replies: list[tuple[str, int, bytes]] = []
    failures: list[str] = []
    left = n

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal left
        while left > 0:
            left -= 1
            ticket = f"ticket-{next(_tickets)}"
            body = ask(ticket, stream)
            start = time.perf_counter()
            try:
                if stream:
                    async with client.stream("POST", url, content=body, headers=HEADERS) as r:
                        data = b"".join([piece async for piece in r.aiter_bytes()])
                else:
                    r = await client.post(url, content=body, headers=HEADERS)
                    data = r.content
            except httpx.HTTPError as exc:
                failures.append(f"{type(exc).__name__}: {exc}")
                continue
            latencies.append(time.perf_counter() - start)
            replies.append((ticket, r.status_code, data))

    cpu = cpu_seconds(pid)
    start = time.perf_counter()
    await asyncio.gather(*(worker(client) for client in clients))
    seconds = time.perf_counter() - start
    cpu = cpu_seconds(pid) - cpu
    failures.extend(why for t, s, d in replies if (why := check(stream, t, s, d)) is not None)
    return Batch(latencies, seconds, failures, cpu)


@dataclass
class Measured:
    latencies: list[float] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    p50s: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    cpu: float = 0.0
    requests: int = 0
    peak_mb: float = float("nan")

    def add(self, b: Batch) -> None:
        self.latencies.extend(b.latencies)
        self.rates.append(b.rate)
        self.p50s.append(statistics.median(b.latencies) if b.latencies else float("nan"))
        self.failures.extend(b.failures)
        self.cpu += b.cpu
        self.requests += len(b.latencies)

    def p(self, q: int) -> float:
        """The q-th percentile in milliseconds (q=50: the median)."""
        if len(self.latencies) < 2:
            return float("nan")
        return statistics.quantiles(self.latencies, n=100, method="inclusive")[q - 1] * 1e3

    @property
    def rate(self) -> float:
        return statistics.median(self.rates) if self.rates else float("nan")

    @property
    def cpu_ms(self) -> float:
        """The serving process's CPU per request, in milliseconds (10 ms clock ticks)."""
        return self.cpu / self.requests * 1e3 if self.requests else float("nan")


async def measure(
    servers: dict[str, Server],
    stream: bool,
    concurrency: int,
    n: int,
    rounds: int,
    one_client: bool,
) -> dict[str, Measured]:
    """Alternating rounds of one direct and one gateway batch, the order turning each round."""
    out = {path: Measured() for path in PATHS}
    urls = {
        "direct": f"{servers['direct'].url}/v1/chat/completions",
        "gateway": f"{servers['gateway'].url}/v1/chat/completions",
    }
    tls = ssl.create_default_context()  # made once: each client would load the CA bundle
    async with contextlib.AsyncExitStack() as stack:
        if one_client:
            limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
            client = httpx.AsyncClient(limits=limits, timeout=120.0, verify=tls)
            clients = [await stack.enter_async_context(client)] * concurrency
        else:
            limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
            clients = [
                await stack.enter_async_context(
                    httpx.AsyncClient(limits=limits, timeout=120.0, verify=tls)
                )
                for _ in range(concurrency)
            ]
        for path in PATHS:  # warm-up: connections, imports, caches; checked, not timed
            pid = servers[path].pid
            n_warm = concurrency if concurrency > MANY else max(2 * concurrency, 10)
            warm = await batch(clients, urls[path], stream, n_warm, pid)
            out[path].failures.extend(f"(warm-up) {why}" for why in warm.failures)
        for r in range(rounds):
            for path in PATHS if r % 2 == 0 else PATHS[::-1]:
                out[path].add(await batch(clients, urls[path], stream, n, servers[path].pid))
    for path in PATHS:
        out[path].peak_mb = peak_rss_mb(servers[path].pid)
    return out


# -- reporting


def report(results: list[tuple[str, dict[str, Measured]]]) -> None:
    print(
        f"\n{'condition':<20} {'path':<8} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8} "
        f"{'CPU ms/req':>10} {'peak MB':>8} {'failed':>7}"
    )
    for label, m in results:
        for path in PATHS:
            print(
                f"{label if path == 'direct' else '':<20} {path:<8} {m[path].p(50):8.2f} "
                f"{m[path].p(99):8.2f} {m[path].rate:8.1f} {m[path].cpu_ms:10.2f} "
                f"{m[path].peak_mb:8.1f} {len(m[path].failures):7d}"
            )
    print(
        f"\n{'gateway vs direct':<20} {'+p50 ms':>8} {'+p99 ms':>8} {'p50 x':>7} {'p99 x':>7} "
        f"{'req/s x':>8}   {'p50 x per round':>15}"
    )
    for label, m in results:
        d, g = m["direct"], m["gateway"]
        per_round = [gp / dp for gp, dp in zip(g.p50s, d.p50s, strict=True)]
        spread = f"{min(per_round):.2f}-{max(per_round):.2f}" if per_round else "-"
        print(
            f"{label:<20} {g.p(50) - d.p(50):8.2f} {g.p(99) - d.p(99):8.2f} "
            f"{g.p(50) / d.p(50):7.2f} {g.p(99) / d.p(99):7.2f} {g.rate / d.rate:8.2f}   "
            f"{spread:>15}"
        )
    failed = [(label, path, m[path].failures) for label, m in results for path in PATHS]
    if any(f for _, _, f in failed):
        print("\nFAILURES (figures above are suspect):")
        for label, path, failures in failed:
            if failures:
                mixed = sum("MIXED" in f for f in failures)
                print(f"  {label}, {path}: {len(failures)} ({mixed} mixed); first: {failures[0]}")


#: Above this concurrency a round is one request per worker, and there are at most two.
MANY = 100


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=150, help="per path, per round (150)")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds (5)")
    p.add_argument(
        "--concurrency",
        default="",
        help="comma-separated levels run besides 1 and 32, e.g. 1000 (a round is then one "
        f"request per worker; above {MANY}, at most two rounds)",
    )
    p.add_argument("--only", action="store_true", help="run only the --concurrency levels")
    p.add_argument("--quick", action="store_true", help="a smoke run: 40 requests, 2 rounds")
    p.add_argument(
        "--one-client",
        action="store_true",
        help="send from one pooled httpx client, not one client per worker",
    )
    p.add_argument(
        "--client-per-request",
        action="store_true",
        help="inject no client into the gateway's backend: it makes one per request",
    )
    p.add_argument("--profile", metavar="FILE", default="", help="cProfile the gateway to FILE")
    p.add_argument("--streamed-only", action="store_true", help="skip the non-streamed runs")
    args = p.parse_args()
    if args.quick:
        args.requests, args.rounds = 40, 2
    given = [int(c) for c in args.concurrency.split(",") if c.strip()]
    levels = sorted(set(given) if args.only else {1, 32, *given})
    wiring = "a client per request" if args.client_per_request else "as `toolwire serve`"
    sender = "one pooled client" if args.one_client else "one client (one connection) per worker"
    print(
        f"python {platform.python_version()}, {os.cpu_count()} cpus, httpx {httpx.__version__}; "
        f"{args.requests} requests x {args.rounds} rounds per path and condition "
        f"(above concurrency {MANY}: one per worker, at most 2 rounds)"
    )
    print(f"sent from {sender}; gateway's upstream client: {wiring}")
    started = time.perf_counter()
    results: list[tuple[str, dict[str, Measured]]] = []
    with contextlib.ExitStack() as stack:
        upstream = stack.enter_context(_process("upstream"))
        gateway = stack.enter_context(
            _process("gateway", upstream.url, args.client_per_request, args.profile)
        )
        servers = {"direct": upstream, "gateway": gateway}
        # by concurrency, then streamed or not: the peak memory grows with the load
        for c in levels:
            for stream in (True,) if args.streamed_only else (False, True):
                n, rounds = (c, min(args.rounds, 2)) if c > MANY else (args.requests, args.rounds)
                label = f"{'streamed' if stream else 'not streamed'}, c={c}"
                m = asyncio.run(measure(servers, stream, c, n, rounds, args.one_client))
                results.append((label, m))
                print(
                    f"  {label}: gateway {m['gateway'].cpu_ms:.2f} CPU ms/req, "
                    f"{len(m['gateway'].failures)} failed",
                    flush=True,
                )
    report(results)
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    return 1 if any(m[path].failures for _, m in results for path in PATHS) else 0


if __name__ == "__main__":
    sys.exit(main())
