"""A gateway shared with hostile clients: do honest clients notice them?

``toolwire serve`` (the real command, a process of its own, one worker or ``--workers 2``)
stands before a scripted upstream (a process of its own) that answers every honest request
with one ``get_weather`` call carrying the request's ticket. A thousand honest streams, in
the three APIs in turn, are sent at once, in each of ``--rounds`` rounds twice: alone
(``before``), then with hostile requests of every kind sent at the same moment from a
process of their own (``mixed``); and after the last round alone again (``after``: what the
hostile ones taught must not stay). The hostile kinds are the breaks of a shared gateway:

- ``redos``: a tool whose schema's ``pattern`` is ``^(a+)+$``, and the model (the upstream)
  writing an argument of 28 ``a`` and a ``!`` (Python's ``re``: minutes);
- ``hostname``: an honest-looking pattern, ``^([a-z0-9]+\\.)+[a-z]+$``, against 20,000 ``a``;
- ``calls``: a reply of 10,000 calls;
- ``ref``: a tool schema whose ``$ref`` chain has 1,000 hops;
- ``teach``: an upstream refusal whose text quotes the client's own tool description
  ("does not support tools", "'additionalProperties' is not supported"): it must heal that
  request and teach nothing to the next client's;
- ``steal``: another key's ``previous_response_id``;
- ``flood``: chained continuations of 5 MB each (past the store's history bound: a 400);
- ``body``: a 9 MB body (a 413 the client reads);
- ``malformed``: a Responses request with two tools of one name;
- the requests that cost more than their share, as they were found (hostile_kinds.py says
  each one's size): ``namespaces`` (16,000 namespace tools whose flat names collide),
  ``pattern`` (a 1,201-character pattern of bounded repeats, a 4,000-character argument),
  ``longarg`` (a 403-character one, a 40,000-character argument), ``format`` (the long
  pattern in a ``response_format``), ``fanout`` (1,000 tools whose ``$ref`` fan out to
  63,690 nodes each, 1.25 MB), ``fancount`` (those to ``/v1/messages/count_tokens``),
  ``fancalls`` (a reply of 128 calls to such tools), ``unique`` (3,000 objects under
  ``uniqueItems``), ``stalled`` (four streams whose client never reads, held while the
  honest streams run, the model streaming 4 MB to each), ``cardinality`` (40 requests
  naming random models, then a scrape of ``/metrics``), ``gzip`` (a reply of 1.6 MB that
  decompresses to 1 GB).

Every honest reply is checked whole (its own ticket in its call's id and arguments, the turn
ended for the call: a reply cut, mixed or lost is counted, never dropped), and the upstream
checks that every honest request's tools reach it exactly as the first one's did (a schema
stripped or tools put in words after a hostile lesson is answered with a reply the check
refuses). Printed per mode: honest latency at the median, the 99th percentile and the
maximum of each phase, their ratios to the round's ``before``, the honest requests lost,
wrong or changed; where each phase's CPU went (the gateway's processes, the upstream, the
honest clients, the attackers); whether the median over the rounds of the honest p99 mixed ÷
before stays within 1.3×, beside the same ratio between two phases with no hostile client
(how far one ratio moves on this machine by itself); and each hostile kind's statuses and
slowest answer (a stalled stream's: its status line). The machine is shared and noisy: the
figures are ratios in one run, never assertions.
``--kinds`` sends only some kinds; ``--scale`` shrinks the new kinds' sizes (0.1: a tenth of
the tools, rows, calls and argument characters) for a small run.

    python benchmarks/shared_gateway.py [--honest 1000] [--hostile 50] [--workers 1,2] [--rounds 3]
        [--kinds redos,pattern,...] [--scale 1]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import multiprocessing
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_phases import Where
from gateway_apis import APIS, PATHS, ask, check, path
from hostile_kinds import (
    MARK,
    SENT_ONCE,
    STALLED_BUFFER,
    STALLED_EACH,
    Sizes,
    request,
)
from hostile_kinds import chat_body as _chat
from hostile_kinds import string_schema as _string
from hostile_kinds import tool as _tool
from shared_upstream import upstream

_FIRST = ("redos", "hostname", "calls", "ref", "teach", "steal", "flood", "body", "malformed")
KINDS = (*_FIRST, *SENT_ONCE, "stalled", "cardinality")
#: The honest p99 with hostile clients, at most, as a multiple of the p99 without them.
P99_BOUND = 1.3
KEYS = {
    "honest": "sk-honest-" + secrets.token_hex(12),
    "hostile": "sk-hostile-" + secrets.token_hex(12),
}


@contextlib.contextmanager
def gateway(up: str, workers: int, home: Path) -> Iterator[tuple[str, int]]:
    """``toolwire serve`` as an operator runs it for others: named keys from a file, the
    store in its own home. Its URL and its process group (its workers')."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    keys = home / "keys"
    keys.write_text("".join(f"{name} {key}\n" for name, key in KEYS.items()))
    argv = [
        sys.executable,
        "-m",
        "toolwire",
        "serve",
        "--upstream",
        up + "/v1",
        "--upstream-model",
        "up-model",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--api-keys",
        str(keys),
    ]
    env = {**os.environ, "TOOLWIRE_HOME": str(home), "OPENAI_API_KEY": "unused"}
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"toolwire serve exited: {proc.stderr.read().decode()[-800:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("toolwire serve did not start within 120 s")
            time.sleep(0.2)
        yield url, proc.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


# -- the clients


def _headers(who: str) -> dict[str, str]:
    return {"content-type": "application/json", "authorization": f"Bearer {KEYS[who]}"}


def _ref_chain(hops: int) -> dict[str, Any]:
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(hops)}
    defs[f"d{hops}"] = {"type": "string"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}


@dataclass
class Outcome:
    statuses: collections.Counter[str] = field(default_factory=collections.Counter)
    slowest: float = 0.0


async def _send(
    client: httpx.AsyncClient, url: str, path: str, body: bytes, who: str
) -> tuple[int, bytes, float]:
    start = time.perf_counter()
    async with client.stream("POST", url + path, content=body, headers=_headers(who)) as r:
        data = b"".join([piece async for piece in r.aiter_bytes()])
    return r.status_code, data, time.perf_counter() - start


async def _stalled(url: str, tag: str, done: asyncio.Event) -> tuple[str, float]:
    """A streamed request whose client reads the answer's status line and no more, until
    ``done``: a raw socket with a small receive buffer, so that what the gateway sends
    piles up on its side. Its status, and how long the status line took."""
    host, port = httpx.URL(url).host, httpx.URL(url).port
    body = json.dumps(_chat(tag, [])).encode()
    head = (
        f"POST {PATHS['chat']} HTTP/1.1\r\nhost: {host}:{port}\r\n"
        f"content-type: application/json\r\nauthorization: Bearer {KEYS['hostile']}\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, STALLED_BUFFER)
        sock.setblocking(False)
        start = time.perf_counter()
        await loop.sock_connect(sock, (host, port))
        await loop.sock_sendall(sock, head + body)
        got = b""
        while b"\r\n" not in got:
            piece = await asyncio.wait_for(loop.sock_recv(sock, 64), 300)
            if not piece:
                break
            got += piece
        took = time.perf_counter() - start
        line = got.split(b"\r\n", 1)[0].split()
        status = line[1].decode() if len(line) > 1 and got.startswith(b"HTTP/") else "closed"
        await done.wait()  # never read again while the honest streams run
        return status, took
    finally:
        sock.close()


async def _cardinality(
    client: httpx.AsyncClient, url: str, tag: str, sizes: Sizes
) -> list[tuple[int | str, bytes, float]]:
    """Requests that each name their model with 258 random characters, then a scrape of
    ``/metrics`` (its status written ``metrics <status>``)."""

    async def named() -> tuple[int, bytes, float]:
        body = {**_chat(tag, [], stream=False), "model": "m-" + secrets.token_hex(128)}
        return await _send(client, url, PATHS["chat"], json.dumps(body).encode(), "hostile")

    # one after another: each hostile request's names are its own, and fifty such requests
    # at once are as many streams as the other kinds send (a gather of them all queued
    # thousands in httpx's pool, whose scan of every connection for every queued request
    # then kept this process busy for minutes before the gateway saw them)
    results: list[tuple[int | str, bytes, float]] = [await named() for _ in range(sizes.names_each)]
    start = time.perf_counter()
    r = await client.get(url + "/metrics", headers=_headers("hostile"))
    results.append((f"metrics {r.status_code}", b"", time.perf_counter() - start))
    return results


async def hostile(
    kind: str,
    client: httpx.AsyncClient,
    url: str,
    victim: str,
    out: Outcome,
    sizes: Sizes,
    done: asyncio.Event,
) -> None:
    """One hostile request (``flood``: one chain of continuations; ``stalled``: four
    streams; ``cardinality``: forty requests and a scrape) of ``kind``."""
    tag = MARK + kind
    chat = PATHS["chat"]
    results: list[tuple[int | str, bytes, float]] = []
    try:
        if kind in SENT_ONCE:
            path, data = request(kind, sizes)
            results.append(await _send(client, url, path, data, "hostile"))
        elif kind == "stalled":
            held = [_stalled(url, tag, done) for _ in range(STALLED_EACH)]
            results.extend((status, b"", took) for status, took in await asyncio.gather(*held))
        elif kind == "cardinality":
            results.extend(await _cardinality(client, url, tag, sizes))
        elif kind == "redos":
            body = _chat(tag, [_tool("lookup", _string("q", "^(a+)+$"))])
            results.append(await _send(client, url, chat, json.dumps(body).encode(), "hostile"))
        elif kind == "hostname":
            body = _chat(tag, [_tool("resolve", _string("host", r"^([a-z0-9]+\.)+[a-z]+$"))])
            results.append(await _send(client, url, chat, json.dumps(body).encode(), "hostile"))
        elif kind == "calls":
            body = _chat(tag, [_tool("get_weather", {"type": "object"})])
            results.append(await _send(client, url, chat, json.dumps(body).encode(), "hostile"))
        elif kind == "ref":
            body = _chat(tag, [_tool("deep", _ref_chain(1000))])
            results.append(await _send(client, url, chat, json.dumps(body).encode(), "hostile"))
        elif kind == "teach":
            desc = (
                f"{tag}: this model does not support tools; 'additionalProperties' is not supported"
            )
            body = _chat(
                tag, [_tool("get_weather", {"type": "object", "additionalProperties": False}, desc)]
            )
            results.append(await _send(client, url, chat, json.dumps(body).encode(), "hostile"))
        elif kind == "steal":
            body = {
                "model": "up-model",
                "input": tag,
                "previous_response_id": victim,
                "stream": True,
            }
            results.append(
                await _send(client, url, PATHS["responses"], json.dumps(body).encode(), "hostile")
            )
        elif kind == "flood":
            previous = None
            for _ in range(3):
                body = {
                    "model": "up-model",
                    "input": tag + " " + "x" * (5 * 1024 * 1024),
                    "store": True,
                }
                if previous:
                    body["previous_response_id"] = previous
                status, data, took = await _send(
                    client, url, PATHS["responses"], json.dumps(body).encode(), "hostile"
                )
                results.append((status, data, took))
                if status != 200:
                    break
                previous = json.loads(data)["id"]
        elif kind == "body":
            body = _chat(tag + " " + "x" * (9 * 1024 * 1024), [])
            results.append(await _send(client, url, chat, json.dumps(body).encode(), "hostile"))
        elif kind == "malformed":
            tool = {"type": "function", "name": "twice", "parameters": {"type": "object"}}
            body = {"model": "up-model", "input": tag, "tools": [tool, tool], "stream": True}
            results.append(
                await _send(client, url, PATHS["responses"], json.dumps(body).encode(), "hostile")
            )
    except (httpx.HTTPError, OSError, asyncio.TimeoutError) as exc:
        out.statuses[type(exc).__name__] += 1
        return
    for answered, _, took in results:
        out.statuses[str(answered)] += 1
        out.slowest = max(out.slowest, took)


@dataclass
class Honest:
    latencies: list[float] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    changed: int = 0


def _attackers(
    conn: Connection,
    url: str,
    victim: str,
    per_kind: int,
    keys: dict[str, str],
    kinds: tuple[str, ...],
    sizes: Sizes,
) -> None:
    """The hostile requests, every kind at once, from a process of their own (with the keys
    the gateway was given: this process made its own at import); their outcomes go back
    through ``conn``, once told the honest streams are done (the stalled readers are held
    until then)."""
    KEYS.update(keys)
    # attackers are other machines: on this one, their process takes only the CPU that the
    # gateway, the upstream and the honest clients leave (niced), so what is measured is
    # what the gateway lets them cost others, not the cores their own client takes
    os.nice(19)

    async def attack() -> dict[str, Outcome]:
        # a client (a pool) for each kind: one pool for all, with thousands of requests
        # queued, spends its time scanning its connections, not sending
        limits = httpx.Limits(max_connections=per_kind + 8)
        async with contextlib.AsyncExitStack() as stack:
            clients = {
                kind: await stack.enter_async_context(
                    httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(300.0))
                )
                for kind in kinds
            }
            outcomes = {kind: Outcome() for kind in kinds}
            for kind in kinds:  # the large bodies made before, not while, attacking
                if kind in SENT_ONCE:
                    request(kind, sizes)
            conn.send("ready")
            await asyncio.to_thread(conn.recv)  # go: sent with the mixed honest streams
            done = asyncio.Event()

            async def told() -> None:
                await asyncio.to_thread(conn.recv)  # done: the mixed honest streams ended
                done.set()

            await asyncio.gather(
                told(),
                *(
                    hostile(kind, clients[kind], url, victim, outcomes[kind], sizes, done)
                    for kind in kinds
                    for _ in range(per_kind)
                ),
            )
            return outcomes

    conn.send(asyncio.run(attack()))


async def honest(clients: list[httpx.AsyncClient], url: str, n: int, start: int) -> Honest:
    got = Honest()

    async def one(i: int) -> None:
        api = APIS[i % len(APIS)]
        ticket = f"ticket-{start + i}"
        client = clients[i % len(clients)]
        t0 = time.perf_counter()
        try:
            body, headers = ask(api, ticket, True), _headers("honest")
            async with client.stream(
                "POST", url + path(api, True), content=body, headers=headers
            ) as r:
                data = b"".join([piece async for piece in r.aiter_bytes()])
        except httpx.HTTPError as exc:
            got.lost.append(f"{ticket}: {type(exc).__name__}")
            return
        got.latencies.append(time.perf_counter() - t0)
        why = check(api, True, ticket, r.status_code, data)
        if why is not None:
            got.wrong.append(f"{ticket} ({api}): {why[:160]}")
            got.changed += b"CHANGED" in data

    await asyncio.gather(*(one(i) for i in range(n)))
    return got


async def victim_response(client: httpx.AsyncClient, url: str) -> str:
    body = {"model": "up-model", "input": "hostile-victim: remember my secret", "store": True}
    r = await client.post(
        url + PATHS["responses"], content=json.dumps(body), headers=_headers("honest")
    )
    r.raise_for_status()
    return str(r.json()["id"])


def _stats(values: list[float]) -> tuple[float, float, float]:
    if not values:
        return (float("nan"),) * 3
    ordered = sorted(values)
    return statistics.median(ordered), ordered[int(0.99 * (len(ordered) - 1))], ordered[-1]


async def _round(
    clients: list[httpx.AsyncClient],
    url: str,
    victim: str,
    n: int,
    first: int,
    per_kind: int,
    kinds: tuple[str, ...],
    sizes: Sizes,
    where: Where,
) -> tuple[Honest, Honest, dict[str, Outcome]]:
    """One round: the honest streams alone (``before``), then with every hostile kind
    (``mixed``); the hostile requests' outcomes."""
    # the hostile clients are a process of their own, as attackers are other machines:
    # what they cost their own client is not counted against the honest ones; started
    # first, so that the honest connections are not left idle while it starts
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    attackers = ctx.Process(
        target=_attackers, args=(theirs, url, victim, per_kind, dict(KEYS), kinds, sizes)
    )
    attackers.start()
    await asyncio.to_thread(ours.recv)  # ready: its client made
    assert attackers.pid is not None
    where.attackers = attackers.pid
    where.mark()
    before = await honest(clients, url, n, first)
    where.mark()
    ours.send("go")
    mixed = await honest(clients, url, n, first + n)
    where.mark()
    ours.send("done")
    outcomes = await asyncio.to_thread(ours.recv)
    attackers.join()
    where.attackers = 0
    where.mark()  # the attackers' own CPU is theirs (not counted after they exit)
    return before, mixed, outcomes


def _line(name: str, got: Honest, base: tuple[float, float, float]) -> None:
    s = _stats(got.latencies)
    ratios = "  ".join(f"{a / b:4.2f}" for a, b in zip(s, base, strict=True))
    print(
        f"  {name:<28} {s[0]:6.3f}  {s[1]:6.3f}  {s[2]:6.3f}  {ratios}  {len(got.lost):4d} "
        f"{len(got.wrong):5d} {got.changed:7d}"
    )
    for line in (got.lost + got.wrong)[:3]:
        print(f"      {line}")


async def run_mode(
    url: str,
    n: int,
    per_kind: int,
    kinds: tuple[str, ...],
    sizes: Sizes,
    where: Where,
    rounds: int,
) -> None:
    limits = httpx.Limits(max_connections=40, max_keepalive_connections=40)
    timeout = httpx.Timeout(300.0)
    clients = [httpx.AsyncClient(limits=limits, timeout=timeout) for _ in range(max(1, n // 20))]
    hostile_client = httpx.AsyncClient(limits=httpx.Limits(max_connections=600), timeout=timeout)
    played: list[tuple[Honest, Honest, dict[str, Outcome]]] = []
    try:
        await honest(clients[:2], url, 30, 10_000_000)  # warm-up (and the upstream's reference)
        victim = await victim_response(hostile_client, url)
        for r in range(rounds):
            played.append(
                await _round(clients, url, victim, n, 2 * r * n, per_kind, kinds, sizes, where)
            )
        after = await honest(clients, url, n, 2 * rounds * n)
        where.mark()
    finally:
        for c in [*clients, hostile_client]:
            await c.aclose()
    print(
        f"  honest streams ({n} at once)   p50 s   p99 s   max s   ×p50  ×p99  ×max"
        "  lost wrong changed"
    )
    ratios = []
    for r, (before, mixed, _) in enumerate(played):
        base = _stats(before.latencies)
        _line(f"round {r + 1}: before", before, base)
        _line(f"round {r + 1}: mixed", mixed, base)
        ratios.append(_stats(mixed.latencies)[1] / base[1])
    last = _stats(played[-1][0].latencies)
    _line("after (÷ the last before)", after, last)
    for r in range(rounds):
        print(f"  round {r + 1} before  {where.spent(4 * r)}")  # four marks a round
        print(f"  round {r + 1} mixed   {where.spent(4 * r + 1)}")
    print(f"  after           {where.spent(4 * rounds - 1)}")
    ratio = statistics.median(ratios)
    quiet = _stats(after.latencies)[1] / last[1]
    bound = "within" if ratio <= P99_BOUND else "PAST"
    each = ", ".join(f"{x:.2f}" for x in ratios)
    print(
        f"  honest p99 mixed ÷ before, by round: {each}; median {ratio:.2f}×: {bound} the "
        f"bound of {P99_BOUND}×"
    )
    print(
        f"  the same ratio between two phases with no hostile client (after ÷ the last "
        f"before): {quiet:.2f}× (how far one ratio moves on this machine by itself)"
    )
    print(f"  hostile requests ({per_kind} of each kind, in each round's mixed phase)")
    for kind in played[0][2]:
        statuses: collections.Counter[str] = collections.Counter()
        for _, _, outcomes in played:
            statuses.update(outcomes[kind].statuses)
        slowest = max(outcomes[kind].slowest for _, _, outcomes in played)
        listed = ", ".join(f"{s}×{c}" for s, c in sorted(statuses.items()))
        print(f"    {kind:<12} {listed:<34} slowest {slowest:6.2f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--honest", type=int, default=1000)
    parser.add_argument("--hostile", type=int, default=50, help="requests of each hostile kind")
    parser.add_argument("--workers", default="1,2", help="the gateway's processes, one run each")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="before/mixed rounds per run; the bound is judged on the median ratio (3)",
    )
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help=f"the hostile kinds sent (of {','.join(KINDS)})"
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="the sizes of the kinds of hostile_kinds.py, as a share of those found (1)",
    )
    args = parser.parse_args()
    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not args.scale > 0:
        parser.error(f"no such kind: {', '.join(unknown)}" if unknown else "--scale must be > 0")
    sizes = Sizes(args.scale)
    with upstream(sizes, kinds) as (up, up_pid):
        for workers in (int(w) for w in args.workers.split(",")):
            with (
                tempfile.TemporaryDirectory() as home,
                gateway(up, workers, Path(home)) as (url, group),
            ):
                print(f"toolwire serve --workers {workers}")
                where = Where(group, up_pid)
                asyncio.run(
                    run_mode(url, args.honest, args.hostile, kinds, sizes, where, args.rounds)
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
