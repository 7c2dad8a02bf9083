"""OpenAI's Chat Completions replies (``POST /v1/chat/completions``) over the request core.

Replies follow OpenAI's shape: ``arguments`` is a JSON string, ``content`` is null when the
reply is only calls, ``finish_reason`` is ``tool_calls``. A streamed call carries its own
``index``: its first chunk its ``id``, ``name`` and empty ``arguments``, the next ones its
arguments as the pipeline streams them (see :mod:`toolwire.server.core`); a call withdrawn
after its first bytes simply stops (its arguments never close as JSON, and the finish
reason is not ``tool_calls``). The notices are a top-level ``toolwire`` object (streamed: a
chunk with no choices before ``[DONE]``). With ``stream_options: {"include_usage": true}``
the last chunk before them has ``choices: []`` and the engine's ``usage`` (none when the
engine counted nothing), and every other chunk ``usage: null``, as OpenAI sends them.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..budget import WorkBudget
from ..events import Event, ReasoningDelta, TextDelta
from ..pipeline import Request
from .api import OpenAIErrors
from .core import CallOpened, CallPiece, Finish, Told, WireCall, dumps, turn, whole
from .remember import ResponseMemory
from .validate import RequestError, validate_chat

__all__ = ["ChatCompletions", "complete", "complete_stream"]


def _call(call: WireCall, index: bool) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }
    return {"index": call.index, **wire} if index else wire


def _usage(finish: Finish) -> dict[str, Any] | None:
    """The engine's usage in OpenAI's shape: its counts, the total, and the prompt tokens
    read from a cache when the engine says how many (``cached_tokens``)."""
    if not finish.usage:
        return None
    usage: dict[str, Any] = {k: v for k, v in finish.usage.items() if k != "cached_tokens"}
    usage["total_tokens"] = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
    if "cached_tokens" in finish.usage:
        usage["prompt_tokens_details"] = {"cached_tokens": finish.usage["cached_tokens"]}
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
    include_usage: bool = False,
) -> AsyncIterator[str]:
    """The reply as Chat Completions chunks; ``failed`` turns a backend error into the
    error object a last chunk carries (None: re-raise). ``include_usage``: the request's
    ``stream_options.include_usage``."""
    base: dict[str, Any] = {
        "id": _rid(),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    if include_usage:
        base["usage"] = None

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
            elif isinstance(item, CallOpened):
                opened = {"name": item.name, "arguments": ""}
                call = {"index": item.index, "id": item.id, "type": "function"}
                yield chunk({"tool_calls": [{**call, "function": opened}]})
            elif isinstance(item, CallPiece):
                piece = {"index": item.index, "function": {"arguments": item.text}}
                yield chunk({"tool_calls": [piece]})
            elif isinstance(item, WireCall):
                if not item.streamed:
                    yield chunk({"tool_calls": [_call(item, True)]})
            elif isinstance(item, Told):
                notices.append(item)
            elif isinstance(item, Finish):
                finish = item
    except Exception as exc:
        error = failed(exc)
        if error is None:
            raise
        yield "data: " + dumps(error) + "\n\n"
        return
    yield chunk({}, finish.reason)
    usage = _usage(finish) if include_usage else None
    if usage is not None:  # an engine that counted nothing gets no figures made up
        yield "data: " + dumps({**base, "choices": [], "usage": usage}) + "\n\n"
    told = {**base, "choices": [], "toolwire": {"notices": [n.wire() for n in notices]}}
    yield "data: " + dumps(told) + "\n\n"
    yield "data: [DONE]\n\n"


@dataclass(frozen=True)
class _Parsed:
    request: Request
    model: str | None
    include_usage: bool = False


def _include_usage(data: Mapping[str, Any]) -> bool:
    """``stream_options.include_usage``, checked: a malformed one is refused naming it."""
    options = data.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, Mapping):
        raise RequestError("'stream_options' must be an object", "stream_options")
    include = options.get("include_usage", False)
    if include is None:
        return False
    if not isinstance(include, bool):
        raise RequestError(
            "'stream_options.include_usage' must be a boolean", "stream_options.include_usage"
        )
    return include


class ChatCompletions(OpenAIErrors):
    """``POST /v1/chat/completions`` (see :mod:`toolwire.server.api`)."""

    async def parse(
        self, data: dict[str, Any], memory: ResponseMemory | None, budget: WorkBudget | None = None
    ) -> _Parsed:
        del memory  # Chat Completions keeps nothing
        model = data.get("model")
        request = validate_chat(data, budget)
        return _Parsed(request, model if isinstance(model, str) else None, _include_usage(data))

    async def whole(self, events: AsyncIterable[Event], call: Any, model: str) -> dict[str, Any]:
        del call
        return await complete(events, model)

    def stream(self, events: AsyncIterable[Event], call: Any, model: str) -> AsyncIterator[str]:
        include = bool(getattr(call, "include_usage", False))
        return complete_stream(events, model, failed=self.mid_stream, include_usage=include)
