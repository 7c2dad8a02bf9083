"""Anthropic's Messages API (``POST /v1/messages``, ``/v1/messages/count_tokens``) over the
request core.

In: ``system``, ``messages`` with content blocks ``text``, ``tool_use``, ``tool_result``
(a string or text blocks, ``is_error``) and ``thinking``; ``tools`` with ``input_schema``;
``tool_choice`` ``auto``/``any``/``tool``/``none`` (``disable_parallel_tool_use``);
``max_tokens``, ``temperature``, ``thinking``, ``stream``, ``output_config.format`` (a
structured output, ``json_schema``; ``output_config.effort`` is ignored). Out:
``thinking``, ``text`` and ``tool_use`` blocks with ``stop_reason``
``tool_use``/``end_turn``/``max_tokens``, streamed with the event sequence the official
``anthropic`` client reads. Errors come in Anthropic's shape. The toolwire notices are a
top-level ``toolwire`` field (in a stream, on ``message_delta``).

Not served (a 400 naming the field): images and documents, ``stop_sequences``. Server tools
(web search, code execution…) are left out with a ``tool-not-served`` notice.
``metadata``, ``top_p``, ``top_k``, ``service_tier`` change nothing here and are ignored.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import JSONResponse, Response

from ..conversation import _estimate
from ..errors import ToolwireError, UsageError
from ..events import Event, ReasoningDelta, TextDelta
from ..pipeline import Backend, Request, Transport, planned
from .api import closing
from .core import Finish, Told, WireCall, dumps, turn, whole
from .failures import Failure, failure
from .fields import check, options
from .output import messages_format
from .remember import ResponseMemory
from .validate import RequestError

__all__ = [
    "Messages",
    "MessagesCall",
    "count_tokens",
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


class _Fields(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    model: str | None = None
    messages: list[Any] = Field(min_length=1)
    system: str | list[Any] | None = None
    max_tokens: int | None = Field(default=None, ge=1, le=10**9)
    temperature: float | int | None = Field(default=None, ge=0, le=1)
    tools: list[Any] | None = None
    tool_choice: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None
    stream: bool = False
    stop_sequences: list[str] | None = None
    output_config: dict[str, Any] | None = None


class _Tool(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    name: str = Field(min_length=1, max_length=256)
    description: str | None = None
    input_schema: dict[str, Any]
    type: Literal["custom"] | None = None


class _Choice(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool = False


class MessagesCall:
    """A parsed Messages request: the turn, the model asked for, what it was told."""

    def __init__(self, request: Request, model: str | None, notices: list[Told]) -> None:
        self.request, self.model = request, model
        #: What the request was told before the turn (tools left out).
        self.notices = notices


def _texts(blocks: Any, where: str) -> str:
    """Text blocks (or a string) as one text."""
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        raise RequestError(f"'{where}' must be a string or a list of text blocks", where)
    out = []
    for j, block in enumerate(blocks):
        if (
            not isinstance(block, dict)
            or block.get("type") != "text"
            or not isinstance(block.get("text"), str)
        ):
            raise RequestError(
                f"'{where}[{j}]' must be a text block; images and documents are not served",
                f"{where}[{j}]",
            )
        out.append(block["text"])
    return "\n".join(out)


def _user(blocks: list[Any], where: str, called: set[str]) -> list[dict[str, Any]]:
    """A user turn's blocks: tool results first (as ``tool`` messages), then its text."""
    results: list[dict[str, Any]] = []
    text: list[str] = []
    for j, block in enumerate(blocks):
        at = f"{where}[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            text.append(block["text"])
        elif kind == "tool_result":
            use = block.get("tool_use_id")
            if not isinstance(use, str) or use not in called:
                raise RequestError(
                    f"'{at}.tool_use_id' must echo the id of an earlier tool_use block",
                    f"{at}.tool_use_id",
                )
            content = _texts(block.get("content", ""), f"{at}.content")
            is_error = block.get("is_error", False)
            if not isinstance(is_error, bool):
                raise RequestError(f"'{at}.is_error' must be true or false", f"{at}.is_error")
            if is_error:
                content = f"error: {content}"
            results.append({"role": "tool", "tool_call_id": use, "content": content})
        else:
            raise RequestError(
                f"'{at}' must be a text or tool_result block; images and documents are not served",
                f"{at}.type",
            )
    if text:
        results.append({"role": "user", "content": "\n".join(text)})
    return results


def _assistant(blocks: list[Any], where: str, called: set[str]) -> dict[str, Any]:
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        at = f"{where}[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            text.append(block["text"])
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not block["id"]:
                raise RequestError(f"'{at}.id' must be a non-empty string", f"{at}.id")
            if not isinstance(block.get("name"), str) or not block["name"]:
                raise RequestError(f"'{at}.name' must be a non-empty string", f"{at}.name")
            if not isinstance(block.get("input"), dict):
                raise RequestError(f"'{at}.input' must be an object", f"{at}.input")
            called.add(block["id"])
            calls.append(
                {
                    "id": block["id"],
                    "type": "function",
                    "function": {"name": block["name"], "arguments": dumps(block["input"])},
                }
            )
        elif kind in ("thinking", "redacted_thinking"):
            continue  # the model's own earlier thinking: not sent back to it
        else:
            raise RequestError(f"'{at}' must be a text, tool_use or thinking block", f"{at}.type")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = calls
    return message


def _messages(fields: _Fields) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if fields.system:
        out.append({"role": "system", "content": _texts(fields.system, "system")})
    called: set[str] = set()
    for i, given in enumerate(fields.messages):
        where = f"messages[{i}]"
        role = given.get("role") if isinstance(given, dict) else None
        if role not in ("user", "assistant"):
            raise RequestError(f"'{where}.role' must be user or assistant", f"{where}.role")
        content = given.get("content")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        if not isinstance(content, list):
            raise RequestError(
                f"'{where}.content' must be a string or a list of blocks", f"{where}.content"
            )
        if role == "user":
            out += _user(content, f"{where}.content", called)
        else:
            out.append(_assistant(content, f"{where}.content", called))
    return out


def _tools(fields: _Fields, skipped: list[Told]) -> list[dict[str, Any]] | None:
    """Client tools for the engine; a server tool (web search, code execution…) is left
    out with a ``tool-not-served`` notice, so a client offering one still gets the rest."""
    if fields.tools is None:
        return None
    out = []
    for i, given in enumerate(fields.tools):
        kind = given.get("type") if isinstance(given, dict) else None
        if isinstance(kind, str) and kind != "custom":
            name = given.get("name")
            named = f" {name[:80]!r}" if isinstance(name, str) else ""
            skipped.append(
                Told(
                    "tool-not-served",
                    f"tools[{i}] (a {kind[:40]!r} tool{named}) was left out: only tools with "
                    "an input_schema are served",
                )
            )
            continue
        tool = check(_Tool, given, f"tools[{i}]")
        fn: dict[str, Any] = {"name": tool.name, "parameters": tool.input_schema}
        if tool.description is not None:
            fn["description"] = tool.description
        out.append({"type": "function", "function": fn})
    return out


def parse_messages(data: Mapping[str, Any]) -> MessagesCall:
    """The engine request for a Messages body (already JSON, an object)."""
    fields = check(_Fields, data, "")
    if fields.stop_sequences:
        raise RequestError("'stop_sequences' is not served by this gateway", "stop_sequences")
    skipped: list[Told] = []
    tools = _tools(fields, skipped)
    choice: Any = None
    parallel = True
    if fields.tool_choice is not None:
        picked = check(_Choice, fields.tool_choice, "tool_choice")
        parallel = not picked.disable_parallel_tool_use
        if picked.type == "tool":
            if not picked.name:
                raise RequestError(
                    "'tool_choice.name' is required with type tool", "tool_choice.name"
                )
            if not any(t["function"]["name"] == picked.name for t in tools or ()):
                raise RequestError(
                    f"tool_choice names {picked.name[:80]!r}, which is not in 'tools'",
                    "tool_choice.name",
                )
            choice = {"type": "function", "function": {"name": picked.name}}
        elif picked.type == "none":
            choice = "none"
        else:
            choice = {"auto": "auto", "any": "required"}[picked.type]
    think = None
    if fields.thinking is not None:
        kind = fields.thinking.get("type")
        if kind not in ("enabled", "disabled", "adaptive"):
            raise RequestError(
                "'thinking.type' must be enabled, disabled or adaptive", "thinking.type"
            )
        think = kind != "disabled"
    settings = options(data)
    request = Request(  # the turn settles the choice: a named tool alone, none: no tools
        _messages(fields),
        tools or None,
        tool_choice=choice,
        parallel_calls=parallel,
        temperature=fields.temperature,
        max_tokens=fields.max_tokens,
        think=think,
        strict=settings.get("strict", False),
        constrained=settings.get("constrained", True),
        stream=bool(fields.stream),
        output=messages_format(fields.output_config),
    )
    return MessagesCall(request, fields.model, skipped)


def count_tokens(backend: Backend, request: Request) -> int:
    """The request's input tokens: exact where the engine renders the prompt itself (a
    local model: its template and tokenizer), else estimated (4 characters a token)."""
    prompt = getattr(backend, "prompt", None)
    if isinstance(backend, Transport) and callable(prompt):
        # the prompt as the pipeline plans it (tools in the template, in words, or none)
        return int(backend.count_tokens(prompt(*planned(backend, request))))
    tools = sum(len(json.dumps(t)) for t in request.tools or ()) // 4
    return sum(_estimate(m) for m in request.messages) + tools


def _msg_id() -> str:
    return "msg_" + secrets.token_hex(12)


def _usage(finish: Finish) -> dict[str, int]:
    usage = finish.usage or {}
    return {
        "input_tokens": usage.get("prompt_tokens", 0),
        "output_tokens": usage.get("completion_tokens", 0),
    }


def _use(call: WireCall) -> dict[str, Any]:
    """A call as a ``tool_use`` block (its arguments an object: see pipeline.end)."""
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": call.value or {}}


def _stop(finish: Finish) -> str:
    """The turn's finish (decided by the pipeline) in Messages' words."""
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
        "stop_sequence": None,
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
        "usage": {"input_tokens": 0, "output_tokens": 0},
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
            elif isinstance(item, WireCall):
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
            else:
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
        delta={"stop_reason": _stop(finish), "stop_sequence": None},
        usage={"output_tokens": _usage(finish)["output_tokens"]},
        toolwire={"notices": [n.wire() for n in notices]},
    )
    yield _event("message_stop")


class Messages:
    """``POST /v1/messages`` (see :mod:`toolwire.server.api`): errors in Anthropic's shape."""

    async def parse(self, data: dict[str, Any], memory: ResponseMemory | None) -> MessagesCall:
        del memory  # Messages keeps nothing
        return parse_messages(data)

    async def whole(self, events: AsyncIterable[Event], call: Any, model: str) -> dict[str, Any]:
        return await reply(events, call, model)

    def stream(self, events: AsyncIterable[Event], call: Any, model: str) -> AsyncIterator[str]:
        return reply_stream(events, call, model, self.mid_stream)

    def refusal(self, exc: RequestError) -> Response:
        message = exc.message
        if exc.param and exc.param not in message:
            message = f"{exc.param}: {message}"
        body = error_body(exc.status, message)
        return JSONResponse(body, status_code=exc.status, headers=closing(exc))

    def failed(self, failed: Failure) -> Response:
        body = error_body(failed.status, failed.message)
        return JSONResponse(body, status_code=failed.status, headers=failed.headers)

    @staticmethod
    def mid_stream(exc: Exception) -> dict[str, Any] | None:
        """A failure mid-stream as the Anthropic error object a last event carries."""
        if isinstance(exc, UsageError):
            return error_body(400, str(exc))
        if not isinstance(exc, ToolwireError):
            return None
        failed = failure(exc)
        return error_body(failed.status, failed.message)
