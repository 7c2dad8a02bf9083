"""Test doubles shipped with the library: a fake OpenAI-compatible (and Ollama) server, and
a scripted stand-in for llama-cpp's ``Llama``.

It speaks real HTTP on 127.0.0.1 (Starlette under uvicorn, in a thread), streams scripted
replies as server-sent events exactly as providers do (or JSON lines, for Ollama's
``/api/chat``), and records every request body, so a test can check what the client sent
next: the assistant message with its calls, one tool message per call id, in order.
Callers' own tests can use it the same way. :class:`ScriptedLlama` replays a reply through
:class:`~toolwire.LlamaCppBackend` where a real model cannot be made to write a given shape.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["FakeOpenAIServer", "ScriptedLlama", "ServedApp", "text_deltas", "tool_call_deltas"]


class ServedApp:
    """An ASGI app served over real HTTP on 127.0.0.1 (an unused port), in a thread."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def start(self) -> str:
        """Serve; returns ``http://127.0.0.1:PORT``."""
        config = uvicorn.Config(
            self._app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the app did not start serving")
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> ServedApp:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def text_deltas(text: str, size: int = 3) -> list[dict[str, Any]]:
    """``content`` deltas of ``size`` characters each."""
    return [{"content": text[i : i + size]} for i in range(0, len(text), size)]


def tool_call_deltas(
    calls: Sequence[tuple[str, str, str]], *, size: int = 5, interleave: bool = False
) -> list[dict[str, Any]]:
    """``tool_calls`` deltas for ``(id, name, arguments_text)`` calls, as providers send them:
    id and name first, then the argument text in pieces of ``size`` characters (cut anywhere,
    mid-string included). With ``interleave`` the calls' pieces alternate."""
    streams: list[list[dict[str, Any]]] = []
    for index, (cid, name, args) in enumerate(calls):
        first = {
            "index": index,
            "id": cid,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        pieces = [
            {"index": index, "function": {"arguments": args[i : i + size]}}
            for i in range(0, len(args), size)
        ]
        streams.append([first, *pieces])
    out: list[dict[str, Any]] = []
    if interleave:
        longest = max((len(s) for s in streams), default=0)
        for i in range(longest):
            for s in streams:
                if i < len(s):
                    out.append({"content": None, "tool_calls": [s[i]]})
    else:
        for s in streams:
            out.extend({"content": None, "tool_calls": [d]} for d in s)
    return out


@dataclass
class _Reply:
    deltas: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: dict[str, int] | None = None
    status: int = 200
    error: Any = None
    raw: list[str] | None = None
    ndjson: bool = False


class FakeOpenAIServer:
    """``with FakeOpenAIServer() as server:`` — ``server.base_url`` ends in ``/v1/``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        #: The client's (host, port) per request: one port for many requests is a reused
        #: connection.
        self.peers: list[tuple[str, int]] = []
        self._replies: deque[_Reply] = deque()
        self._served: ServedApp | None = None
        self.base_url = ""
        self.ollama_url = ""

    # -- scripting

    def add_stream(
        self,
        deltas: Sequence[Mapping[str, Any]],
        *,
        finish_reason: str = "stop",
        usage: Mapping[str, int] | None = None,
    ) -> None:
        """Queue a streamed reply made of these ``delta`` objects."""
        self._replies.append(
            _Reply([dict(d) for d in deltas], finish_reason, dict(usage) if usage else None)
        )

    def add_error(self, status: int, error: Any) -> None:
        """Queue a refusal: ``error`` becomes ``{"error": error}`` (a string or an object)."""
        self._replies.append(_Reply(status=status, error=error))

    def add_ollama(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        done_reason: str = "stop",
        prompt_eval_count: int | None = None,
        eval_count: int | None = None,
        complete: bool = True,
    ) -> None:
        """Queue an Ollama ``/api/chat`` reply: one JSON line per partial ``message``; with
        ``complete`` False the body ends before the last line (a cut stream)."""
        lines = [
            json.dumps({"message": {"role": "assistant", **m}, "done": False}) for m in messages
        ]
        last: dict[str, Any] = {
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": done_reason,
        }
        if prompt_eval_count is not None:
            last["prompt_eval_count"] = prompt_eval_count
        if eval_count is not None:
            last["eval_count"] = eval_count
        self._replies.append(
            _Reply(raw=[*lines, json.dumps(last)] if complete else lines, ndjson=True)
        )

    def add_raw(self, lines: Sequence[str]) -> None:
        """Queue a reply of raw SSE ``data:`` payloads, sent as they are."""
        self._replies.append(_Reply(raw=list(lines)))

    # -- serving

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        if request.client is not None:
            self.peers.append((request.client.host, request.client.port))
        if not self._replies:
            return JSONResponse({"error": {"message": "no reply scripted"}}, status_code=500)
        reply = self._replies.popleft()
        if reply.status >= 400:
            return JSONResponse({"error": reply.error}, status_code=reply.status)
        if reply.ndjson:
            return StreamingResponse(self._lines(reply), media_type="application/x-ndjson")
        return StreamingResponse(self._events(reply, body), media_type="text/event-stream")

    async def _lines(self, reply: _Reply) -> AsyncIterator[str]:
        for line in reply.raw or ():
            yield line + "\n"

    async def _events(self, reply: _Reply, body: Mapping[str, Any]) -> AsyncIterator[str]:
        if reply.raw is not None:
            for line in reply.raw:
                yield f"data: {line}\n\n"
            return
        base = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", ""),
        }
        first = True
        for delta in reply.deltas:
            d = dict(delta)
            if first:
                d.setdefault("role", "assistant")
                first = False
            chunk = {**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
            yield "data: " + json.dumps(chunk) + "\n\n"
        last: dict[str, Any] = {
            **base,
            "choices": [{"index": 0, "delta": {}, "finish_reason": reply.finish_reason}],
        }
        if reply.usage:
            last["usage"] = reply.usage
        yield "data: " + json.dumps(last) + "\n\n"
        yield "data: [DONE]\n\n"

    def start(self) -> str:
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/chat/completions", self._chat, methods=["POST"]),
                Route("/api/chat", self._chat, methods=["POST"]),
            ]
        )
        self._served = ServedApp(app)
        root = self._served.start()
        self.base_url = root + "/v1/"
        self.ollama_url = root
        return self.base_url

    def stop(self) -> None:
        if self._served is not None:
            self._served.stop()

    def __enter__(self) -> FakeOpenAIServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ScriptedLlama:
    """Stands in for llama-cpp's ``Llama`` (``LlamaCppBackend(path, llama=ScriptedLlama(…))``):
    the chat template is the one given, tokens are characters, and each generation replays
    the next scripted reply (the last one again when they run out). ``prompts`` records what
    the model was given; ``taken`` how many tokens each generation handed out before it was
    stopped or ran out (a reply closed early was not read to its end)."""

    def __init__(self, template: str, *replies: str, n_ctx: int = 100_000) -> None:
        self.metadata = {"tokenizer.chat_template": template}
        self.replies = list(replies) or [""]
        self.prompts: list[str] = []
        self.taken: list[int] = []
        self._n_ctx = n_ctx

    def n_ctx(self) -> int:
        return self._n_ctx

    def token_bos(self) -> int:
        return -1

    def token_eos(self) -> int:
        return 0

    def tokenize(self, text: bytes, add_bos: bool = False, special: bool = False) -> list[int]:
        return [ord(c) for c in text.decode()]

    def detokenize(self, tokens: list[int], special: bool = False) -> bytes:
        return "".join(chr(t) for t in tokens if t).encode()

    def generate(self, tokens: Sequence[int], **_: Any) -> Any:
        self.prompts.append("".join(chr(t) for t in tokens))
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        self.taken.append(0)
        for c in reply:
            self.taken[-1] += 1
            yield ord(c)
        yield 0
