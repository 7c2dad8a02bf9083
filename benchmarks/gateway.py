"""What the gateway adds to a request: latency, throughput, CPU and memory, beside going direct.

A fake OpenAI-compatible upstream on 127.0.0.1 answers every request with one tool call
(``get_weather``, its arguments arriving in pieces, as providers stream them, or whole when
not streamed). The same question, with one tool, is sent straight to the upstream (its Chat
Completions: ``direct``) or to the gateway in front of it in each API the gateway speaks
(``gw chat``, ``gw responses``, ``gw messages``, ``gw gemini``: see gateway_apis.py), which
does its real work on every reply: it assembles the call, reads and types its arguments and
writes the client's API. Optionally LiteLLM's proxy stands beside it (``litellm chat``, one
worker, no database; ``--litellm COMMAND``, or found on PATH), so that the comparison with
the gateway people would pick instead is measured in the same run. Conditions: not streamed
and streamed (read to the last byte), at concurrency 1 and 32 (workers, each sending its
next request when its last reply has ended), and any other levels given with
``--concurrency`` (``--concurrency 1000``: a thousand streams at once, one request per
worker, each round).

Every request carries a ticket of its own, which the upstream writes into the call's id and
its ``city`` argument; every reply is checked in its API's shape (status 200; one
``get_weather`` call carrying the request's own ticket and the arguments sent, the turn ended
for the call; a stream ends with its last event), so a reply that reached the wrong client,
or that was cut or mixed with another, is counted and shown, never dropped.

Printed per condition and path: latency at the median and the 99th percentile and their
ratio, requests per second, the serving process's CPU per request (the upstream's when
direct, the gateway's own through the gateway, LiteLLM's with its children; user + system
time from ``/proc/<pid>/stat``), its peak resident memory so far (``VmHWM``), failures; then
what each path adds to direct (milliseconds at p50 and p99), the ratios to direct, and its
CPU per request against the gateway's in Chat Completions (the cost of each API beside it).
Each server's start-up time is printed first.

The machine is shared and noisy, so the figures are ratios measured in one run, never
assertions, and the paths alternate: each round runs one batch per path, the order turning
each round, after a warm-up of all. Percentiles come from all rounds' requests pooled (all
pools span the same stretch of time); requests per second is the median of the rounds, CPU
per request the total over the rounds, and the spread of the per-round p50 ratio is shown as
a measure of the noise.

Each worker sends from an ``httpx.AsyncClient`` of its own that keeps one connection alive.
One pooled client for all workers would measure the client: httpx's pool scans every
connection for every queued request, so at 32 its own work grows to several milliseconds a
request and caps the direct path at a few hundred requests a second on two cores, hiding the
gateway's cost in the baseline. ``--one-client`` sends from one pooled client instead.

The upstream and the gateway each run in a process of their own, as they would in use: in
one process they would share one interpreter lock with each other and with the client, and
the contention would be counted as overhead. The gateway is wired and served as ``toolwire
serve --upstream`` does it: one pooled client (:func:`toolwire.backends.http.new_client`)
for as long as it serves, and uvicorn with the settings of
:func:`toolwire.server.uvicorn_settings` (uvloop and httptools where installed, with the
slow-client guards; ``--slow-server``: h11 and asyncio's loop, for both servers).
``--client-per-request`` injects no client, so the backend makes one per request, as a
library caller who hands in none gets.

Both servers keep idle connections for a minute. With uvicorn's 5 s, a thousand streams on two
shared cores lose a few percent of their requests to resets that measure the machine, not
the gateway: a client starved of CPU reads the end of a reply seconds after it was sent, so
its connection stays alive to it for seconds after the server's 5 s have run out, and a
request it sends then meets a server closing that connection. (A gateway in use meets the
same race with an upstream that keeps connections as briefly, under as much load.)

``--http STACK[,STACK...]`` picks the gateway's upstream HTTP stack (gateway_stacks.py: ``pool``,
toolwire's own, as serve uses it; ``httpx``, httpx's own transport, tuned; ``aiohttp``,
aiohttp's client under httpx): with several, each has a gateway process of its own, measured
in the same alternating rounds (a path ``gw chat httpx``), so that the stacks are compared
under the same noise.

``--profile FILE`` runs the gateway under cProfile and writes its stats to FILE when it stops
(FILE.STACK for each of several stacks). The servers and what is read of their processes are
in gateway_servers.py.

    python benchmarks/gateway.py [--requests 150] [--rounds 5] [--quick]
                                 [--concurrency 1000] [--only] [--apis chat,responses,messages]
                                 [--litellm COMMAND | --no-litellm] [--one-client]
                                 [--streamed-only] [--client-per-request] [--slow-server]
                                 [--http pool,httpx,aiohttp] [--profile FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import os
import platform
import shutil
import ssl
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from toolwire.server import uvicorn_settings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway_apis import APIS, ask, check
from gateway_apis import path as api_path
from gateway_servers import Server, cpu_seconds, litellm_proxy, peak_rss_mb, serving
from gateway_stacks import STACKS

_tickets = itertools.count()


# -- sending


@dataclass(frozen=True)
class Path:
    """Where a batch goes: ``direct`` (the upstream's own chat completions) or the gateway
    in one of its APIs."""

    name: str
    api: str
    server: str  # "direct", "litellm" or a gateway's: "gateway <its HTTP stack>"


def paths_for(apis: Sequence[str], litellm: bool, stacks: Sequence[str]) -> list[Path]:
    """The upstream direct, then each gateway (one per HTTP stack) in each API, then
    LiteLLM's proxy. A gateway's path names its stack when there are several."""
    paths = [Path("direct", "chat", "direct")]
    for stack in stacks:
        shown = f" {stack}" if len(stacks) > 1 else ""
        paths += [Path(f"gw {a}{shown}", a, f"gateway {stack}") for a in apis]
    return paths + ([Path("litellm chat", "chat", "litellm")] if litellm else [])


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
    clients: Sequence[httpx.AsyncClient], server: Server, api: str, stream: bool, n: int
) -> Batch:
    """``n`` requests in ``api``'s shape from one worker per client (the same client may be
    given more than once), each with a ticket of its own; replies are checked after the
    clock stops."""
    latencies: list[float] = []
    replies: list[tuple[str, int, bytes]] = []
    failures: list[str] = []
    left = n

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal left
        while left > 0:
            left -= 1
            ticket = f"ticket-{next(_tickets)}"
            url, headers = server.url + api_path(api, stream), server.headers
            body = ask(api, ticket, stream)
            start = time.perf_counter()
            try:
                if stream:
                    async with client.stream("POST", url, content=body, headers=headers) as r:
                        data = b"".join([piece async for piece in r.aiter_bytes()])
                else:
                    r = await client.post(url, content=body, headers=headers)
                    data = r.content
            except httpx.HTTPError as exc:
                failures.append(f"{type(exc).__name__}: {exc}")
                continue
            latencies.append(time.perf_counter() - start)
            replies.append((ticket, r.status_code, data))

    cpu = cpu_seconds(server.pid)
    start = time.perf_counter()
    await asyncio.gather(*(worker(client) for client in clients))
    seconds = time.perf_counter() - start
    cpu = cpu_seconds(server.pid) - cpu
    failures.extend(why for t, s, d in replies if (why := check(api, stream, t, s, d)) is not None)
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
    #: The gateway's own time per request (see :class:`Inside`), in seconds.
    inside: list[float] = field(default_factory=list)

    def inside_ms(self, q: int) -> float:
        if len(self.inside) < 2:
            return float("nan")
        return statistics.quantiles(self.inside, n=100, method="inclusive")[q - 1] * 1e3

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
    paths: Sequence[Path],
    stream: bool,
    concurrency: int,
    n: int,
    rounds: int,
    one_client: bool,
) -> dict[str, Measured]:
    """Rounds of one batch per path, the order turning each round."""
    out = {path.name: Measured() for path in paths}
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

        def run(path: Path, count: int) -> Any:
            return batch(clients, servers[path.server], path.api, stream, count)

        for path in paths:  # warm-up: connections, imports, caches; checked, not timed
            n_warm = concurrency if concurrency > MANY else max(2 * concurrency, 10)
            warm = await run(path, n_warm)
            out[path.name].failures.extend(f"(warm-up) {why}" for why in warm.failures)
        for name, server in servers.items():  # the warm-up's times: not kept
            if name.startswith("gateway"):
                await clients[0].get(server.url + "/_bench/inside")
        for r in range(rounds):
            turned = list(paths[r % len(paths) :]) + list(paths[: r % len(paths)])
            for path in turned if r % 2 == 0 else turned[::-1]:
                out[path.name].add(await run(path, n))
                if path.server.startswith("gateway"):
                    own = await clients[0].get(servers[path.server].url + "/_bench/inside")
                    out[path.name].inside.extend(own.json())
    for path in paths:
        out[path.name].peak_mb = peak_rss_mb(servers[path.server].pid)
    return out


# -- reporting


def report(results: list[tuple[str, dict[str, Measured]]], paths: Sequence[Path]) -> None:
    print(
        f"\n{'condition':<20} {'path':<18} {'p50 ms':>8} {'p99 ms':>8} {'p99/p50':>7} "
        f"{'req/s':>8} {'CPU ms/req':>10} {'peak MB':>8} {'failed':>7}"
    )
    for label, m in results:
        for i, path in enumerate(paths):
            x = m[path.name]
            print(
                f"{label if i == 0 else '':<20} {path.name:<18} {x.p(50):8.2f} {x.p(99):8.2f} "
                f"{x.p(99) / x.p(50):7.2f} {x.rate:8.1f} {x.cpu_ms:10.2f} {x.peak_mb:8.1f} "
                f"{len(x.failures):7d}"
            )
    print(
        f"\n{'gateway vs direct':<20} {'path':<18} {'+p50 ms':>8} {'+p99 ms':>8} {'p50 x':>7} "
        f"{'p99 x':>7} {'req/s x':>8} {'CPU/1st chat':>12}   {'p50 x per round':>15}"
    )
    for label, m in results:
        d = m["direct"]
        chat = next(
            (m[p.name] for p in paths if p.api == "chat" and p.server.startswith("gateway")), None
        )
        for i, path in enumerate(paths[1:]):
            g = m[path.name]
            per_round = [gp / dp for gp, dp in zip(g.p50s, d.p50s, strict=True)]
            spread = f"{min(per_round):.2f}-{max(per_round):.2f}" if per_round else "-"
            versus = f"{g.cpu_ms / chat.cpu_ms:12.2f}" if chat is not None else f"{'-':>12}"
            print(
                f"{label if i == 0 else '':<20} {path.name:<18} {g.p(50) - d.p(50):8.2f} "
                f"{g.p(99) - d.p(99):8.2f} {g.p(50) / d.p(50):7.2f} {g.p(99) / d.p(99):7.2f} "
                f"{g.rate / d.rate:8.2f} {versus}   {spread:>15}"
            )
    print(
        f"\n{'inside the gateway':<20} {'path':<18} {'p50 ms':>8} {'p99 ms':>8} {'p99/p50':>7}"
        "   (from the app's first look to its last byte, the upstream's reply included)"
    )
    for label, m in results:
        for i, path in enumerate(p for p in paths if p.server.startswith("gateway")):
            x = m[path.name]
            print(
                f"{label if i == 0 else '':<20} {path.name:<18} {x.inside_ms(50):8.2f} "
                f"{x.inside_ms(99):8.2f} {x.inside_ms(99) / x.inside_ms(50):7.2f}"
            )
    failed = [(label, p.name, m[p.name].failures) for label, m in results for p in paths]
    if any(f for _, _, f in failed):
        print("\nFAILURES (figures above are suspect):")
        for label, name, failures in failed:
            if failures:
                mixed = sum("MIXED" in f for f in failures)
                print(f"  {label}, {name}: {len(failures)} ({mixed} mixed); first: {failures[0]}")


#: Above this concurrency a round is one request per worker, and there are at most two.
MANY = 100


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=150, help="per path, per round (150)")
    p.add_argument("--rounds", type=int, default=5, help="rounds (5)")
    p.add_argument(
        "--concurrency",
        default="",
        help="comma-separated levels run besides 1 and 32, e.g. 1000 (a round is then one "
        f"request per worker; above {MANY}, at most two rounds)",
    )
    p.add_argument("--only", action="store_true", help="run only the --concurrency levels")
    p.add_argument(
        "--apis",
        default=",".join(APIS),
        help=f"the gateway's APIs to measure, comma-separated ({','.join(APIS)})",
    )
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
    p.add_argument(
        "--slow-server",
        action="store_true",
        help="serve on h11 and asyncio's loop even where uvloop and httptools are installed",
    )
    p.add_argument(
        "--litellm",
        metavar="COMMAND",
        default=shutil.which("litellm") or "",
        help="LiteLLM's proxy command (litellm[proxy], best in a virtualenv of its own), "
        "measured beside the gateway in Chat Completions; found on PATH by default",
    )
    p.add_argument("--no-litellm", action="store_true", help="leave LiteLLM's proxy out")
    p.add_argument("--profile", metavar="FILE", default="", help="cProfile the gateway to FILE")
    p.add_argument("--streamed-only", action="store_true", help="skip the non-streamed runs")
    p.add_argument(
        "--http",
        default=STACKS[0],
        help="the gateway's upstream HTTP stack, or several, comma-separated, each measured "
        f"through a gateway of its own in the same rounds ({', '.join(STACKS)}; see "
        f"gateway_stacks.py; default {STACKS[0]}, as `toolwire serve`)",
    )
    args = p.parse_args()
    if args.quick:
        args.requests, args.rounds = 40, 2
    apis = [a.strip() for a in args.apis.split(",") if a.strip()]
    if not apis or any(a not in APIS for a in apis):
        p.error(f"--apis takes some of {', '.join(APIS)}")
    stacks = [s.strip() for s in args.http.split(",") if s.strip()]
    if not stacks or any(s not in STACKS for s in stacks) or len(set(stacks)) < len(stacks):
        p.error(f"--http takes some of {', '.join(STACKS)}")
    litellm = "" if args.no_litellm else args.litellm
    paths = paths_for(apis, bool(litellm), stacks)
    given = [int(c) for c in args.concurrency.split(",") if c.strip()]
    levels = sorted(set(given) if args.only else {1, 32, *given})
    wiring = "a client per request" if args.client_per_request else "as `toolwire serve`"
    sender = "one pooled client" if args.one_client else "one client (one connection) per worker"
    server = uvicorn_settings(fast=False if args.slow_server else None)
    print(
        f"python {platform.python_version()}, {os.cpu_count()} cpus, httpx {httpx.__version__}; "
        f"{args.requests} requests x {args.rounds} rounds per path and condition "
        f"(above concurrency {MANY}: one per worker, at most 2 rounds)"
    )
    print(f"sent from {sender}; gateway's upstream client: {wiring}, on {', '.join(stacks)}")
    protocol = server["http"]
    named = protocol if isinstance(protocol, str) else protocol.__name__
    print(f"servers: {named.rsplit(':', 1)[-1]} on the {server['loop']} loop")
    started = time.perf_counter()
    # the measuring client's own collector pauses would count in every path's tail
    gc.collect()
    gc.freeze()
    results: list[tuple[str, dict[str, Measured]]] = []
    fast = not args.slow_server
    with contextlib.ExitStack() as stack:
        upstream = stack.enter_context(serving("upstream", fast=fast))
        servers = {"direct": upstream}
        for http in stacks:
            profile = (
                args.profile if len(stacks) == 1 else args.profile and f"{args.profile}.{http}"
            )
            servers[f"gateway {http}"] = stack.enter_context(
                serving("gateway", upstream.url, args.client_per_request, profile, fast, http)
            )
        if litellm:
            servers["litellm"] = stack.enter_context(litellm_proxy(litellm, upstream.url))
        print(
            "started in: "
            + ", ".join(f"{name} {server.started:.1f} s" for name, server in servers.items()),
            flush=True,
        )
        # by concurrency, then streamed or not: the peak memory grows with the load
        for c in levels:
            for stream in (True,) if args.streamed_only else (False, True):
                n, rounds = (c, min(args.rounds, 2)) if c > MANY else (args.requests, args.rounds)
                label = f"{'streamed' if stream else 'not streamed'}, c={c}"
                m = asyncio.run(measure(servers, paths, stream, c, n, rounds, args.one_client))
                results.append((label, m))
                shown = ", ".join(f"{p.name} {m[p.name].cpu_ms:.2f}" for p in paths[1:])
                failed = sum(len(m[p.name].failures) for p in paths)
                print(f"  {label}: CPU ms/req {shown}; {failed} failed", flush=True)
    report(results, paths)
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    return 1 if any(m[p.name].failures for _, m in results for p in paths) else 0


if __name__ == "__main__":
    sys.exit(main())
