"""The output items of a Responses reply, and how a call is named for the client.

A call the engine made is a ``function_call`` item; a tool the client declared in another
shape (a free-form ``custom`` tool, a tool in a ``namespace``) is offered to the engine as a
function, and its call goes back in the shape and under the name the client declared:
:class:`ClientTool` says which, :func:`call_item` writes the item, :func:`argument_events`
names its streamed events (a custom tool's input is sent whole, in
``response.custom_tool_call_input.delta`` / ``.done``, field ``input``). :func:`said` turns
the items back into the assistant message a continuation (``previous_response_id``) is
given, in the engine's names; :func:`engine_call` does so for one call item of the history.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .core import WireCall, dumps

__all__ = [
    "CALL_ITEMS",
    "ClientTool",
    "argument_events",
    "call_item",
    "custom_input",
    "done_value",
    "engine_call",
    "message_item",
    "reasoning_item",
    "said",
    "streams_arguments",
]


@dataclass(frozen=True)
class ClientTool:
    """A tool as the client declared it, where that is not a plain function of the same
    name: ``kind`` ``custom`` (free-form input: its call is a ``custom_tool_call``), or a
    function (or custom tool) in ``namespace``; ``name`` is its name as the client knows it
    (the engine knows it by a flat name: :mod:`toolwire.server.responses_tools`); or a
    client-run ``tool_search``, whose call is a ``tool_search_call``."""

    kind: Literal["function", "custom", "tool_search"]
    name: str
    namespace: str | None = None


def reasoning_item(iid: str, text: str) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": iid,
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
        "status": "completed",
    }


def message_item(iid: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {
        "type": "message",
        "id": iid,
        "role": "assistant",
        "status": status,
        "content": content if status == "completed" else [],
    }


def custom_input(call: WireCall) -> str:
    """The free-form input of a call to a custom tool (offered as a function of one string,
    ``input``): that string; the one string the model put under another key; else the text
    it wrote (a model may write the input bare, as the tool's description asks)."""
    value = call.value
    if value is not None:
        given = value.get("input")
        if isinstance(given, str):
            return given
        strings = [v for v in value.values() if isinstance(v, str)]
        if len(value) == 1 and strings:
            return strings[0]
        if not value:
            return ""
    return call.arguments


def call_item(
    call: WireCall, tool: ClientTool | None = None, status: str = "completed"
) -> dict[str, Any]:
    """The output item of ``call`` (its arguments or input empty while ``status`` is
    in_progress): a ``custom_tool_call`` for a custom tool, else a ``function_call``, each
    under the name (and ``namespace``) the client declared."""
    done = status == "completed"
    if tool is not None and tool.kind == "tool_search":
        return {
            "type": "tool_search_call",
            "id": "ts_" + call.id.removeprefix("call_"),
            "call_id": call.id,
            "execution": "client",
            "arguments": (call.value or {}) if done else {},
            "status": status,
        }
    if tool is not None and tool.kind == "custom":
        item: dict[str, Any] = {
            "type": "custom_tool_call",
            "id": "ctc_" + call.id.removeprefix("call_"),
            "call_id": call.id,
            "name": tool.name,
            "input": custom_input(call) if done else "",
            "status": status,
        }
    else:
        item = {
            "type": "function_call",
            "id": "fc_" + call.id.removeprefix("call_"),
            "call_id": call.id,
            "name": tool.name if tool is not None else call.name,
            "arguments": call.arguments if done else "",
            "status": status,
        }
    if tool is not None and tool.namespace is not None:
        item["namespace"] = tool.namespace
    return item


def streams_arguments(tool: ClientTool | None) -> bool:
    """Are the call's arguments streamed as JSON text as they come (a function's), or sent
    whole when the call is complete (a custom tool's input: the string inside the JSON the
    engine writes, known once the call is read)?"""
    return tool is None or tool.kind == "function"


def argument_events(tool: ClientTool | None) -> tuple[str, str, str]:
    """The streamed events of a call's arguments: the delta's, the done's, and the done
    event's field that holds them whole. A ``tool_search_call`` has none (its arguments
    are an object, in its item): three empty names."""
    if tool is not None and tool.kind == "tool_search":
        return ("", "", "")
    if tool is not None and tool.kind == "custom":
        return (
            "response.custom_tool_call_input.delta",
            "response.custom_tool_call_input.done",
            "input",
        )
    return (
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "arguments",
    )


def done_value(call: WireCall, tool: ClientTool | None) -> str:
    """What the done event of a call's arguments carries whole."""
    if tool is not None and tool.kind == "custom":
        return custom_input(call)
    return call.arguments


#: The call items of the history, by type: the kind of tool each calls.
CALL_ITEMS = {
    "function_call": "function",
    "custom_tool_call": "custom",
    "tool_search_call": "tool_search",
}


def engine_call(item: Mapping[str, Any], name: str) -> dict[str, Any]:
    """A call item (``function_call``, ``custom_tool_call``) as the engine's call, named
    ``name``: a custom tool's input as the one string argument it was offered with."""
    if item["type"] == "custom_tool_call":
        arguments = dumps({"input": item["input"]})
    elif item["type"] == "tool_search_call":
        arguments = dumps(item.get("arguments") or {})
    else:
        arguments = item["arguments"]
    return {
        "id": item["call_id"],
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def said(
    output: list[dict[str, Any]], tools: Mapping[str, ClientTool] | None = None
) -> list[dict[str, Any]]:
    """The output items as the assistant message a continuation is given (in the
    engine's names: ``tools`` maps them from the client's)."""
    names: dict[tuple[str, Any, Any], str] = {
        (tool.kind, tool.namespace, tool.name): engine for engine, tool in (tools or {}).items()
    }
    text = "".join(
        part["text"] for item in output if item["type"] == "message" for part in item["content"]
    )
    calls = []
    for item in output:
        kind = CALL_ITEMS.get(item["type"])
        if kind is None:
            continue
        given = str(item.get("name") or kind)  # a tool search's call names no tool
        name = names.get((kind, item.get("namespace"), given), given)
        calls.append(engine_call(item, name))
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    thought = "".join(
        part["text"]
        for item in output
        if item["type"] == "reasoning"
        for part in item.get("content") or ()
        if part.get("type") == "reasoning_text"
    )
    if thought:  # the model's own reasoning, given back to it (see responses_input)
        message["reasoning_content"] = thought
    return [message] if text or calls else []
