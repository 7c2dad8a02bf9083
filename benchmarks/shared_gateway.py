"""A gateway shared with hostile clients: do honest clients notice them?

``toolwire serve`` (the real command, a process of its own, one worker or ``--workers 2``)
stands before a scripted upstream (a process of its own) that answers every honest request
with one ``get_weather`` call carrying the request's ticket. A thousand honest streams, in
the three APIs in turn, are sent at once, three times: alone (``before``), with hostile
requests of every kind sent at the same moment from a process of their own (``mixed``), and
alone again (``after``: what the hostile ones taught must not stay). The hostile kinds are
the breaks of a shared gateway:

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
- ``malformed``: a Responses request with two tools of one name.

Every honest reply is checked whole (its own ticket in its call's id and arguments, the turn
ended for the call: a reply cut, mixed or lost is counted, never dropped), and the upstream
checks that every honest request's tools reach it exactly as the first one's did (a schema
stripped or tools put in words after a hostile lesson is answered with a reply the check
refuses). Printed per mode: honest latency at the median, the 99th percentile and the
maximum, before, mixed and after, their ratios to ``before``, the honest requests lost,
wrong or changed, and each hostile kind's statuses and slowest answer. The machine is shared
and noisy: the figures are ratios in one run, never assertions.

    python benchmarks/shared_gateway.py [--honest 1000] [--hostile 50] [--workers 1,2]
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
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway_apis import APIS, PATHS, arguments, ask, call_id, check
from gateway_servers import TICKET

KINDS = ("redos", "hostname", "calls", "ref", "teach", "steal", "flood", "body", "malformed")
KEYS = {
    "honest": "sk-honest-" + secrets.token_hex(12),
    "hostile": "sk-hostile-" + secrets.token_hex(12),
}
MARK = "hostile-"


# -- the upstream: honest requests get their ticketed call; hostile ones what attacks


def _sse(chunks: list[dict[str, Any]]) -> bytes:
    return (
        b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    )


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-up",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "up-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _calls(calls: list[tuple[str, str, str]]) -> bytes:
    """A streamed reply of whole calls (id, name, arguments), one delta each."""
    deltas = [
        _chunk(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "index": i,
                        "id": cid,
                        "type": "function",
                        "function": {"name": name, "arguments": args},
                    }
                ],
            }
        )
        for i, (cid, name, args) in enumerate(calls)
    ]
    usage = {**_chunk({}, "tool_calls"), "usage": {"prompt_tokens": 9, "completion_tokens": 9}}
    return _sse([*deltas, usage])


def _text(text: str) -> bytes:
    return _sse([_chunk({"role": "assistant", "content": text}), _chunk({}, "stop")])


_MANY = _calls([(f"call_{i}", "get_weather", '{"city": "x"}') for i in range(10_000)])


class Upstream:
    """The scripted model. ``first`` is the first honest request's tools as they arrived."""

    def __init__(self) -> None:
        self.first: str | None = None

    def reply(self, body: dict[str, Any]) -> tuple[int, bytes]:
        last = body.get("messages", [{}])[-1]
        said = json.dumps(last.get("content"))
        if MARK + "teach" in json.dumps(body.get("tools", "")) or MARK + "teach" in said:
            if body.get("tools"):
                quoted = json.dumps(body["tools"])[:300]
                msg = (
                    "this model does not support tools; 'additionalProperties' is not "
                    f"supported: {quoted}"
                )
                return 400, json.dumps(
                    {"error": {"message": msg, "type": "invalid_request_error"}}
                ).encode()
            return 200, _text("healed")
        if MARK + "redos" in said:
            return 200, _calls([("call_r", "lookup", json.dumps({"q": "a" * 28 + "!"}))])
        if MARK + "hostname" in said:
            return 200, _calls([("call_h", "resolve", json.dumps({"host": "a" * 20_000}))])
        if MARK + "calls" in said:
            return 200, _MANY
        if MARK in said:
            return 200, _text("ok")
        found = TICKET.search(said)
        ticket = found.group(0) if found else "ticket-none"
        tools = json.dumps(body.get("tools"), sort_keys=True)
        if self.first is None:
            self.first = tools
        if tools != self.first or "get_weather" in json.dumps(body.get("messages")[:1]):
            return 200, _text(f"CHANGED: the tools of {ticket} did not arrive as sent")
        return 200, _calls([(call_id(ticket), "get_weather", json.dumps(arguments(ticket)))])


def _upstream_process(conn: Connection) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    upstream = Upstream()

    async def chat(request: Request) -> Response:
        status, data = upstream.reply(json.loads(await request.body()))
        kind = "text/event-stream" if status == 200 else "application/json"
        return Response(data, status_code=status, media_type=kind)

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", timeout_keep_alive=60
    )
    server = uvicorn.Server(config)

    def tell() -> None:
        while not server.started:
            time.sleep(0.01)
        conn.send(f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}")
        conn.recv()
        server.should_exit = True

    threading.Thread(target=tell, daemon=True).start()
    server.run()


@contextlib.contextmanager
def upstream() -> Iterator[str]:
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    proc = ctx.Process(target=_upstream_process, args=(theirs,), daemon=True)
    proc.start()
    try:
        if not ours.poll(60):
            raise RuntimeError("the upstream did not start")
        yield str(ours.recv())
    finally:
        with contextlib.suppress(OSError):
            ours.send("stop")
        proc.join(10)
        if proc.is_alive():
            proc.terminate()


@contextlib.contextmanager
def gateway(up: str, workers: int, home: Path) -> Iterator[str]:
    """``toolwire serve`` as an operator runs it for others: named keys from a file, the
    store in its own home."""
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
        yield url
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


def _chat(text: str, tools: list[dict[str, Any]], stream: bool = True) -> dict[str, Any]:
    return {
        "model": "up-model",
        "stream": stream,
        "tools": tools,
        "messages": [{"role": "user", "content": text}],
    }


def _tool(name: str, parameters: dict[str, Any], description: str = "") -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def _string(field_name: str, pattern: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {field_name: {"type": "string", "pattern": pattern}},
        "required": [field_name],
    }


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


async def hostile(
    kind: str, client: httpx.AsyncClient, url: str, victim: str, out: Outcome
) -> None:
    """One hostile request (``flood``: one chain of continuations) of ``kind``."""
    tag = MARK + kind
    chat = PATHS["chat"]
    results: list[tuple[int, bytes, float]] = []
    try:
        if kind == "redos":
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
    except httpx.HTTPError as exc:
        out.statuses[type(exc).__name__] += 1
        return
    for status, _, took in results:
        out.statuses[str(status)] += 1
        out.slowest = max(out.slowest, took)


@dataclass
class Honest:
    latencies: list[float] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    changed: int = 0


def _attackers(
    conn: Connection, url: str, victim: str, per_kind: int, keys: dict[str, str]
) -> None:
    """The hostile requests, every kind at once, from a process of their own (with the keys
    the gateway was given: this process made its own at import); their outcomes go back
    through ``conn``."""
    KEYS.update(keys)

    async def attack() -> dict[str, Outcome]:
        limits = httpx.Limits(max_connections=600)
        async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(300.0)) as client:
            outcomes = {kind: Outcome() for kind in KINDS}
            conn.send("ready")
            await asyncio.to_thread(conn.recv)  # go: sent with the mixed honest streams
            await asyncio.gather(
                *(
                    hostile(kind, client, url, victim, outcomes[kind])
                    for kind in KINDS
                    for _ in range(per_kind)
                )
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
            async with client.stream(
                "POST", url + PATHS[api], content=ask(api, ticket, True), headers=_headers("honest")
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


async def run_mode(url: str, n: int, per_kind: int) -> None:
    limits = httpx.Limits(max_connections=40, max_keepalive_connections=40)
    timeout = httpx.Timeout(300.0)
    clients = [httpx.AsyncClient(limits=limits, timeout=timeout) for _ in range(max(1, n // 20))]
    hostile_client = httpx.AsyncClient(limits=httpx.Limits(max_connections=600), timeout=timeout)
    try:
        await honest(clients[:2], url, 30, 10_000_000)  # warm-up (and the upstream's reference)
        victim = await victim_response(hostile_client, url)
        # the hostile clients are a process of their own, as attackers are other machines:
        # what they cost their own client is not counted against the honest ones; started
        # first, so that the honest connections are not left idle while it starts
        ctx = multiprocessing.get_context("spawn")
        ours, theirs = ctx.Pipe()
        attackers = ctx.Process(target=_attackers, args=(theirs, url, victim, per_kind, dict(KEYS)))
        attackers.start()
        await asyncio.to_thread(ours.recv)  # ready: its client made
        before = await honest(clients, url, n, 0)
        ours.send("go")
        mixed = await honest(clients, url, n, n)
        outcomes = await asyncio.to_thread(ours.recv)
        attackers.join()
        after = await honest(clients, url, n, 2 * n)
    finally:
        for c in [*clients, hostile_client]:
            await c.aclose()
    base = _stats(before.latencies)
    print(
        f"  honest streams ({n} at once)   p50 s   p99 s   max s   ×p50  ×p99  ×max"
        "  lost wrong changed"
    )
    for name, got in (("before", before), ("mixed", mixed), ("after", after)):
        s = _stats(got.latencies)
        ratios = "  ".join(f"{a / b:4.2f}" for a, b in zip(s, base, strict=True))
        print(
            f"  {name:<28} {s[0]:6.3f}  {s[1]:6.3f}  {s[2]:6.3f}  {ratios}  {len(got.lost):4d} "
            f"{len(got.wrong):5d} {got.changed:7d}"
        )
        for line in (got.lost + got.wrong)[:3]:
            print(f"      {line}")
    print(f"  hostile requests ({per_kind} of each kind, sent with the mixed streams)")
    for kind, out in outcomes.items():
        statuses = ", ".join(f"{s}×{c}" for s, c in sorted(out.statuses.items()))
        print(f"    {kind:<10} {statuses:<34} slowest {out.slowest:6.2f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--honest", type=int, default=1000)
    parser.add_argument("--hostile", type=int, default=50, help="requests of each hostile kind")
    parser.add_argument("--workers", default="1,2", help="the gateway's processes, one run each")
    args = parser.parse_args()
    with upstream() as up:
        for workers in (int(w) for w in args.workers.split(",")):
            with tempfile.TemporaryDirectory() as home, gateway(up, workers, Path(home)) as url:
                print(f"toolwire serve --workers {workers}")
                asyncio.run(run_mode(url, args.honest, args.hostile))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
