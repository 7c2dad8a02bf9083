"""The scripted upstream of ``benchmarks/shared_gateway.py``, a process of its own: each
honest request gets its ticketed ``get_weather`` call (and a reply the honest client's check
refuses when its tools did not arrive as the first honest request's did); each hostile kind
what attacks (:mod:`hostile_kinds`)."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import threading
import time
from collections.abc import AsyncIterator, Iterator
from multiprocessing.connection import Connection
from typing import Any

from gateway_apis import arguments, call_id
from gateway_servers import TICKET
from hostile_kinds import MARK, Reply, Sizes, bomb, calls_reply, hostile_reply, text_reply

# -- the upstream: honest requests get their ticketed call; hostile ones what attacks


_MANY = calls_reply([(f"call_{i}", "get_weather", '{"city": "x"}') for i in range(10_000)])


class Upstream:
    """The scripted model. ``first`` is the first honest request's tools as they arrived;
    ``gzipped`` the bomb a ``gzip`` request is answered with (made before it serves)."""

    def __init__(self, sizes: Sizes, gzipped: bytes = b"") -> None:
        self.first: str | None = None
        self.sizes = sizes
        self.gzipped = gzipped

    def reply(self, body: dict[str, Any]) -> Reply:
        status, data = self._scripted(body)
        if isinstance(data, Reply):
            return data
        kind = "text/event-stream" if status == 200 else "application/json"
        return Reply(status, data, {"content-type": kind})

    def _scripted(self, body: dict[str, Any]) -> tuple[int, bytes | Reply]:
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
            return 200, text_reply("healed")
        if MARK + "redos" in said:
            return 200, calls_reply([("call_r", "lookup", json.dumps({"q": "a" * 28 + "!"}))])
        if MARK + "hostname" in said:
            return 200, calls_reply([("call_h", "resolve", json.dumps({"host": "a" * 20_000}))])
        if MARK + "calls" in said:
            return 200, _MANY
        if MARK in said:
            attack = hostile_reply(body, said, self.sizes, self.gzipped)
            return (200, attack) if attack is not None else (200, text_reply("ok"))
        found = TICKET.search(said)
        ticket = found.group(0) if found else "ticket-none"
        tools = json.dumps(body.get("tools"), sort_keys=True)
        if self.first is None:
            self.first = tools
        if tools != self.first or "get_weather" in json.dumps(body.get("messages")[:1]):
            return 200, text_reply(f"CHANGED: the tools of {ticket} did not arrive as sent")
        return 200, calls_reply([(call_id(ticket), "get_weather", json.dumps(arguments(ticket)))])


def _upstream_process(conn: Connection, sizes: Sizes, kinds: tuple[str, ...]) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    upstream = Upstream(sizes, bomb(sizes.bomb) if "gzip" in kinds else b"")

    async def chat(request: Request) -> Response:
        answer = upstream.reply(json.loads(await request.body()))
        if isinstance(answer.body, bytes):
            return Response(answer.body, status_code=answer.status, headers=answer.headers)
        parts = answer.body

        async def sent() -> AsyncIterator[bytes]:
            for part in parts:  # each awaited as it is sent: a reader that stalls stalls it
                yield part

        return StreamingResponse(sent(), status_code=answer.status, headers=answer.headers)

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
def upstream(sizes: Sizes, kinds: tuple[str, ...]) -> Iterator[tuple[str, int]]:
    """The upstream's URL and its process id."""
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    proc = ctx.Process(target=_upstream_process, args=(theirs, sizes, kinds), daemon=True)
    proc.start()
    try:
        if not ours.poll(120):  # the gzip bomb takes some seconds to make
            raise RuntimeError("the upstream did not start")
        assert proc.pid is not None
        yield str(ours.recv()), proc.pid
    finally:
        with contextlib.suppress(OSError):
            ours.send("stop")
        proc.join(10)
        if proc.is_alive():
            proc.terminate()
