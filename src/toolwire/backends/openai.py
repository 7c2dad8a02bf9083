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
import secrets
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
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
    Notice,
    ReasoningDelta,
    TextDelta,
)
from ..messages import ToolCall
from ..schemas import classify_refusal, to_dialect
from ..templates import normalize_tools
from .base import Request
from .http import error_message, post_stream
from .worded import in_words, read_in_words, recover_drift

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
        dialect: str | None = None,
        context_tokens: int = 32_768,
        words: bool = False,
    ) -> None:
        self.model = model
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self._api_key = api_key
        self._client = client
        self._timeout = timeout
        self._headers = dict(headers or {})
        #: How tool schemas are shown to this provider (see :mod:`toolwire.schemas`).
        self.dialect = dialect or _dialect_for(self.base_url)
        #: The model's window, for sizing a tool list given in words.
        self.context_tokens = context_tokens
        #: A model listed as taking no tools: it always gets them in words.
        self.words = words

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
        options.setdefault("dialect", _PROVIDER_DIALECT.get(provider))
        return cls(model, base_url=base_url, api_key=api_key, **options)

    def body(self, request: Request) -> dict[str, Any]:
        """The JSON body of a streamed chat-completions request."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in request.messages],
            "stream": True,
        }
        if request.tools:
            dialect = _LEARNED.get((self.base_url, self.model), {}).get("dialect", self.dialect)
            body["tools"] = [
                {
                    **t,
                    "function": {
                        **t["function"],
                        "parameters": to_dialect(
                            t["function"].get("parameters") or {"type": "object"}, dialect
                        ),
                    },
                }
                for t in normalize_tools(request.tools)
            ]
            if request.tool_choice is not None:
                body["tool_choice"] = request.tool_choice
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        body.update(request.extra)
        return body

    async def stream(self, request: Request) -> AsyncGenerator[Event, None]:
        """Stream a turn. A refusal over tools is healed before the model says a word: a
        refused schema keyword sends the request once more in the strict dialect; a model
        that takes no tools gets them in words. What each model taught is remembered."""
        key = (self.base_url, self.model)
        for _attempt in range(3):
            learned = _LEARNED.get(key, {})
            in_words = bool(request.tools) and (self.words or learned.get("words", False))
            started = False
            try:
                async with aclosing(self._stream(request, in_words)) as events:
                    async for event in events:
                        started = True
                        yield event
                return
            except BackendError as exc:
                kind = classify_refusal(exc) if request.tools and not started else None
                if kind == "schema" and learned.get("dialect") != "strict" and not in_words:
                    _LEARNED.setdefault(key, {})["dialect"] = "strict"
                    yield Notice(
                        "healed-schema",
                        f"{self.model} refused a tool schema; sent again with plain schemas",
                    )
                    continue
                if kind == "tools" and not in_words:
                    _LEARNED.setdefault(key, {})["words"] = True
                    yield Notice(
                        "healed-tools",
                        f"{self.model} takes no tools; they are given in words instead",
                    )
                    continue
                raise

    async def _stream(self, request: Request, worded: bool) -> AsyncGenerator[Event, None]:
        headers = {"Accept": "text/event-stream", **self._headers}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        url = self.base_url + "chat/completions"
        sent = request
        if worded and request.tools:
            sent, notice = in_words(request, self.context_tokens)
            if notice is not None:
                yield notice
        async with aclosing(
            post_stream(
                self._client,
                url,
                self.body(sent),
                _read_stream,
                headers=headers,
                timeout=self._timeout,
            )
        ) as raw:
            events: AsyncIterator[Event] = raw
            if worded and request.tools:
                events = read_in_words(raw, request.tools)
            elif request.tools and not request.strict:
                events = recover_drift(raw, request.tools)
            async for event in events:
                yield event


#: What each (base URL, model) taught: {"dialect": "strict"} or {"words": True}.
_LEARNED: dict[tuple[str, str], dict[str, Any]] = {}
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
    ended = False
    usage: dict[str, int] | None = None
    size = 0

    def announce(pending: _PendingCall) -> list[CallStart | CallArgsDelta]:
        nonlocal announced
        pending.index = announced
        announced += 1
        pending.id = pending.id or _fresh_id()
        return [CallStart(pending.index, pending.id, pending.name)] + [
            CallArgsDelta(pending.index, held) for held in pending.args
        ]

    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue  # comments, event names, keep-alives
        data = line[5:].strip()
        size += len(data)
        if ended or data == "[DONE]":
            # read on to the end of the body (bounded), so the connection can be reused
            ended = True
            if size > MAX_STREAM_CHARS:
                break
            continue
        if size > MAX_STREAM_CHARS:
            raise BackendError(f"the streamed reply is longer than {MAX_STREAM_CHARS} characters")
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError):
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
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # one reply: the first choice
            delta = choice.get("delta") or choice.get("message") or {}
            if not isinstance(delta, dict):
                raise BackendError(f"the provider sent a delta that is not an object: {data[:200]}")
            for key in ("reasoning_content", "reasoning"):
                if isinstance(delta.get(key), str) and delta[key]:
                    yield ReasoningDelta(delta[key])
            if isinstance(delta.get("content"), str) and delta["content"]:
                yield TextDelta(delta["content"])
            for tc in delta.get("tool_calls") or ():
                if not isinstance(tc, dict):
                    continue
                pending = calls.setdefault(_slot(tc, calls, by_id), _PendingCall())
                fn = tc.get("function") or {}
                if not isinstance(fn, dict):
                    raise BackendError(
                        f"the provider sent a function that is not an object: {data[:200]}"
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
                            yield CallArgsDelta(pending.index, piece)
            if choice.get("finish_reason"):
                finish = str(choice["finish_reason"])
    if not ended and not finish:
        raise BackendError("the stream ended before the reply was complete")
    for pending in calls.values():
        if pending.index < 0 and pending.name:
            for event in announce(pending):
                yield event
    for pending in sorted(calls.values(), key=lambda p: p.index):
        if pending.index < 0:
            continue  # arguments with no name: nothing to call
        text = "".join(pending.args)
        try:
            parsed = json.loads(text) if text.strip() else {}
        except (ValueError, RecursionError):
            parsed = None
        arguments = parsed if isinstance(parsed, dict) else {}
        yield CallEnd(pending.index, ToolCall(pending.id, pending.name, arguments, text))
    finish = finish or "stop"
    if calls and finish == "stop":
        finish = "tool_calls"
    yield Done(finish, usage)
