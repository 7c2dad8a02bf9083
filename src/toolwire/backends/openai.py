"""OpenAI-compatible chat completions over HTTP, streamed.

One client for OpenAI, vLLM, llama-server, LM Studio, Ollama's ``/v1`` and the Gemini and
Anthropic compatibility endpoints. Tools go in the request; streamed ``tool_calls`` deltas
are assembled by index (id and name first, then argument fragments, several calls at once);
``content`` may be null; ``reasoning`` / ``reasoning_content`` become reasoning and are never
read for calls. Built on ``httpx`` with an injectable client, so tests (and callers with
their own proxies, retries or transports) hand in the client they want.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..errors import BackendError
from ..events import (
    CallArgsDelta,
    CallEnd,
    CallStart,
    Done,
    Event,
    ReasoningDelta,
    TextDelta,
)
from ..formats.drift import DriftGuard
from ..messages import ToolCall
from ..templates import normalize_tools
from .base import Request
from .http import error_message, post_stream

__all__ = ["PROVIDERS", "OpenAIBackend"]

#: Default base URLs of the providers with an OpenAI-compatible endpoint. Anthropic's key
#: goes only to Anthropic's own host.
PROVIDERS: dict[str, str] = {
    "openai": "https://api.openai.com/v1/",
    "anthropic": "https://api.anthropic.com/v1/",
    "gemini": "https://generativelanguage.googleapis.com/v1beta/openai/",
    "ollama": "http://127.0.0.1:11434/v1/",
    "llama-server": "http://127.0.0.1:8080/v1/",
    "lmstudio": "http://127.0.0.1:1234/v1/",
    "vllm": "http://127.0.0.1:8000/v1/",
}

#: The largest streamed reply accepted, in characters of SSE data.
MAX_STREAM_CHARS = 32 * 1024 * 1024


@dataclass
class _PendingCall:
    index: int = -1  # our index, once announced
    id: str = ""
    name: str = ""
    args: list[str] = field(default_factory=list)


class OpenAIBackend:
    """A model behind ``POST {base_url}chat/completions``."""

    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str = PROVIDERS["openai"],
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float = 120.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self._api_key = api_key
        self._client = client
        self._timeout = timeout
        self._headers = dict(headers or {})

    @classmethod
    def for_provider(
        cls, provider: str, model: str, *, api_key: str | None = None, **options: Any
    ) -> OpenAIBackend:
        """A backend at a known provider's own base URL (see :data:`PROVIDERS`), so its key
        goes to that provider's host and nowhere else."""
        try:
            base_url = PROVIDERS[provider]
        except KeyError:
            known = ", ".join(PROVIDERS)
            raise ValueError(f"unknown provider {provider!r}; known: {known}") from None
        return cls(model, base_url=base_url, api_key=api_key, **options)

    def body(self, request: Request) -> dict[str, Any]:
        """The JSON body of a streamed chat-completions request."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in request.messages],
            "stream": True,
        }
        if request.tools:
            body["tools"] = normalize_tools(request.tools)
            if request.tool_choice is not None:
                body["tool_choice"] = request.tool_choice
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        body.update(request.extra)
        return body

    async def stream(self, request: Request) -> AsyncGenerator[Event, None]:
        headers = {"Accept": "text/event-stream", **self._headers}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        url = self.base_url + "chat/completions"
        body = self.body(request)
        guard = DriftGuard(request.tools) if request.tools and not request.strict else None
        async with aclosing(
            post_stream(
                self._client, url, body, _read_stream, headers=headers, timeout=self._timeout
            )
        ) as events:
            async for event in events:
                if guard is None:
                    yield event
                elif isinstance(event, Done):
                    # calls the server left in the text: recovered before the turn ends
                    for held in guard.end():
                        yield held
                    if guard.recovered:
                        event = Done("tool_calls", event.usage)
                    yield event
                else:
                    for passed in guard.push([event]):
                        yield passed


async def _read_stream(response: httpx.Response) -> AsyncGenerator[Event, None]:
    calls: dict[int, _PendingCall] = {}
    announced = 0
    finish = "stop"
    usage: dict[str, int] | None = None
    size = 0
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue  # comments, event names, keep-alives
        data = line[5:].strip()
        if data == "[DONE]":
            break
        size += len(data)
        if size > MAX_STREAM_CHARS:
            raise BackendError(f"the streamed reply is longer than {MAX_STREAM_CHARS} characters")
        try:
            chunk = json.loads(data)
        except ValueError:
            raise BackendError(
                f"the provider sent a chunk that is not JSON: {data[:200]}"
            ) from None
        if not isinstance(chunk, dict):
            continue
        if isinstance(chunk.get("error"), (dict, str)):
            raise BackendError(f"the provider failed mid-stream: {error_message(data)}", body=data)
        if isinstance(chunk.get("usage"), dict):
            usage = {k: v for k, v in chunk["usage"].items() if isinstance(v, int)}
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            for key in ("reasoning_content", "reasoning"):
                if isinstance(delta.get(key), str) and delta[key]:
                    yield ReasoningDelta(delta[key])
            if isinstance(delta.get("content"), str) and delta["content"]:
                yield TextDelta(delta["content"])
            for tc in delta.get("tool_calls") or ():
                if not isinstance(tc, dict):
                    continue
                slot = tc.get("index", len(calls) if tc.get("id") else max(calls, default=0))
                pending = calls.setdefault(slot, _PendingCall())
                fn = tc.get("function") or {}
                if isinstance(tc.get("id"), str) and tc["id"] and not pending.id:
                    pending.id = tc["id"]
                if isinstance(fn.get("name"), str) and fn["name"]:
                    pending.name += fn["name"] if pending.index < 0 else ""
                piece = fn.get("arguments")
                if isinstance(piece, dict):  # some servers send the object, not its text
                    piece = json.dumps(piece, ensure_ascii=False)
                if pending.index < 0 and pending.name:
                    pending.index = announced
                    announced += 1
                    pending.id = pending.id or f"call_{pending.index}"
                    yield CallStart(pending.index, pending.id, pending.name)
                    for held in pending.args:
                        yield CallArgsDelta(pending.index, held)
                if isinstance(piece, str) and piece:
                    pending.args.append(piece)
                    if pending.index >= 0:
                        yield CallArgsDelta(pending.index, piece)
            if choice.get("finish_reason"):
                finish = str(choice["finish_reason"])
    for slot in sorted(calls):
        pending = calls[slot]
        if pending.index < 0:
            continue  # arguments with no name: nothing to call
        text = "".join(pending.args)
        try:
            parsed = json.loads(text) if text.strip() else {}
        except ValueError:
            parsed = None
        arguments = parsed if isinstance(parsed, dict) else {}
        yield CallEnd(pending.index, ToolCall(pending.id, pending.name, arguments, text))
    if calls and finish == "stop":
        finish = "tool_calls"
    yield Done(finish, usage)
