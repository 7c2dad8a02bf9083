"""A paced OpenAI-compatible upstream over real HTTP: each scripted chunk is sent after its
own pause, and the moment it left is noted, so a test can say when a client received what
the upstream sent (both run in this process: one clock)."""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from toolwire.testing import ServedApp


@dataclass
class Paced:
    """One reply: ``deltas`` each ``every`` seconds after ``wait`` seconds of silence (no
    status line either); ``usage`` on the last chunk; ``status`` >= 400 refuses after
    ``wait``."""

    deltas: list[dict[str, Any]]
    every: float = 0.1
    wait: float = 0.0
    finish_reason: str = "stop"
    usage: dict[str, Any] | None = None
    status: int = 200
    sent: list[float] = field(default_factory=list)  # when each delta left


class PacedUpstream:
    """``with PacedUpstream() as up:`` — ``up.base_url`` ends in ``/v1/``."""

    def __init__(self) -> None:
        self.replies: deque[Paced] = deque()
        self.requests: list[dict[str, Any]] = []
        self._served: ServedApp | None = None
        self.base_url = ""

    def add(self, reply: Paced) -> Paced:
        self.replies.append(reply)
        return reply

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        reply = self.replies.popleft()
        await asyncio.sleep(reply.wait)
        if reply.status >= 400:
            error = {"error": {"message": "the upstream failed", "type": "server_error"}}
            return Response(json.dumps(error), status_code=reply.status)
        return StreamingResponse(self._events(reply, body), media_type="text/event-stream")

    async def _events(self, reply: Paced, body: Mapping[str, Any]) -> AsyncIterator[str]:
        base = {"id": "chatcmpl-paced", "object": "chat.completion.chunk", "created": 0}
        base["model"] = body.get("model", "")
        for i, delta in enumerate(reply.deltas):
            if i:
                await asyncio.sleep(reply.every)
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            yield "data: " + json.dumps(chunk) + "\n\n"
            reply.sent.append(time.monotonic())
        last: dict[str, Any] = {
            **base,
            "choices": [{"index": 0, "delta": {}, "finish_reason": reply.finish_reason}],
        }
        if reply.usage is not None:
            last["usage"] = reply.usage
        yield "data: " + json.dumps(last) + "\n\n"
        yield "data: [DONE]\n\n"

    def __enter__(self) -> PacedUpstream:
        app = Starlette(routes=[Route("/v1/chat/completions", self._chat, methods=["POST"])])
        self._served = ServedApp(app)
        self.base_url = self._served.start() + "/v1/"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._served is not None:
            self._served.stop()


def argument_pieces(arguments: str, pieces: int) -> list[str]:
    """``arguments`` cut into ``pieces`` pieces of about the same length."""
    size = -(-len(arguments) // pieces)
    return [arguments[i : i + size] for i in range(0, len(arguments), size)]


def native_call(call_id: str, name: str, arguments: str, pieces: int) -> list[dict[str, Any]]:
    """A native call's deltas: its id and name, then its arguments in ``pieces`` pieces."""
    first = {"index": 0, "id": call_id, "type": "function", "function": {"name": name}}
    deltas: list[dict[str, Any]] = [{"tool_calls": [{**first, "function": {"name": name}}]}]
    for piece in argument_pieces(arguments, pieces):
        deltas.append({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    return deltas


def text_pieces(text: str, pieces: int) -> list[dict[str, Any]]:
    """``content`` deltas: ``text`` in ``pieces`` pieces."""
    return [{"content": piece} for piece in argument_pieces(text, pieces)]


def first_at(times: Sequence[float]) -> float:
    return times[0] if times else float("inf")
