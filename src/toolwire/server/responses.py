"""OpenAI's Responses API (``POST /v1/responses``), stateless, over the request core.

In: ``input`` as a string or items (messages, ``function_call``, ``function_call_output``),
``instructions``, function ``tools``, ``tool_choice``, ``parallel_tool_calls``,
``max_output_tokens``, ``temperature``, ``stream``, ``text.format`` (a structured output:
``json_object`` or ``json_schema``, see :mod:`toolwire.pipeline.structured`). Out:
``reasoning``, ``message`` (``output_text``) and ``function_call`` items, streamed with
the event sequence the official client's ``responses.stream()`` reads. The items become
the Chat Completions messages the core takes, so every engine and every repair is the
same as for the other APIs.

With a conversation store (``toolwire serve`` opens one), responses are stored unless the
request says ``store: false``, and ``previous_response_id`` continues one (see
:mod:`toolwire.server.remember`); without one, both get a 400 saying so. Not served (a 400
that names the field): input images and files. Tools other than functions (a provider's
own: web search, a shell, free-form ``custom`` tools) are left out with a
``tool-not-served`` notice, so a client that offers them still gets its function tools.
Fields that change nothing here (``metadata``, ``user``, ``reasoning``, ``text.verbosity``,
``truncation``, ``include``, ``top_p``…) are accepted and ignored.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ToolwireError
from ..events import Event, ReasoningDelta, TextDelta
from ..pipeline import Request
from .api import OpenAIErrors
from .core import Finish, Told, WireCall, dumps, turn, whole
from .fields import check, options
from .output import responses_format
from .remember import ResponseMemory
from .validate import RequestError

__all__ = ["Responses", "ResponsesCall", "parse_responses", "respond", "respond_stream"]


class _Fields(BaseModel):
    """The top-level fields read; strict types, so ``"yes"`` is not a boolean."""

    model_config = ConfigDict(extra="allow", strict=True)

    model: str | None = None
    input: str | list[Any]
    instructions: str | None = None
    tools: list[Any] | None = None
    tool_choice: Literal["auto", "none", "required"] | dict[str, Any] | None = None
    parallel_tool_calls: bool = True
    max_output_tokens: int | None = Field(default=None, ge=1, le=10**9)
    temperature: float | int | None = Field(default=None, ge=0, le=2)
    stream: bool = False
    store: bool | None = None
    previous_response_id: str | None = None
    text: dict[str, Any] | None = None


class _Tool(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    type: Literal["function"]
    name: str = Field(min_length=1, max_length=256)
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ResponsesCall:
    """A parsed Responses request: the engine request and what the reply echoes."""

    def __init__(
        self,
        request: Request,
        fields: _Fields,
        conversation: list[dict[str, Any]],
        memory: ResponseMemory | None,
    ) -> None:
        self.request = request
        self.stream = fields.stream
        #: The conversation without the instructions, to store with the output.
        self.conversation = conversation
        #: What the request was told before the turn (tools left out).
        self.notices: list[Told] = []
        #: Where the response is stored, when it is.
        self.memory = memory if memory is not None and fields.store is not False else None
        self.model = fields.model
        self.echo: dict[str, Any] = {
            "instructions": fields.instructions,
            "tools": [dict(t) for t in fields.tools or ()],
            "tool_choice": fields.tool_choice or "auto",
            "parallel_tool_calls": fields.parallel_tool_calls,
            "temperature": fields.temperature,
            "max_output_tokens": fields.max_output_tokens,
            "previous_response_id": fields.previous_response_id,
            "store": self.memory is not None,
            "text": fields.text or {"format": {"type": "text"}},
        }


def _text(content: Any, where: str) -> str:
    """A message's content: a string, or text parts (``input_text``/``output_text``)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise RequestError(f"'{where}' must be a string or a list of text parts", where)
    out: list[str] = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in ("input_text", "output_text", "text") or not isinstance(
            part.get("text"), str
        ):
            raise RequestError(
                f"'{where}[{j}]' must be a text part such as "
                '{"type": "input_text", "text": "..."}; images and files are not served',
                f"{where}[{j}]",
            )
        out.append(part["text"])
    return "".join(out)


def _messages(fields: _Fields, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The input items as Chat Completions messages after ``history`` (calls folded into
    the assistant message before them, as Chat Completions has them)."""
    messages: list[dict[str, Any]] = list(history)
    if isinstance(fields.input, str):
        messages.append({"role": "user", "content": fields.input})
        return messages
    called = {c["id"] for m in history for c in m.get("tool_calls") or () if "id" in c}
    for i, item in enumerate(fields.input):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise RequestError(f"'{where}' must be an object", where)
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer", "assistant"):
                raise RequestError(
                    f"'{where}.role' must be user, system, developer or assistant",
                    f"{where}.role",
                )
            text = _text(item.get("content"), f"{where}.content")
            messages.append({"role": "system" if role == "developer" else role, "content": text})
        elif kind == "function_call":
            for key in ("call_id", "name", "arguments"):
                if not isinstance(item.get(key), str) or not item[key]:
                    raise RequestError(
                        f"'{where}.{key}' must be a non-empty string", f"{where}.{key}"
                    )
            call = {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"]},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and not last.get("_answered"):
                last.setdefault("tool_calls", []).append(call)
                if not last.get("content"):
                    last["content"] = None
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            called.add(item["call_id"])
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or call_id not in called:
                raise RequestError(
                    f"'{where}.call_id' must echo the call_id of an earlier function_call",
                    f"{where}.call_id",
                )
            output = item.get("output")
            text = output if isinstance(output, str) else _text(output, f"{where}.output")
            for m in reversed(messages):
                if m["role"] == "assistant":
                    m["_answered"] = True
                    break
            messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
        elif kind == "reasoning":
            continue  # the model's own earlier thinking: not sent back to it
        else:
            raise RequestError(
                f"'{where}.type' {str(kind)[:40]!r} is not served: message, function_call, "
                "function_call_output or reasoning",
                f"{where}.type",
            )
    for m in messages:
        m.pop("_answered", None)
    return messages


def _tools(fields: _Fields, skipped: list[Told]) -> list[dict[str, Any]] | None:
    """Function tools for the engine; a tool of another kind (a provider's own: web search,
    a shell, a free-form ``custom`` tool) is left out with a ``tool-not-served`` notice,
    so a client that offers them still gets its function tools."""
    if fields.tools is None:
        return None
    out = []
    for i, given in enumerate(fields.tools):
        kind = given.get("type") if isinstance(given, dict) else None
        if isinstance(kind, str) and kind != "function":
            skipped.append(_not_served(f"tools[{i}]", kind, given.get("name")))
            continue
        tool = check(_Tool, given, f"tools[{i}]")
        fn: dict[str, Any] = {
            "name": tool.name,
            "parameters": tool.parameters or {"type": "object"},
        }
        if tool.description is not None:
            fn["description"] = tool.description
        out.append({"type": "function", "function": fn})
    return out


def _not_served(where: str, kind: str, name: Any) -> Told:
    named = f" {name[:80]!r}" if isinstance(name, str) else ""
    return Told(
        "tool-not-served",
        f"{where} (a {kind[:40]!r} tool{named}) was left out: only function tools are served",
    )


async def parse_responses(
    data: Mapping[str, Any], memory: ResponseMemory | None = None
) -> ResponsesCall:
    """The engine request for a Responses body (already JSON, an object); ``memory``
    serves ``previous_response_id`` and stores responses."""
    fields = check(_Fields, data, "")
    if memory is None and fields.previous_response_id is not None:
        raise RequestError(
            "'previous_response_id' is not served: this gateway keeps no conversations; "
            "send the whole input instead",
            "previous_response_id",
        )
    if memory is None and fields.store:
        raise RequestError(
            "'store: true' is not served: this gateway keeps no conversations", "store"
        )
    history = []
    if memory is not None and fields.previous_response_id is not None:
        history = await memory.history(fields.previous_response_id)
    conversation = _messages(fields, history)
    if not conversation:
        raise RequestError("'input' must not be empty", "input")
    messages = conversation
    if fields.instructions:
        messages = [{"role": "system", "content": fields.instructions}, *conversation]
    skipped: list[Told] = []
    tools = _tools(fields, skipped)
    choice: Any = fields.tool_choice
    if isinstance(choice, dict):
        name = choice.get("name")
        if choice.get("type") != "function" or not isinstance(name, str):
            raise RequestError(
                "'tool_choice' must be auto, none, required or "
                '{"type": "function", "name": "..."}',
                "tool_choice",
            )
        if not any(t["function"]["name"] == name for t in tools or ()):
            raise RequestError(
                f"tool_choice names {name[:80]!r}, which is not in 'tools'", "tool_choice"
            )
        choice = {"type": "function", "function": {"name": name}}
    settings = options(data)
    request = Request(  # the turn settles the choice: a named tool alone, none: no tools
        messages,
        tools or None,
        tool_choice=choice,
        parallel_calls=fields.parallel_tool_calls,
        temperature=fields.temperature,
        max_tokens=fields.max_output_tokens,
        strict=settings.get("strict", False),
        constrained=settings.get("constrained", True),
        stream=bool(fields.stream),
        output=responses_format(fields.text),
    )
    call = ResponsesCall(request, fields, conversation, memory)
    call.notices = skipped
    return call


def _usage(finish: Finish) -> dict[str, Any] | None:
    if not finish.usage:
        return None
    given = finish.usage.get("prompt_tokens", 0), finish.usage.get("completion_tokens", 0)
    return {
        "input_tokens": given[0],
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": given[1],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": sum(given),
    }


def _response(
    rid: str, model: str, call: ResponsesCall, status: str, output: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "error": None,
        "incomplete_details": None,
        **call.echo,
    }


def _finished(body: dict[str, Any], finish: Finish, notices: list[Told]) -> dict[str, Any]:
    if finish.reason == "length":
        body["status"] = "incomplete"
        body["incomplete_details"] = {"reason": "max_output_tokens"}
    else:
        body["status"] = "completed"
    usage = _usage(finish)
    if usage is not None:
        body["usage"] = usage
    body["toolwire"] = {"notices": [n.wire() for n in notices]}
    return body


def _id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _reasoning_item(iid: str, text: str) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": iid,
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
        "status": "completed",
    }


def _message_item(iid: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {
        "type": "message",
        "id": iid,
        "role": "assistant",
        "status": status,
        "content": content if status == "completed" else [],
    }


def _call_item(call: WireCall, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_" + call.id.removeprefix("call_"),
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments if status == "completed" else "",
        "status": status,
    }


def _said(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The output items as the assistant message a continuation is given."""
    text = "".join(
        part["text"] for item in output if item["type"] == "message" for part in item["content"]
    )
    calls = [
        {
            "id": item["call_id"],
            "type": "function",
            "function": {"name": item["name"], "arguments": item["arguments"]},
        }
        for item in output
        if item["type"] == "function_call"
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return [message] if text or calls else []


async def _kept(
    call: ResponsesCall, rid: str, model: str, output: list[dict[str, Any]]
) -> list[Told]:
    """Store the response when asked; a notice when the store failed (the reply stands)."""
    if call.memory is None:
        return []
    try:
        await call.memory.keep(rid, model, [*call.conversation, *_said(output)])
    except ToolwireError as exc:
        return [Told("response-not-stored", f"the response could not be stored: {exc}")]
    return []


async def respond(events: AsyncIterable[Event], call: ResponsesCall, model: str) -> dict[str, Any]:
    """The whole reply, not streamed."""
    done = await whole(events)
    output: list[dict[str, Any]] = []
    if done.reasoning:
        output.append(_reasoning_item(_id("rs"), done.reasoning))
    if done.text:
        output.append(_message_item(_id("msg"), done.text))
    output += [_call_item(c) for c in done.calls]
    rid = _id("resp")
    notices = call.notices + done.notices + await _kept(call, rid, model, output)
    return _finished(_response(rid, model, call, "in_progress", output), done.finish, notices)


class _Events:
    """Numbers the stream's events, as the client checks."""

    def __init__(self) -> None:
        self.sequence = 0

    def __call__(self, kind: str, **fields: Any) -> str:
        body = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return f"event: {kind}\ndata: {dumps(body)}\n\n"


async def respond_stream(
    events: AsyncIterable[Event], call: ResponsesCall, model: str, failed: Any
) -> AsyncIterator[str]:
    """The reply as Responses server-sent events.

    Text and thinking are streamed as they come, each in its own output item; a call is
    sent whole once complete (``output_item.added``, the arguments in one delta, ``.done``).
    ``failed`` turns a backend error into the ``response.failed`` event's error object.
    """
    event = _Events()
    rid = _id("resp")
    body = _response(rid, model, call, "in_progress", [])
    yield event("response.created", response=body)
    yield event("response.in_progress", response=body)
    output: list[dict[str, Any]] = []
    notices: list[Told] = list(call.notices)
    open_item: dict[str, Any] | None = None  # the message or reasoning item being written
    parts: list[str] = []
    finish = Finish("stop")

    def close() -> list[str]:
        nonlocal open_item
        if open_item is None:
            return []
        item, index, text = open_item, len(output), "".join(parts)
        open_item = None
        iid = item["id"]
        if item["type"] == "message":
            done = _message_item(iid, text)
            part = done["content"][0]
            out = [
                event(
                    "response.output_text.done",
                    item_id=iid,
                    output_index=index,
                    content_index=0,
                    text=text,
                    logprobs=[],
                ),
                event(
                    "response.content_part.done",
                    item_id=iid,
                    output_index=index,
                    content_index=0,
                    part=part,
                ),
            ]
        else:
            done = _reasoning_item(iid, text)
            out = [
                event(
                    "response.reasoning_text.done",
                    item_id=iid,
                    output_index=index,
                    content_index=0,
                    text=text,
                )
            ]
        output.append(done)
        return [*out, event("response.output_item.done", output_index=index, item=done)]

    def opening(kind: str) -> list[str]:
        nonlocal open_item
        out = close() if open_item is not None and open_item["type"] != kind else []
        if open_item is not None:
            return out
        parts.clear()
        index = len(output)
        if kind == "message":
            open_item = _message_item(_id("msg"), "", "in_progress")
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            return [
                *out,
                event("response.output_item.added", output_index=index, item=open_item),
                event(
                    "response.content_part.added",
                    item_id=open_item["id"],
                    output_index=index,
                    content_index=0,
                    part=part,
                ),
            ]
        open_item = {
            "type": "reasoning",
            "id": _id("rs"),
            "summary": [],
            "content": [],
            "status": "in_progress",
        }
        return [*out, event("response.output_item.added", output_index=index, item=open_item)]

    try:
        async for item in turn(events):
            if isinstance(item, (TextDelta, ReasoningDelta)):
                kind = "message" if isinstance(item, TextDelta) else "reasoning"
                for line in opening(kind):
                    yield line
                assert open_item is not None
                parts.append(item.text)
                delta = (
                    "response.output_text.delta"
                    if kind == "message"
                    else "response.reasoning_text.delta"
                )
                extra: dict[str, Any] = {"logprobs": []} if kind == "message" else {}
                yield event(
                    delta,
                    item_id=open_item["id"],
                    output_index=len(output),
                    content_index=0,
                    delta=item.text,
                    **extra,
                )
            elif isinstance(item, WireCall):
                for line in close():
                    yield line
                index, added = len(output), _call_item(item, "in_progress")
                yield event("response.output_item.added", output_index=index, item=added)
                yield event(
                    "response.function_call_arguments.delta",
                    item_id=added["id"],
                    output_index=index,
                    delta=item.arguments,
                )
                yield event(
                    "response.function_call_arguments.done",
                    item_id=added["id"],
                    output_index=index,
                    arguments=item.arguments,
                )
                done = _call_item(item)
                output.append(done)
                yield event("response.output_item.done", output_index=index, item=done)
            elif isinstance(item, Told):
                notices.append(item)
            else:
                finish = item
    except Exception as exc:
        error = failed(exc)
        if error is None:
            raise
        body = {**_response(rid, model, call, "failed", output), "error": error}
        yield event("response.failed", response=body)
        return
    for line in close():
        yield line
    notices += await _kept(call, rid, model, output)
    final = _finished(_response(rid, model, call, "in_progress", output), finish, notices)
    kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    yield event(kind, response=final)


class Responses(OpenAIErrors):
    """``POST /v1/responses`` (see :mod:`toolwire.server.api`)."""

    async def parse(self, data: dict[str, Any], memory: ResponseMemory | None) -> ResponsesCall:
        return await parse_responses(data, memory)

    async def whole(self, events: AsyncIterable[Event], call: Any, model: str) -> dict[str, Any]:
        return await respond(events, call, model)

    def stream(self, events: AsyncIterable[Event], call: Any, model: str) -> AsyncIterator[str]:
        return respond_stream(events, call, model, self.mid_stream)
