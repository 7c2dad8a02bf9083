"""Ollama's native ``/api/chat``, streamed as JSON lines.

Tools in the request; calls arrive whole, with arguments as objects; ``think`` asks a
thinking model to think and ``message.thinking`` is reasoning, never read for calls. The
conversation is sent in Ollama's encoding: a call's arguments as an object, a result with
``tool_name``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from typing import Any

import httpx

from ..errors import BackendError
from ..events import (
    CallArgsDelta,
    CallEnd,
    CallStart,
    Done,
    Event,
    Notice,
    ReasoningDelta,
    TextDelta,
)
from ..messages import ToolCall
from ..schemas import classify_refusal
from ..templates import normalize_tools
from .base import Request
from .http import post_stream
from .openai import MAX_STREAM_CHARS
from .worded import in_words, read_in_words

__all__ = ["OllamaBackend", "to_ollama"]


def to_ollama(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-shaped messages in Ollama's encoding."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for message in messages:
        m = dict(message)
        if m.get("role") == "assistant" and m.get("tool_calls"):
            calls = []
            for call in m["tool_calls"]:
                fn = call.get("function", call)
                args = fn.get("arguments", {})
                if isinstance(args, str):
                    try:
                        args = json.loads(args) if args.strip() else {}
                    except ValueError:
                        args = {"_raw": args}  # what the model wrote, kept visible
                names[str(call.get("id", ""))] = fn.get("name", "")
                calls.append({"function": {"name": fn.get("name", ""), "arguments": args}})
            m["tool_calls"] = calls
            m["content"] = m.get("content") or ""
        elif m.get("role") == "tool":
            name = m.pop("name", None) or names.get(str(m.get("tool_call_id", "")), "")
            m.pop("tool_call_id", None)
            m["tool_name"] = name
        if m.get("content") is None:
            m["content"] = ""
        out.append(m)
    return out


class OllamaBackend:
    """A model behind Ollama's ``POST {base_url}/api/chat``."""

    name = "ollama"

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "http://127.0.0.1:11434",
        client: httpx.AsyncClient | None = None,
        timeout: float = 300.0,
        context_tokens: int = 8192,
        words: bool = False,
    ) -> None:
        self.model = model
        #: The model's window, for sizing a tool list given in words.
        self.context_tokens = context_tokens
        #: A model listed as taking no tools: it always gets them in words.
        self.words = words
        self.base_url = base_url.rstrip("/")
        self._client = client
        self._timeout = timeout

    def body(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_ollama(request.messages),
            "stream": True,
        }
        if request.tools:
            body["tools"] = normalize_tools(request.tools)
        if request.think is not None:
            body["think"] = request.think
        options: dict[str, Any] = {}
        if request.temperature is not None:
            options["temperature"] = request.temperature
        if request.max_tokens is not None:
            options["num_predict"] = request.max_tokens
        if options:
            body["options"] = options
        body.update(request.extra)
        return body

    async def stream(self, request: Request) -> AsyncGenerator[Event, None]:
        """Stream a turn; a model that takes no tools (Ollama says "does not support
        tools") gets them in words instead, before it has said a word, and keeps them so."""
        in_words = bool(request.tools) and (self.words or self.model in _NO_TOOLS)
        started = False
        try:
            async with aclosing(self._stream(request, in_words)) as events:
                async for event in events:
                    started = True
                    yield event
            return
        except BackendError as exc:
            if in_words or started or not request.tools or classify_refusal(exc) != "tools":
                raise
        _NO_TOOLS.add(self.model)
        yield Notice("healed-tools", f"{self.model} takes no tools; they are given in words")
        async with aclosing(self._stream(request, True)) as events:
            async for event in events:
                yield event

    async def _stream(self, request: Request, worded: bool) -> AsyncGenerator[Event, None]:
        url = self.base_url + "/api/chat"
        sent = request
        if worded and request.tools:
            sent, notice = in_words(request, self.context_tokens)
            if notice is not None:
                yield notice
        async with aclosing(
            post_stream(self._client, url, self.body(sent), _read_lines, timeout=self._timeout)
        ) as raw:
            events: AsyncIterator[Event] = raw
            if worded and request.tools:
                events = read_in_words(raw, request.tools)
            async for event in events:
                yield event


#: Models that said they take no tools: they get them in words from then on.
_NO_TOOLS: set[str] = set()


async def _read_lines(response: httpx.Response) -> AsyncGenerator[Event, None]:
    calls: list[ToolCall] = []
    size = 0
    finish = "stop"
    usage: dict[str, int] | None = None
    done = False
    async for line in response.aiter_lines():
        if not line.strip():
            continue
        size += len(line)
        if done:  # read on to the end of the body (bounded), so the connection can be reused
            if size > MAX_STREAM_CHARS:
                break
            continue
        if size > MAX_STREAM_CHARS:
            raise BackendError(f"the streamed reply is longer than {MAX_STREAM_CHARS} characters")
        try:
            chunk = json.loads(line)
        except (ValueError, RecursionError):
            raise BackendError(f"Ollama sent a line that is not JSON: {line[:200]}") from None
        if not isinstance(chunk, dict):
            continue
        if isinstance(chunk.get("error"), str):
            raise BackendError(f"Ollama failed mid-stream: {chunk['error']}", body=line)
        message = chunk.get("message") or {}
        if not isinstance(message, dict):
            raise BackendError(f"Ollama sent a message that is not an object: {line[:200]}")
        if isinstance(message.get("thinking"), str) and message["thinking"]:
            yield ReasoningDelta(message["thinking"])
        if isinstance(message.get("content"), str) and message["content"]:
            yield TextDelta(message["content"])
        for call in message.get("tool_calls") or ():
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                continue
            args = fn.get("arguments")
            text = args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)
            arguments = args if isinstance(args, dict) else {}
            index = len(calls)
            cid = str(call.get("id") or "call_" + secrets.token_hex(8))
            call_obj = ToolCall(cid, fn["name"], arguments, text)
            calls.append(call_obj)
            yield CallStart(index, cid, fn["name"])
            yield CallArgsDelta(index, text)
            yield CallEnd(index, call_obj)
        if chunk.get("done"):
            finish = str(chunk.get("done_reason") or "stop")
            counts = {
                "prompt_tokens": chunk.get("prompt_eval_count"),
                "completion_tokens": chunk.get("eval_count"),
            }
            usage = {k: v for k, v in counts.items() if isinstance(v, int)} or None
            done = True
    if calls and finish == "stop":
        finish = "tool_calls"
    yield Done(finish, usage)
