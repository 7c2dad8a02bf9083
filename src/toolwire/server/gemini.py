"""Google's Gemini API (``POST /v1beta/models/{model}:generateContent``,
``:streamGenerateContent``, ``:countTokens``) over the request core: the reply.

The request is read by :mod:`toolwire.server.gemini_input`. Out: one candidate whose
``content`` (role ``model``) has the model's thoughts (``thought: true``, only when the
request's ``thinkingConfig.includeThoughts`` asked), its text, and a ``functionCall`` part
per complete call (``name``, ``args`` and the call's ``id``, which clients echo in their
``functionResponse``); ``finishReason`` ``STOP`` (a call too, as Gemini ends one) or
``MAX_TOKENS``; ``usageMetadata`` from the engine's usage.

Streamed (``:streamGenerateContent?alt=sse``): a ``data:`` event per piece of text or
thought and per complete call (Gemini sends a call whole, never its arguments in pieces),
the last with ``finishReason`` and ``usageMetadata``; without ``alt=sse`` the same objects
as one JSON array, as Gemini sends it. A keep-alive is a blank line: Google's clients read
``data:`` lines and skip white space, but stop at anything else (an SSE comment among
them). A failure before the reply is ``{"error": {"code", "message", "status"}}`` with its
status; one mid-stream is that object as the stream's last line, which both official SDKs
raise. The toolwire notices are a top-level ``toolwire`` field (in a stream, on the last
event).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

from ..budget import WorkBudget
from ..events import Event, ReasoningDelta, TextDelta
from .api import ShapedErrors
from .core import Finish, Told, WireCall, dumps, turn, whole
from .gemini_input import GeminiCall, parse_gemini
from .remember import ResponseMemory

__all__ = ["METHODS", "Gemini", "GeminiCall", "error_body", "parse_gemini"]

#: The methods of a model the gateway serves: a turn whole, streamed, or its tokens counted.
METHODS = ("generateContent", "streamGenerateContent", "countTokens")

#: Google's status names (google.rpc.Code) of each HTTP status.
_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def error_body(status: int, message: str) -> dict[str, Any]:
    """An error in Google's shape."""
    return {"error": {"code": status, "message": message, "status": _STATUS.get(status, "UNKNOWN")}}


def _usage(finish: Finish) -> dict[str, int]:
    usage = finish.usage or {}
    prompt, out = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    shown = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": out,
        "totalTokenCount": prompt + out,
    }
    if "cached_tokens" in usage:
        shown["cachedContentTokenCount"] = usage["cached_tokens"]
    return shown


def _call(call: WireCall) -> dict[str, Any]:
    return {"functionCall": {"id": call.id, "name": call.name, "args": call.value or {}}}


def _reason(finish: Finish) -> str:
    return {"length": "MAX_TOKENS", "content_filter": "SAFETY"}.get(finish.reason, "STOP")


def _chunk(parts: list[dict[str, Any]], model: str, rid: str, **more: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if "finishReason" in more:
        candidate["finishReason"] = more.pop("finishReason")
    return {"candidates": [candidate], "modelVersion": model, "responseId": rid, **more}


async def reply(events: AsyncIterable[Event], call: GeminiCall, model: str) -> dict[str, Any]:
    """The whole reply, not streamed."""
    done = await whole(events)
    parts: list[dict[str, Any]] = []
    if done.reasoning and call.thoughts:
        parts.append({"text": done.reasoning, "thought": True})
    if done.text:
        parts.append({"text": done.text})
    parts += [_call(c) for c in done.calls]
    notices = [n.wire() for n in call.notices + done.notices]
    return _chunk(
        parts,
        model,
        secrets.token_hex(12),
        finishReason=_reason(done.finish),
        usageMetadata=_usage(done.finish),
        toolwire={"notices": notices},
    )


async def reply_stream(
    events: AsyncIterable[Event],
    call: GeminiCall,
    model: str,
    sse: bool,
    failed: Callable[[Exception], Any],
) -> AsyncIterator[str]:
    """The reply as Gemini streams it: ``data:`` events (``sse``), else one JSON array.
    ``failed`` turns a backend error into the error object that ends the stream (None:
    re-raise)."""
    rid = secrets.token_hex(12)
    first = True

    def out(value: dict[str, Any]) -> str:
        nonlocal first
        if sse:
            return f"data: {dumps(value)}\n\n"
        lead, first = ("[" if first else ",\r\n"), False
        return lead + dumps(value)

    notices: list[Told] = list(call.notices)
    finish = Finish("stop")
    try:
        async for item in turn(events):
            if isinstance(item, TextDelta) and item.text:
                yield out(_chunk([{"text": item.text}], model, rid))
            elif isinstance(item, ReasoningDelta) and item.text and call.thoughts:
                yield out(_chunk([{"text": item.text, "thought": True}], model, rid))
            elif isinstance(item, WireCall):
                yield out(_chunk([_call(item)], model, rid))
            elif isinstance(item, Told):
                notices.append(item)
            elif isinstance(item, Finish):
                finish = item
    except Exception as exc:
        error = failed(exc)
        if error is None:
            raise
        yield ("\n" if sse else ("[" if first else ",\r\n")) + dumps(error) + ("\n" if sse else "]")
        return
    last = _chunk(  # no parts: an empty text part is no valid content to Gemini's clients
        [],
        model,
        rid,
        finishReason=_reason(finish),
        usageMetadata=_usage(finish),
        toolwire={"notices": [n.wire() for n in notices]},
    )
    yield out(last) + ("" if sse else "]")


class Gemini(ShapedErrors):
    """One request's Gemini API (see :mod:`toolwire.server.api`): the model and method its
    path named, and whether it streams as server-sent events (``alt=sse``)."""

    #: White space: what Google's stream readers skip (see the module).
    keepalive = "\n\n"
    body = staticmethod(error_body)

    def __init__(self, model: str | None = None, method: str = "generateContent", sse: bool = True):
        self.model, self.method, self.sse = model, method, sse
        #: Server-sent events, or (without ``alt=sse``) one JSON array, as Gemini streams.
        self.stream_type = "text/event-stream" if sse else "application/json"

    async def parse(
        self, data: dict[str, Any], memory: ResponseMemory | None, budget: WorkBudget | None = None
    ) -> GeminiCall:
        del memory  # the Gemini API keeps nothing
        if self.method == "countTokens":  # the whole request, as the SDKs may send it
            inner = data.get("generateContentRequest", data.get("generate_content_request"))
            data = inner if isinstance(inner, dict) else data
        streamed, counting = self.method == "streamGenerateContent", self.method == "countTokens"
        return parse_gemini(data, self.model, streamed, budget, counting)

    async def whole(self, events: AsyncIterable[Event], call: Any, model: str) -> dict[str, Any]:
        return await reply(events, call, model)

    def stream(self, events: AsyncIterable[Event], call: Any, model: str) -> AsyncIterator[str]:
        return reply_stream(events, call, model, self.sse, self.mid_stream)
