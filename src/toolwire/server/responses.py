"""OpenAI's Responses API (``POST /v1/responses``) over the request core: the reply.

The request is read by :mod:`toolwire.server.responses_input`; its output items are
written by :mod:`toolwire.server.responses_items`. Out: ``reasoning``, ``message``
(``output_text``) and call items, streamed with the event sequence the official client's
``responses.stream()`` reads.

With a response store (``toolwire serve`` opens the gateway's own), responses are stored
unless the request says ``store: false``, each for the key that made it, and
``previous_response_id`` continues one (see :mod:`toolwire.server.remember`); without one,
both get a 400 saying so. :func:`stored_body` and :func:`input_items` show a stored response
again (``GET /v1/responses/{id}`` and its ``input_items``) as much as it is kept: its
output items, not its usage nor its instructions. Every response's id, stored or not, is
unguessable (:func:`~toolwire.store.responses.new_response_id`). Fields that change
nothing here (``metadata``, ``user``, ``reasoning``, ``text.verbosity``, ``truncation``,
``include``, ``top_p``…) are accepted and ignored.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any

from ..budget import WorkBudget
from ..errors import ToolwireError
from ..events import Event, ReasoningDelta, TextDelta
from ..store.responses import StoredResponse, new_response_id
from .api import OpenAIErrors
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
from .remember import ResponseMemory, not_kept
from .responses_input import ResponsesCall, parse_responses
from .responses_items import (
    argument_events,
    call_item,
    done_value,
    message_item,
    reasoning_item,
    said,
    streams_arguments,
)
from .validate import RequestError

__all__ = [
    "ITEMS_LIMIT",
    "Responses",
    "ResponsesCall",
    "deleted",
    "input_items",
    "listed_items",
    "parse_responses",
    "respond",
    "respond_stream",
    "retrieved",
    "stored_body",
]

#: How many input items one page of ``input_items`` lists at most, and by default (OpenAI's).
ITEMS_LIMIT = 100
_ITEMS_DEFAULT = 20


def _usage(finish: Finish) -> dict[str, Any] | None:
    if not finish.usage:
        return None
    given = finish.usage.get("prompt_tokens", 0), finish.usage.get("completion_tokens", 0)
    return {
        "input_tokens": given[0],
        "input_tokens_details": {"cached_tokens": finish.usage.get("cached_tokens", 0)},
        "output_tokens": given[1],
        "output_tokens_details": {"reasoning_tokens": finish.usage.get("reasoning_tokens", 0)},
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


async def _kept(
    call: ResponsesCall, rid: str, model: str, output: list[dict[str, Any]]
) -> list[Told]:
    """Store the response when asked; a notice when the store failed (the reply stands)."""
    if call.memory is None:
        return []
    try:
        kept = [item for item in output if item.get("status") != "incomplete"]
        await call.memory.keep(rid, model, [*call.conversation, *said(kept, call.tools)])
    except ToolwireError as exc:
        return [Told("response-not-stored", not_kept(exc))]
    return []


def _stored(body: dict[str, Any], call: ResponsesCall, unkept: list[Told]) -> dict[str, Any]:
    """The reply's ``store`` as it came out: false when the response was to be stored but
    was not (a quota, a store that failed: its notice, ``unkept``, says why)."""
    body["store"] = call.memory is not None and not unkept
    return body


async def respond(events: AsyncIterable[Event], call: ResponsesCall, model: str) -> dict[str, Any]:
    """The whole reply, not streamed."""
    done = await whole(events)
    output: list[dict[str, Any]] = []
    if done.reasoning:
        output.append(reasoning_item(_id("rs"), done.reasoning))
    if done.text:
        output.append(message_item(_id("msg"), done.text))
    output += [call_item(c, call.tools.get(c.name)) for c in done.calls]
    rid = new_response_id()
    unkept = await _kept(call, rid, model, output)
    body = _finished(
        _response(rid, model, call, "in_progress", output),
        done.finish,
        [*call.notices, *done.notices, *unkept],
    )
    return _stored(body, call, unkept)


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

    Text and thinking are streamed as they come, each in its own output item; a call's item
    is added as it begins and its arguments streamed as the pipeline streams them (a tool
    whose input goes whole, :func:`streams_arguments`, gets it at the end). A call
    withdrawn after its first bytes ends as an ``incomplete`` item, never stored for a
    continuation. ``failed`` turns a backend error into the ``response.failed`` event's
    error object.
    """
    event = _Events()
    rid = new_response_id()
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
            done = message_item(iid, text)
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
            done = reasoning_item(iid, text)
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
            open_item = message_item(_id("msg"), "", "in_progress")
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

    # the call whose item is open: its output item as added, and its tool
    calling: tuple[dict[str, Any], Any] | None = None

    def whole_call(item: WireCall) -> list[str]:
        tool = call.tools.get(item.name)
        index, added = len(output), call_item(item, tool, "in_progress")
        delta, done_kind, field = argument_events(tool)
        done = call_item(item, tool)
        output.append(done)
        lines = [event("response.output_item.added", output_index=index, item=added)]
        if delta:  # a tool_search_call has no argument events: its arguments are in its item
            value = done_value(item, tool)
            lines += [
                event(delta, item_id=added["id"], output_index=index, delta=value),
                event(done_kind, item_id=added["id"], output_index=index, **{field: value}),
            ]
        return [*lines, event("response.output_item.done", output_index=index, item=done)]

    try:
        async for item in turn(events):
            if isinstance(item, CallOpened):
                for line in close():
                    yield line
                tool = call.tools.get(item.name)
                if streams_arguments(tool):
                    shown = WireCall(item.index, item.id, item.name, "", None)
                    added = call_item(shown, tool, "in_progress")
                    calling = added, tool
                    yield event("response.output_item.added", output_index=len(output), item=added)
                continue
            if isinstance(item, CallPiece):
                if calling is not None:
                    yield event(
                        argument_events(calling[1])[0],
                        item_id=calling[0]["id"],
                        output_index=len(output),
                        delta=item.text,
                    )
                continue
            if isinstance(item, CallWithdrawn):
                if calling is not None:
                    shown = WireCall(item.index, item.id, item.name, item.sent, None)
                    cut = {**call_item(shown, calling[1]), "status": "incomplete"}
                    calling = None
                    output.append(cut)
                    yield event("response.output_item.done", output_index=len(output) - 1, item=cut)
                continue
            if isinstance(item, WireCall) and item.streamed and calling is not None:
                added, tool = calling
                calling = None
                index = len(output)
                _, done_kind, field = argument_events(tool)
                value = done_value(item, tool)
                yield event(done_kind, item_id=added["id"], output_index=index, **{field: value})
                done = call_item(item, tool)
                output.append(done)
                yield event("response.output_item.done", output_index=index, item=done)
                continue
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
                for line in whole_call(item):
                    yield line
            elif isinstance(item, Told):
                notices.append(item)
            elif isinstance(item, Finish):
                finish = item
    except Exception as exc:
        error = failed(exc)
        if error is None:
            raise
        body = {**_response(rid, model, call, "failed", output), "error": error}
        yield event("response.failed", response={**body, "store": False})  # never kept
        return
    for line in close():
        yield line
    unkept = await _kept(call, rid, model, output)
    final = _finished(_response(rid, model, call, "in_progress", output), finish, notices + unkept)
    final = _stored(final, call, unkept)
    kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    yield event(kind, response=final)


class Responses(OpenAIErrors):
    """``POST /v1/responses`` (see :mod:`toolwire.server.api`)."""

    async def parse(
        self, data: dict[str, Any], memory: ResponseMemory | None, budget: WorkBudget | None = None
    ) -> ResponsesCall:
        call = await parse_responses(data, memory, budget)
        if call.memory is not None:
            await call.memory.admit()  # a key past its quota hears so before the model runs
        return call

    async def whole(self, events: AsyncIterable[Event], call: Any, model: str) -> dict[str, Any]:
        return await respond(events, call, model)

    def stream(self, events: AsyncIterable[Event], call: Any, model: str) -> AsyncIterator[str]:
        return respond_stream(events, call, model, self.mid_stream)


def _items(message: dict[str, Any], n: int, role_items: bool) -> list[dict[str, Any]]:
    """A stored message as Responses items (``n`` numbers the ids it gets here)."""
    role, content = message.get("role"), message.get("content")
    items: list[dict[str, Any]] = []
    if role == "tool":
        output = content if isinstance(content, str) else dumps(content)
        call_id = str(message.get("tool_call_id", ""))
        return [
            {
                "type": "function_call_output",
                "id": f"fco_{n}",
                "call_id": call_id,
                "output": output,
                "status": "completed",
            }
        ]
    text = content if isinstance(content, str) else ""
    if isinstance(content, list):
        text = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    if role == "assistant":
        if text:
            items.append(message_item(f"msg_{n}", text))
        for c in message.get("tool_calls") or ():
            fn = c.get("function") or {}
            wire = WireCall(
                0, str(c.get("id", "")), str(fn.get("name", "")), str(fn.get("arguments", "")), None
            )
            items.append(call_item(wire))
    elif role_items:
        kind = "input_text"
        items.append(
            {
                "type": "message",
                "id": f"msg_{n}",
                "role": role,
                "status": "completed",
                "content": [{"type": kind, "text": text}],
            }
        )
    return items


def _output(stored: StoredResponse) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A stored response's input messages and its output messages: its pending calls, or
    else its last message when the model wrote it. The calls a continuation put back first
    were the previous response's output, not this one's input: they are left out."""
    given = stored.messages
    if stored.previous is not None:
        start = 0
        while start < len(given) and _is_calls(given[start]):
            start += 1
        given = given[start:]
    if stored.pending:
        return given, stored.pending
    last = given[-1:]
    if last and last[0].get("role") == "assistant":
        return given[:-1], last
    return given, []


def _is_calls(message: dict[str, Any]) -> bool:
    return message.get("role") == "assistant" and bool(message.get("tool_calls"))


def stored_body(stored: StoredResponse) -> dict[str, Any]:
    """A stored response in OpenAI's shape, as much as is kept (not its usage, its
    instructions nor its tools: a continuation gives its own)."""
    _, said_ = _output(stored)
    output = [item for i, m in enumerate(said_) for item in _items(m, i, False)]
    return {
        "id": stored.id,
        "object": "response",
        "created_at": int(stored.created),
        "status": "completed",
        "model": stored.model,
        "output": output,
        "error": None,
        "incomplete_details": None,
        "previous_response_id": stored.previous,
        "store": True,
        "instructions": None,
        "metadata": {},
        "tools": [],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "text": {"format": {"type": "text"}},
    }


def _page_query(query: Mapping[str, str]) -> tuple[str, int, str | None]:
    """``order``, ``limit`` and ``after`` of an ``input_items`` request, each checked (a
    400 naming the one at fault)."""
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise RequestError(f"order must be 'asc' or 'desc', not {order[:20]!r}", "order")
    given = query.get("limit", str(_ITEMS_DEFAULT))
    if not (
        given.isascii() and given.isdigit() and len(given) <= 4 and 1 <= int(given) <= ITEMS_LIMIT
    ):
        raise RequestError(f"limit must be a whole number from 1 to {ITEMS_LIMIT}", "limit")
    after = query.get("after") or None
    return order, int(given), after


def input_items(
    stored: StoredResponse,
    order: str = "desc",
    limit: int = _ITEMS_DEFAULT,
    after: str | None = None,
) -> dict[str, Any]:
    """What a stored response was given before its output, as one page of a list of input
    items (newest first by default, as OpenAI's ``input_items`` lists them); ``after`` is
    the id of the item the page begins after."""
    given, _ = _output(stored)
    items = [item for i, m in enumerate(given) for item in _items(m, i, True)]
    if order == "desc":
        items.reverse()
    if after is not None:
        ids = [item["id"] for item in items]
        if after not in ids:
            raise RequestError(f"after: no input item has the id {after[:80]!r}", "after")
        items = items[ids.index(after) + 1 :]
    page = items[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(items) > len(page),
    }


async def retrieved(memory: ResponseMemory, rid: str) -> dict[str, Any]:
    """``GET /v1/responses/{id}``: the key's stored response; a 404 when it has none."""
    return stored_body(await memory.get(rid))


async def listed_items(
    memory: ResponseMemory, rid: str, query: Mapping[str, str]
) -> dict[str, Any]:
    """``GET /v1/responses/{id}/input_items``: a page of the response's input items."""
    order, limit, after = _page_query(query)
    return input_items(await memory.get(rid), order, limit, after)


async def deleted(memory: ResponseMemory, rid: str) -> dict[str, Any]:
    """``DELETE /v1/responses/{id}``: the key's response forgotten (it can no longer be
    continued, nor can any that continued it); a 404 when it has none."""
    await memory.delete(rid)
    return {"id": rid, "object": "response", "deleted": True}
