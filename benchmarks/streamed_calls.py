"""When a streamed call's first argument byte reaches the client: directly from the upstream,
and through the gateway in each API.

A paced upstream (real HTTP on 127.0.0.1) writes one call's arguments in 20 pieces, 100 ms
apart — as the engine's own ``tool_calls`` deltas, or as Hermes ``<tool_call>`` text that
the family's reader reads (``--tool-format hermes``). Each client reads its raw stream; the
figure is the time from the upstream's first argument piece leaving to the client's first
argument byte, and the number of argument deltas the client got (the median of the runs).

    PYTHONPATH=src python benchmarks/streamed_calls.py [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import replace
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from toolwire.backends import OpenAIBackend
from toolwire.events import Event
from toolwire.pipeline import ModelMemory
from toolwire.pipeline import Request as Turn
from toolwire.server import create_app
from toolwire.testing import ServedApp

PIECES, EVERY = 20, 0.1
PARAMETERS = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
}
TOOL = {"name": "write_file", "description": "Write a file.", "parameters": PARAMETERS}
ARGUMENTS = json.dumps({"path": "notes.md", "content": "a line of the file, " * 20})
CALL = '<tool_call>\n{"name": "write_file", "arguments": ' + ARGUMENTS + "}\n</tool_call>"
ARGS_AT = CALL.index(ARGUMENTS)  # where the arguments begin in the call's text
ASK = [{"role": "user", "content": "Write my notes."}]
BODIES: dict[str, dict[str, Any]] = {
    "chat": {"messages": ASK, "tools": [{"type": "function", "function": TOOL}]},
    "responses": {"input": "Write my notes.", "tools": [{"type": "function", **TOOL}]},
    "messages": {
        "max_tokens": 2000,
        "messages": ASK,
        "tools": [
            {"name": "write_file", "description": "Write a file.", "input_schema": PARAMETERS}
        ],
    },
}
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


def _pieces(text: str) -> list[str]:
    size = -(-len(text) // PIECES)
    return [text[i : i + size] for i in range(0, len(text), size)]


class Upstream:
    """Writes each queued reply's deltas ``EVERY`` seconds apart, noting when the first
    argument piece left."""

    def __init__(self) -> None:
        self.replies: deque[list[dict[str, Any]]] = deque()
        self.first: list[float] = []

    async def chat(self, request: Request) -> Response:
        await request.json()
        deltas = self.replies.popleft()
        return StreamingResponse(self._events(deltas), media_type="text/event-stream")

    async def _events(self, deltas: list[dict[str, Any]]) -> AsyncIterator[str]:
        written = 0  # characters of the call's text sent so far
        noted = False
        for i, delta in enumerate(deltas):
            if i:
                await asyncio.sleep(EVERY)
            chunk = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m"}
            chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": None}]
            yield "data: " + json.dumps(chunk) + "\n\n"
            written += len(delta.get("content") or "")
            # the piece that carries the first byte of the arguments
            if not noted and (written > ARGS_AT or "arguments" in json.dumps(delta)):
                self.first.append(time.monotonic())
                noted = True
        last = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m"}
        last["choices"] = [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]
        yield "data: " + json.dumps(last) + "\n\n"
        yield "data: [DONE]\n\n"

    def queue(self, text_mode: bool) -> None:
        if text_mode:
            self.replies.append([{"content": piece} for piece in _pieces(CALL)])
            return
        head = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "write_file"}}
        deltas: list[dict[str, Any]] = [{"tool_calls": [head]}]
        for piece in _pieces(ARGUMENTS):
            deltas.append({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        self.replies.append(deltas)


class Hermes:
    """The upstream's model writes its calls as Hermes text."""

    def __init__(self, inner: OpenAIBackend) -> None:
        self._inner = inner
        self.name = inner.name

    def stream(self, request: Turn) -> AsyncGenerator[Event, None]:
        return self._inner.stream(replace(request, tool_format="hermes"))


def _argument_bytes(api: str, line: str, text_mode: bool) -> str:
    """The argument text a raw SSE data line carries, in ``api``'s shape."""
    if not line.startswith("data: ") or line == "data: [DONE]":
        return ""
    data = json.loads(line[6:])
    if api == "chat" or api == "direct":
        out = ""
        for choice in data.get("choices") or ():
            delta = choice.get("delta") or {}
            if api == "direct" and text_mode:
                out += delta.get("content") or ""  # the call as text, straight from the model
            for call in delta.get("tool_calls") or ():
                out += (call.get("function") or {}).get("arguments") or ""
        return out
    if api == "responses":
        return data.get("delta", "") if data.get("type", "").endswith("arguments.delta") else ""
    delta = data.get("delta") or {}
    return delta.get("partial_json", "") if delta.get("type") == "input_json_delta" else ""


def _measure(
    url: str, api: str, body: Mapping[str, Any], up: Upstream, text_mode: bool
) -> tuple[float, int]:
    """Milliseconds from the upstream's first argument piece to the client's, and the
    number of argument deltas the client got."""
    up.queue(text_mode)
    first, count, seen = 0.0, 0, 0
    with httpx.stream("POST", url, json={**body, "model": "m", "stream": True}, timeout=60) as r:
        for line in r.iter_lines():
            got = _argument_bytes(api, line, text_mode)
            if not got:
                continue
            seen += len(got)
            if api == "direct" and text_mode and seen <= ARGS_AT:
                continue  # the call's opening text, not yet its arguments
            count += 1
            if count == 1:
                first = time.monotonic()
    return (first - up.first[-1]) * 1000, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    up = Upstream()
    app = Starlette(routes=[Route("/v1/chat/completions", up.chat, methods=["POST"])])
    with ServedApp(app) as upstream:
        backend = OpenAIBackend("m", base_url=upstream.url + "/v1/", memory=ModelMemory())
        print(
            f"one call's arguments in {PIECES} pieces, {EVERY * 1000:.0f} ms apart; "
            f"median of {runs}"
        )
        print(f"{'writes its call as':<22}{'client':<26}{'first argument byte':>21}{'deltas':>8}")
        for text_mode in (False, True):
            served = ServedApp(
                create_app(Hermes(backend) if text_mode else backend, model_name="m")
            )
            with served:
                rows = [
                    (
                        "directly from upstream",
                        "direct",
                        upstream.url + PATHS["chat"],
                        BODIES["chat"],
                    )
                ]
                rows += [
                    (f"gateway, {api}", api, served.url + PATHS[api], BODIES[api]) for api in PATHS
                ]
                for label, api, url, body in rows:
                    got = [_measure(url, api, body, up, text_mode) for _ in range(runs)]
                    ms = statistics.median(g[0] for g in got)
                    count = int(statistics.median(g[1] for g in got))
                    shape = "Hermes text" if text_mode else "native tool_calls"
                    print(f"{shape:<22}{label:<26}{ms:>18.1f} ms{count:>8}")


if __name__ == "__main__":
    main()
