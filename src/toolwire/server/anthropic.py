"""Anthropic's Messages API (``POST /v1/messages``) over the request core: the reply.

The request is read by :mod:`toolwire.server.anthropic_input`. Out: ``thinking``, ``text``
and ``tool_use`` blocks with ``stop_reason`` ``tool_use``/``end_turn``/``max_tokens`` (or
``stop_sequence``, naming the stop text, when the gateway cut the reply at one),
streamed with the event sequence the official ``anthropic`` client reads: a call's
``tool_use`` block opens as the call begins and its input follows in ``input_json_delta``
pieces as the pipeline streams them (see :mod:`toolwire.server.core`); a call withdrawn
after its first bytes has its block closed as it stands — its partial input never closes
as JSON — and ``stop_reason`` is not ``tool_use`` (``max_tokens`` when the model was cut
short, as Anthropic's API ends a cut call). Usage: ``message_start`` carries an estimate of
the input tokens (four characters a token: the engine counts them only at the end), and
``message_delta`` the engine's own ``input_tokens`` and ``output_tokens`` (and
``cache_read_input_tokens`` when the engine says how many prompt tokens came from its
cache), which the official client takes over those of ``message_start``. Errors come in
Anthropic's shape. The toolwire notices are a top-level ``toolwire`` field (in a stream, on
``message_delta``).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

from ..budget import WorkBudget
from ..events import Event, ReasoningDelta, TextDelta
from .anthropic_input import MessagesCall, parse_messages
from .api import ShapedErrors
from .core import (
    CallOpened,
    CallPiece,
    CallWithdrawn,
    Finish,
    Told,
    WireCall,
    dumps,
    turn,
    whole,
)
from .remember import ResponseMemory

__all__ = [
    "Messages",
    "MessagesCall",
    "error_body",
    "parse_messages",
    "reply",
    "reply_stream",
]

_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def error_body(status: int, message: str) -> dict[str, Any]:
    """An error in Anthropic's shape."""
    return {
        "type": "error",
        "error": {"type": _ERRORS.get(status, "api_error"), "message": message},
    }


def _msg_id() -> str:
    return "msg_" + secrets.token_hex(12)


def _usage(finish: Finish) -> dict[str, int]:
    """The engine's usage in Messages' words: ``input_tokens`` are those not read from a
    cache, ``cache_read_input_tokens`` those that were (when the engine says)."""
    usage = finish.usage or {}
    cached = usage.get("cached_tokens", 0)
    out = {
        "input_tokens": max(0, usage.get("prompt_tokens", 0) - cached),
        "output_tokens": usage.get("completion_tokens", 0),
    }
    if "cached_tokens" in usage:
        out["cache_read_input_tokens"] = cached
    return out


def _estimate(call: MessagesCall) -> int:
    """The input tokens a stream's ``message_start`` can say before the engine has counted
    them: four characters a token of what the model is given."""
    request = call.request
    size = sum(len(dumps(m)) for m in request.messages)
    size += sum(len(dumps(t)) for t in request.tools or ())
    return size // 4


def _use(call: WireCall) -> dict[str, Any]:
    """A call as a ``tool_use`` block (its arguments an object: see pipeline.end)."""
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": call.value or {}}


def _stop(finish: Finish) -> str:
    """The turn's finish (decided by the pipeline) in Messages' words."""
    if finish.stop_sequence is not None and finish.reason == "stop":
        return "stop_sequence"
    return "tool_use" if finish.reason == "tool_calls" else _STOP.get(finish.reason, "end_turn")


async def reply(events: AsyncIterable[Event], call: MessagesCall, model: str) -> dict[str, Any]:
    """The whole reply, not streamed."""
    done = await whole(events)
    notices = call.notices + done.notices
    uses = [_use(c) for c in done.calls]
    content: list[dict[str, Any]] = []
    if done.reasoning:
        content.append({"type": "thinking", "thinking": done.reasoning, "signature": ""})
    if done.text:
        content.append({"type": "text", "text": done.text})
    content += uses
    return {
        "id": _msg_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _stop(done.finish),
        "stop_sequence": done.finish.stop_sequence,
        "usage": _usage(done.finish),
        "toolwire": {"notices": [n.wire() for n in notices]},
    }


def _event(kind: str, **fields: Any) -> str:
    return f"event: {kind}\ndata: {dumps({'type': kind, **fields})}\n\n"


async def reply_stream(
    events: AsyncIterable[Event], call: MessagesCall, model: str, failed: Callable[[Exception], Any]
) -> AsyncIterator[str]:
    """The reply as Messages server-sent events: a block per run of text or thinking, a
    ``tool_use`` block per complete call (its input in one ``input_json_delta``).
    ``failed`` turns a backend error into an ``error`` event's body (None: re-raise)."""
    start: dict[str, Any] = {
        "id": _msg_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": _estimate(call), "output_tokens": 0},
    }
    yield _event("message_start", message=start)
    index = -1
    open_kind: str | None = None
    notices: list[Told] = list(call.notices)
    finish = Finish("stop")

    def close() -> list[str]:
        nonlocal open_kind
        if open_kind is None:
            return []
        open_kind = None
        return [_event("content_block_stop", index=index)]

    try:
        async for item in turn(events):
            if isinstance(item, (TextDelta, ReasoningDelta)):
                kind = "text" if isinstance(item, TextDelta) else "thinking"
                if open_kind != kind:
                    for line in close():
                        yield line
                    index += 1
                    open_kind = kind
                    block: dict[str, Any] = (
                        {"type": "text", "text": ""}
                        if kind == "text"
                        else {"type": "thinking", "thinking": "", "signature": ""}
                    )
                    yield _event("content_block_start", index=index, content_block=block)
                delta = (
                    {"type": "text_delta", "text": item.text}
                    if kind == "text"
                    else {"type": "thinking_delta", "thinking": item.text}
                )
                yield _event("content_block_delta", index=index, delta=delta)
            elif isinstance(item, CallOpened):
                for line in close():
                    yield line
                index += 1
                open_kind = "tool_use"
                block = {"type": "tool_use", "id": item.id, "name": item.name, "input": {}}
                yield _event("content_block_start", index=index, content_block=block)
            elif isinstance(item, CallPiece):
                delta = {"type": "input_json_delta", "partial_json": item.text}
                yield _event("content_block_delta", index=index, delta=delta)
            elif isinstance(item, CallWithdrawn):
                for line in close():
                    yield line
            elif isinstance(item, WireCall):
                if item.streamed:
                    for line in close():
                        yield line
                    continue
                for line in close():
                    yield line
                index += 1
                block = {**_use(item), "input": {}}
                yield _event("content_block_start", index=index, content_block=block)
                delta = {"type": "input_json_delta", "partial_json": item.arguments}
                yield _event("content_block_delta", index=index, delta=delta)
                yield _event("content_block_stop", index=index)
            elif isinstance(item, Told):
                notices.append(item)
            elif isinstance(item, Finish):
                finish = item
    except Exception as exc:
        error = failed(exc)
        if error is None:
            raise
        yield _event("error", error=error["error"])
        return
    for line in close():
        yield line
    yield _event(
        "message_delta",
        delta={"stop_reason": _stop(finish), "stop_sequence": finish.stop_sequence},
        usage=_usage(finish) if finish.usage else {"output_tokens": 0},
        toolwire={"notices": [n.wire() for n in notices]},
    )
    yield _event("message_stop")


class Messages(ShapedErrors):
    """``POST /v1/messages`` (see :mod:`toolwire.server.api`): errors in Anthropic's shape."""

    body = staticmethod(error_body)

    #: Anthropic's own keep-alive, which its clients skip.
    keepalive = _event("ping")
    stream_type = "text/event-stream"

    async def parse(
        self, data: dict[str, Any], memory: ResponseMemory | None, budget: WorkBudget | None = None
    ) -> MessagesCall:
        del memory  # Messages keeps nothing
        return parse_messages(data, budget)

    async def whole(self, events: AsyncIterable[Event], call: Any, model: str) -> dict[str, Any]:
        return await reply(events, call, model)

    def stream(self, events: AsyncIterable[Event], call: Any, model: str) -> AsyncIterator[str]:
        return reply_stream(events, call, model, self.mid_stream)
