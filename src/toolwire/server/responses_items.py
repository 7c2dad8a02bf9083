"""The output items of a Responses reply, and how a call is named for the client.

A call the engine made is a ``function_call`` item; a tool the client declared in another
shape (a free-form ``custom`` tool, a tool in a ``namespace``) is offered to the engine as a
function, and its call goes back in the shape and under the name the client declared:
:class:`ClientTool` says which, :func:`call_item` writes the item, :func:`argument_events`
names its streamed events. :func:`said` turns the items back into the assistant message a
continuation (``previous_response_id``) is given, in the engine's names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .core import WireCall

__all__ = [
    "ClientTool",
    "argument_events",
    "call_item",
    "message_item",
    "reasoning_item",
    "said",
    "streams_arguments",
]


@dataclass(frozen=True)
class ClientTool:
    """A tool as the client declared it, where that is not a plain function of the same
    name: ``kind`` ``custom`` (free-form input: its call is a ``custom_tool_call``), or a
    function in ``namespace``; ``name`` is its name as the client knows it."""

    kind: Literal["function", "custom"]
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


def call_item(
    call: WireCall, tool: ClientTool | None = None, status: str = "completed"
) -> dict[str, Any]:
    """The output item of ``call`` (its arguments empty while ``status`` is in_progress)."""
    return {
        "type": "function_call",
        "id": "fc_" + call.id.removeprefix("call_"),
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments if status == "completed" else "",
        "status": status,
    }


def streams_arguments(tool: ClientTool | None) -> bool:
    """Are the call's arguments streamed as JSON text as they come (a function's), or sent
    whole when the call is complete?"""
    return True


def argument_events(tool: ClientTool | None) -> tuple[str, str, str]:
    """The streamed events of a call's arguments: the delta's, the done's, and the done
    event's field that holds them whole."""
    return (
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "arguments",
    )


def done_value(call: WireCall, tool: ClientTool | None) -> str:
    """What the done event of a call's arguments carries whole."""
    return call.arguments


def said(
    output: list[dict[str, Any]], tools: Mapping[str, ClientTool] | None = None
) -> list[dict[str, Any]]:
    """The output items as the assistant message a continuation is given (in the
    engine's names: ``tools`` maps them from the client's)."""
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
