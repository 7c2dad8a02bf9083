"""Tool calls as toolwire holds them, whatever wire or grammar they came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolCall"]


@dataclass(frozen=True)
class ToolCall:
    """One call a model made.

    ``arguments`` is the mapping typed by the tool's schema (when it was known);
    ``arguments_text`` keeps the text the model actually wrote for them, because a later
    check or a repair needs to see what was sent, not what we made of it.
    """

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    arguments_text: str = ""

    def to_openai(self) -> dict[str, Any]:
        """The call in OpenAI's chat shape, ``arguments`` as a mapping (for templates)."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": dict(self.arguments)},
        }
