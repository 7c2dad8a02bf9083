"""Tool calls as toolwire holds them, whatever wire or grammar they came from."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolCall", "assistant_message", "tool_message"]


@dataclass(frozen=True)
class ToolCall:
    """One call a model made.

    ``arguments`` is the mapping as the model's grammar gives it, not yet typed: typing by
    the tool's schema happens once, in :func:`toolwire.prepare_arguments`, where every change
    is named. ``arguments_text`` keeps the text the model actually wrote for them, because a
    later check or a repair needs to see what was sent, not what we made of it.
    ``text_values`` is True when the grammar can only write each argument as text (the XML
    families): the argument pipeline then reads each value by the tool's schema.
    """

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    arguments_text: str = ""
    text_values: bool = False

    def to_openai(self) -> dict[str, Any]:
        """The call in OpenAI's chat shape, ``arguments`` as a mapping (for templates)."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": dict(self.arguments)},
        }


def assistant_message(text: str, calls: list[ToolCall]) -> dict[str, Any]:
    """An assistant turn in OpenAI's wire shape: ``content`` null when it is only calls,
    each call's arguments as a JSON string."""
    message: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": _wire_arguments(c)},
            }
            for c in calls
        ]
    return message


def tool_message(call_id: str, name: str, content: str) -> dict[str, Any]:
    """A tool result in OpenAI's wire shape (``name`` kept for engines that want it)."""
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def _wire_arguments(call: ToolCall) -> str:
    """The arguments as a JSON string: as the model wrote them when that was a JSON object
    (so the transcript keeps its words), else the object we read, else the raw text."""
    text = call.arguments_text.strip()
    if text:
        try:
            if isinstance(json.loads(text), dict):
                return text
        except ValueError:
            if not call.arguments:
                return text
    return json.dumps(call.arguments, ensure_ascii=False)
