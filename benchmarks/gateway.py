"""What the gateway adds to a request: latency and throughput, as ratios to going direct.

A fake OpenAI-compatible upstream on 127.0.0.1 answers every request with the same tool
call (one ``get_weather`` call whose arguments arrive in pieces, as providers stream them).
The same chat-completion request, with one tool, is sent either straight to the upstream or
to the gateway in front of it, which does its real work on every reply: it assembles the
call, parses its arguments and re-emits OpenAI's shape. Four conditions: not streamed and
streamed (read to the last byte), at concurrency 1 and 32 (workers, each sending its next
request when its last reply has ended).

Printed per condition and path: latency at the median and the 99th percentile, requests per
second, failures; then what the gateway adds (milliseconds at p50 and p99) and the ratios
gateway/direct. Every reply is checked (status 200; one ``get_weather`` call with the
arguments sent, ``finish_reason`` ``tool_calls``; a stream ends with ``[DONE]``) and any
failure is counted and shown, never dropped.

The machine is shared and noisy, so the figures are ratios measured in one run, never
assertions, and the two paths alternate: each round runs one direct batch and one gateway
batch (in turn order), after a warm-up of both. Percentiles come from all rounds' requests
pooled (both pools span the same stretch of time); requests per second is the median of the
rounds, and the spread of the per-round p50 ratio is shown as a measure of the noise.

Each worker sends from an ``httpx.AsyncClient`` of its own that keeps one connection alive.
One pooled client for all 32 workers would measure the client: httpx's pool scans every
connection for every queued request, so at 32 its own work grows to several milliseconds a
request and caps the direct path at a few hundred requests a second on two cores, hiding the
gateway's cost in the baseline. ``--one-client`` sends from one pooled client instead.

The upstream and the gateway each run in a process of their own, as they would in use: in
one process they would share one interpreter lock with each other and with the client, and
the contention would be counted as overhead. The gateway is wired as ``toolwire serve
--upstream`` wires it (one pooled client for the upstream, for as long as it serves);
``--client-per-request`` injects none, so the backend makes a client per request, as a
library caller who hands in no client gets.

The library's fake serves each scripted reply once and always answers with a stream (the
gateway always asks for one), so the upstream here is a subclass that scripts the same reply
for every request and answers ``stream: false`` with one JSON completion, as providers do:
the direct non-streamed baseline is what a client calling the provider would get.

    python benchmarks/gateway.py [--requests 150] [--rounds 5] [--quick]
                                 [--concurrency 1,32] [--one-client] [--client-per-request]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import platform
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.server import create_app
from toolwire.testing import FakeOpenAIServer, ServedApp, tool_call_deltas

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
CALL_ID = "call_8f2a51c9"
ARGUMENTS = {"city": "Paris", "unit": "celsius", "days": 3}
ARGUMENTS_TEXT = json.dumps(ARGUMENTS)
USAGE = {"prompt_tokens": 61, "completion_tokens": 24}
DELTAS = tool_call_deltas([(CALL_ID, "get_weather", ARGUMENTS_TEXT)])
ASK = {
    "model": "up-model",
    "messages": [
        {"role": "system", "content": "You answer questions about the weather."},
        {"role": "user", "content": "What will the weather be in Paris for the next 3 days?"},
    ],
    "tools": TOOLS,
}
HEADERS = {"content-type": "application/json"}
PATHS = ("direct", "gateway")


class RepeatingUpstream(FakeOpenAIServer):
    """The library's fake upstream, answering every request with the one tool-call reply:
    scripted afresh for each streamed request, and as one JSON completion for ``stream:
    false``. Recorded requests are dropped, since thousands arrive."""

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        if not body.get("stream"):
            return JSONResponse(_completion(body.get("model", "")))
        self.requests.clear()
        self.headers.clear()
        self.add_stream(DELTAS, finish_reason="tool_calls", usage=USAGE)
        return await super()._chat(request)


def _completion(model: str) -> dict[str, Any]:
    call = {
        "id": CALL_ID,
        "type": "function",
        "function": {"name": "get_weather", "arguments": ARGUMENTS_TEXT},
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


# -- the servers, each in a process of its own


def _serve(role: str, conn: Connection, upstream: str, per_request: bool) -> None:
    """Child process: serve ``role``, send its URL, serve until told to stop."""
    if role == "upstream":
        fake = RepeatingUpstream()
        with fake:
            conn.send(fake.base_url)
            conn.recv()
        return
    client = None if per_request else new_client()  # as `toolwire serve --upstream`
    backend = OpenAIBackend("up-model", base_url=upstream, client=client)
    with ServedApp(create_app(backend, model_name="gw")) as served:
        conn.send(served.url)
        conn.recv()


@contextlib.contextmanager
def _process(role: str, upstream: str = "", per_request: bool = False) -> Iterator[str]:
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    proc = ctx.Process(
        target=_serve, args=(role, theirs, upstream, per_request), name=role, daemon=True
    )
    proc.start()
    try:
        if not ours.poll(60):
            raise RuntimeError(f"the {role} did not start serving")
        yield str(ours.recv())
    finally:
        with contextlib.suppress(OSError):
            ours.send("stop")
        proc.join(10)
        if proc.is_alive():
            proc.terminate()
            proc.join(5)


# -- checking replies


def check(stream: bool, status: int, data: bytes) -> str | None:
    """Why a reply is wrong, or None: one get_weather call with the arguments sent."""
    if status != 200:
        return f"status {status}: {data[:160]!r}"
    name = ""
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
                        name += tc["function"].get("name") or ""
                        pieces.append(tc["function"].get("arguments") or "")
                    finish = choice.get("finish_reason") or finish
        else:
            choice = json.loads(data)["choices"][0]
            calls = choice["message"].get("tool_calls") or []
            if len(calls) != 1:
                return f"{len(calls)} tool calls, not 1: {data[:160]!r}"
            name = calls[0]["function"]["name"]
            pieces.append(calls[0]["function"]["arguments"])
            finish = choice["finish_reason"]
        arguments = json.loads("".join(pieces))
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        return f"unreadable reply ({type(exc).__name__}: {exc}): {data[:160]!r}"
    if name != "get_weather":
        return f"the call is named {name!r}"
    if arguments != ARGUMENTS:
        return f"the arguments are {arguments!r}"
    if finish != "tool_calls":
        return f"finish_reason is {finish!r}"
    return None


# -- sending


@dataclass
class Batch:
    latencies: list[float]
    seconds: float
    failures: list[str]

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds


async def batch(clients: Sequence[httpx.AsyncClient], url: str, stream: bool, n: int) -> Batch:
    """``n`` requests from one worker per client (the same client may be given more than
    once); replies are checked after the clock stops."""
    body = json.dumps({**ASK, "stream": stream}).encode()
    latencies: list[float] = []
    replies: list[tuple[int, bytes]] = []
    failures: list[str] = []
    left = n

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal left
        while left > 0:
            left -= 1
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
            replies.append((r.status_code, data))

    start = time.perf_counter()
    await asyncio.gather(*(worker(client) for client in clients))
    seconds = time.perf_counter() - start
    failures.extend(why for s, d in replies if (why := check(stream, s, d)) is not None)
    return Batch(latencies, seconds, failures)


@dataclass
class Measured:
    latencies: list[float] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    p50s: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def add(self, b: Batch) -> None:
        self.latencies.extend(b.latencies)
        self.rates.append(b.rate)
        self.p50s.append(statistics.median(b.latencies) if b.latencies else float("nan"))
        self.failures.extend(b.failures)

    def p(self, q: int) -> float:
        """The q-th percentile in milliseconds (q=50: the median)."""
        if len(self.latencies) < 2:
            return float("nan")
        return statistics.quantiles(self.latencies, n=100, method="inclusive")[q - 1] * 1e3

    @property
    def rate(self) -> float:
        return statistics.median(self.rates) if self.rates else float("nan")


async def measure(
    urls: dict[str, str], stream: bool, concurrency: int, n: int, rounds: int, one_client: bool
) -> dict[str, Measured]:
    """Alternating rounds of one direct and one gateway batch, the order turning each round."""
    out = {path: Measured() for path in PATHS}
    async with contextlib.AsyncExitStack() as stack:
        if one_client:
            limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
            client = httpx.AsyncClient(limits=limits, timeout=60.0)
            clients = [await stack.enter_async_context(client)] * concurrency
        else:
            limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
            clients = [
                await stack.enter_async_context(httpx.AsyncClient(limits=limits, timeout=60.0))
                for _ in range(concurrency)
            ]
        for path in PATHS:  # warm-up: connections, imports, caches; checked, not timed
            warm = await batch(clients, urls[path], stream, max(2 * concurrency, 10))
            out[path].failures.extend(f"(warm-up) {why}" for why in warm.failures)
        for r in range(rounds):
            for path in PATHS if r % 2 == 0 else PATHS[::-1]:
                out[path].add(await batch(clients, urls[path], stream, n))
    return out


# -- reporting


def report(results: list[tuple[str, dict[str, Measured]]]) -> None:
    print(f"\n{'condition':<18} {'path':<8} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8} {'failed':>7}")
    for label, m in results:
        for path in PATHS:
            print(
                f"{label if path == 'direct' else '':<18} {path:<8} {m[path].p(50):8.2f} "
                f"{m[path].p(99):8.2f} {m[path].rate:8.1f} {len(m[path].failures):7d}"
            )
    print(
        f"\n{'gateway vs direct':<18} {'+p50 ms':>8} {'+p99 ms':>8} {'p50 x':>7} {'p99 x':>7} "
        f"{'req/s x':>8}   {'p50 x per round':>15}"
    )
    for label, m in results:
        d, g = m["direct"], m["gateway"]
        per_round = [gp / dp for gp, dp in zip(g.p50s, d.p50s, strict=True)]
        spread = f"{min(per_round):.2f}-{max(per_round):.2f}" if per_round else "-"
        print(
            f"{label:<18} {g.p(50) - d.p(50):8.2f} {g.p(99) - d.p(99):8.2f} "
            f"{g.p(50) / d.p(50):7.2f} {g.p(99) / d.p(99):7.2f} {g.rate / d.rate:8.2f}   "
            f"{spread:>15}"
        )
    failed = [(label, path, m[path].failures) for label, m in results for path in PATHS]
    if any(f for _, _, f in failed):
        print("\nFAILURES (figures above are suspect):")
        for label, path, failures in failed:
            if failures:
                print(f"  {label}, {path}: {len(failures)}; first: {failures[0]}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=150, help="per path, per round (150)")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds (5)")
    p.add_argument("--concurrency", default="1,32", help="comma-separated (1,32)")
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
    args = p.parse_args()
    if args.quick:
        args.requests, args.rounds = 40, 2
    levels = [int(c) for c in args.concurrency.split(",")]
    wiring = "a client per request" if args.client_per_request else "as `toolwire serve`"
    sender = "one pooled client" if args.one_client else "one client (one connection) per worker"
    print(
        f"python {platform.python_version()}, {os.cpu_count()} cpus, httpx {httpx.__version__}; "
        f"{args.requests} requests x {args.rounds} rounds per path and condition"
    )
    print(
        f"reply: 1 call, {len(DELTAS)} deltas ({len(ARGUMENTS_TEXT)} argument characters)\n"
        f"sent from {sender}; gateway's upstream client: {wiring}"
    )
    started = time.perf_counter()
    results: list[tuple[str, dict[str, Measured]]] = []
    with contextlib.ExitStack() as stack:
        upstream = stack.enter_context(_process("upstream"))
        gateway = stack.enter_context(_process("gateway", upstream, args.client_per_request))
        urls = {
            "direct": f"{upstream}chat/completions",
            "gateway": f"{gateway}/v1/chat/completions",
        }
        for stream in (False, True):
            for c in levels:
                label = f"{'streamed' if stream else 'not streamed'}, c={c}"
                m = asyncio.run(
                    measure(urls, stream, c, args.requests, args.rounds, args.one_client)
                )
                results.append((label, m))
    report(results)
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    return 1 if any(m[path].failures for _, m in results for path in PATHS) else 0


if __name__ == "__main__":
    sys.exit(main())
