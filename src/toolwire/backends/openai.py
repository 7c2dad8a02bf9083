"""OpenAI-compatible chat completions over HTTP, streamed.

One client for OpenAI, vLLM, llama-server, LM Studio, Ollama's ``/v1`` and the Gemini and
Anthropic compatibility endpoints. A transport: it sends and reads; the reply pipeline
decides the rest (tools in words, recovery, healing). Tools go in the request; streamed
``tool_calls`` deltas are assembled by index (id and name first, then argument fragments,
several calls at once);
``content`` may be null; ``reasoning`` / ``reasoning_content`` become reasoning and are never
read for calls. Built on ``httpx`` with an injectable client, so tests (and callers with
their own proxies, retries or transports) hand in the client they want.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from .. import events as ev
from ..errors import BackendError, UsageError
from ..events import Event
from ..messages import ToolCall
from ..pipeline import Request
from .http import HttpTransport, Records, wire_tools

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


@dataclass
class _PendingCall:
    index: int = -1  # our index, once announced
    id: str = ""
    name: str = ""
    args: list[str] = field(default_factory=list)


class OpenAIBackend(HttpTransport):
    """A model behind ``POST {base_url}chat/completions``."""

    name = "openai"
    default_base_url = PROVIDERS["openai"]
    path = "chat/completions"
    default_timeout = 120.0
    default_context_tokens = 32_768

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        dialect: str | None = None,
        **options: Any,
    ) -> None:
        """``options``: ``base_url``, ``client``, ``timeout``, ``context_tokens``, ``words``,
        ``memory`` (see :class:`~toolwire.backends.http.HttpTransport`)."""
        sent = {"Accept": "text/event-stream", **(headers or {})}
        if api_key:
            sent["Authorization"] = f"Bearer {api_key}"
        super().__init__(model, headers=sent, **options)
        self.dialect = dialect or _dialect_for(self.base_url)

    @staticmethod
    def normal_base(base_url: str) -> str:
        return base_url if base_url.endswith("/") else base_url + "/"

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
            raise UsageError(f"unknown provider {provider!r}; known: {known}") from None
        options.setdefault("dialect", _PROVIDER_DIALECT.get(provider))
        return cls(model, base_url=base_url, api_key=api_key, **options)

    def body(self, request: Request, dialect: str) -> dict[str, Any]:
        """The JSON body of a streamed chat-completions request, its tool schemas in
        ``dialect`` (the pipeline's choice: see :class:`~toolwire.pipeline.Plan`)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in request.messages],
            "stream": True,
        }
        if request.tools:
            body["tools"] = wire_tools(request.tools, dialect)
            if request.tool_choice is not None:
                body["tool_choice"] = request.tool_choice
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        body.update(request.extra)
        return body

    def read(self, response: httpx.Response) -> AsyncGenerator[Event, None]:
        return _read_stream(response)


_PROVIDER_DIALECT = {"gemini": "gemini", "anthropic": "anthropic"}


def _dialect_for(base_url: str) -> str:
    if "generativelanguage.googleapis.com" in base_url:
        return "gemini"
    if "api.anthropic.com" in base_url:
        return "anthropic"
    return "permissive"


def _fresh_id() -> str:
    """An id for a call the provider sent without one: unique, so operation ids derived
    from it never repeat across turns."""
    return "call_" + secrets.token_hex(8)


def _slot(tc: Mapping[str, Any], calls: dict[Any, _PendingCall], by_id: dict[str, Any]) -> Any:
    """Which call a tool_calls delta belongs to: its index; else its id; else the last."""
    index = tc.get("index")
    if isinstance(index, int) and not isinstance(index, bool):
        return index
    cid = tc.get("id")
    if isinstance(cid, str) and cid:
        if cid not in by_id:
            by_id[cid] = ("id", len(by_id))
        return by_id[cid]
    return next(reversed(calls), ("id", 0)) if calls else ("id", 0)


async def _read_stream(response: httpx.Response) -> AsyncGenerator[Event, None]:
    calls: dict[Any, _PendingCall] = {}
    by_id: dict[str, Any] = {}
    announced = 0
    finish = ""
    usage: dict[str, int] | None = None

    def announce(pending: _PendingCall) -> list[ev.CallStart | ev.CallArgsDelta]:
        nonlocal announced
        pending.index = announced
        announced += 1
        pending.id = pending.id or _fresh_id()
        return [ev.CallStart(pending.index, pending.id, pending.name)] + [
            ev.CallArgsDelta(pending.index, held) for held in pending.args
        ]

    records = Records(response, sse=True, who="the provider")
    async for chunk in records:
        if isinstance(chunk.get("usage"), dict):
            usage = {k: v for k, v in chunk["usage"].items() if isinstance(v, int)}
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # one reply: the first choice
            delta = choice.get("delta") or choice.get("message") or {}
            if not isinstance(delta, dict):
                shown = json.dumps(delta)[:200]
                raise BackendError(f"the provider sent a delta that is not an object: {shown}")
            for key in ("reasoning_content", "reasoning"):
                if isinstance(delta.get(key), str) and delta[key]:
                    yield ev.ReasoningDelta(delta[key])
            if isinstance(delta.get("content"), str) and delta["content"]:
                yield ev.TextDelta(delta["content"])
            for tc in delta.get("tool_calls") or ():
                if not isinstance(tc, dict):
                    continue
                pending = calls.setdefault(_slot(tc, calls, by_id), _PendingCall())
                fn = tc.get("function") or {}
                if not isinstance(fn, dict):
                    shown = json.dumps(fn)[:200]
                    raise BackendError(
                        f"the provider sent a function that is not an object: {shown}"
                    )
                if isinstance(tc.get("id"), str) and tc["id"] and not pending.id:
                    pending.id = tc["id"]
                if isinstance(fn.get("name"), str) and fn["name"] and pending.index < 0:
                    pending.name += fn["name"]  # a name may come in pieces, before arguments
                piece = fn.get("arguments")
                if isinstance(piece, dict):  # some servers send the object, not its text
                    piece = json.dumps(piece, ensure_ascii=False)
                if isinstance(piece, str):  # arguments begun (even ""): the name is whole
                    if pending.index < 0 and pending.name:
                        for event in announce(pending):
                            yield event
                    if piece:
                        pending.args.append(piece)
                        if pending.index >= 0:
                            yield ev.CallArgsDelta(pending.index, piece)
            if choice.get("finish_reason"):
                finish = str(choice["finish_reason"])
    if not records.ended and not finish:
        raise BackendError("the stream ended before the reply was complete")
    for pending in calls.values():
        if pending.index < 0 and pending.name:
            for event in announce(pending):
                yield event
    for pending in sorted(calls.values(), key=lambda p: p.index):
        if pending.index < 0:  # arguments with no name: nothing to call
            yield ev.Notice(
                "call-not-read", "the provider sent a call without a name; it was dropped"
            )
            continue
        text = "".join(pending.args)
        try:
            parsed = json.loads(text) if text.strip() else {}
        except (ValueError, RecursionError):
            parsed = None
        arguments = parsed if isinstance(parsed, dict) else {}
        yield ev.CallEnd(pending.index, ToolCall(pending.id, pending.name, arguments, text))
    yield ev.Done(finish or "stop", usage)
