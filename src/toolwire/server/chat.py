"""OpenAI's Chat Completions replies (``POST /v1/chat/completions``) over the request core.

Replies follow OpenAI's shape: ``arguments`` is a JSON string, ``content`` is null when the
reply is only calls, ``finish_reason`` is ``tool_calls``, streamed calls carry their own
``index`` and are sent whole once complete. The notices are a top-level ``toolwire``
object (streamed: a chunk with no choices before ``[DONE]``).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..events import Event, ReasoningDelta, TextDelta
from ..pipeline import Request
from .api import OpenAIErrors
from .core import Finish, Told, WireCall, dumps, turn, whole
from .remember import ResponseMemory
from .validate import validate_chat

__all__ = ["ChatCompletions", "complete", "complete_stream"]


def _call(call: WireCall, index: bool) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }
    return {"index": call.index, **wire} if index else wire


def _usage(finish: Finish) -> dict[str, int] | None:
    if not finish.usage:
        return None
    usage = dict(finish.usage)
    usage["total_tokens"] = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
    return usage


def _rid() -> str:
    return "chatcmpl-" + secrets.token_hex(12)


async def complete(events: AsyncIterable[Event], model: str) -> dict[str, Any]:
    """The whole reply, not streamed."""
    done = await whole(events)
    message: dict[str, Any] = {
        "role": "assistant",
        "content": done.text if done.text or not done.calls else None,
    }
    if done.reasoning:
        message["reasoning_content"] = done.reasoning
    if done.calls:
        message["tool_calls"] = [_call(c, False) for c in done.calls]
    reply: dict[str, Any] = {
        "id": _rid(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": done.finish.reason}],
        "toolwire": {"notices": [n.wire() for n in done.notices]},
    }
    usage = _usage(done.finish)
    if usage is not None:
        reply["usage"] = usage
    return reply


async def complete_stream(
    events: AsyncIterable[Event],
    model: str,
    *,
    failed: Callable[[Exception], Mapping[str, Any] | None],
) -> AsyncIterator[str]:
    """The reply as Chat Completions chunks; ``failed`` turns a backend error into the
    error object a last chunk carries (None: re-raise)."""
    base = {
        "id": _rid(),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: Mapping[str, Any], finish: str | None = None) -> str:
        body = {**base, "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}]}
        return "data: " + dumps(body) + "\n\n"

    yield chunk({"role": "assistant", "content": ""})
    notices: list[Told] = []
    finish = Finish("stop")
    try:
        async for item in turn(events):
            if isinstance(item, TextDelta):
                yield chunk({"content": item.text})
            elif isinstance(item, ReasoningDelta):
                yield chunk({"reasoning_content": item.text})
            elif isinstance(item, WireCall):
                yield chunk({"tool_calls": [_call(item, True)]})
            elif isinstance(item, Told):
                notices.append(item)
            else:
                finish = item
    except Exception as exc:
        error = failed(exc)
        if error is None:
            raise
        yield "data: " + dumps(error) + "\n\n"
        return
    yield chunk({}, finish.reason)
    yield (
        "data: "
        + dumps({**base, "choices": [], "toolwire": {"notices": [n.wire() for n in notices]}})
        + "\n\n"
    )
    yield "data: [DONE]\n\n"


@dataclass(frozen=True)
class _Parsed:
    request: Request
    model: str | None


class ChatCompletions(OpenAIErrors):
    """``POST /v1/chat/completions`` (see :mod:`toolwire.server.api`)."""

    async def parse(self, data: dict[str, Any], memory: ResponseMemory | None) -> _Parsed:
        del memory  # Chat Completions keeps nothing
        model = data.get("model")
        return _Parsed(validate_chat(data), model if isinstance(model, str) else None)

    async def whole(self, events: AsyncIterable[Event], call: Any, model: str) -> dict[str, Any]:
        del call
        return await complete(events, model)

    def stream(self, events: AsyncIterable[Event], call: Any, model: str) -> AsyncIterator[str]:
        del call
        return complete_stream(events, model, failed=self.mid_stream)
