"""Typing a parsed call the one way toolwire types arguments, for tests that compare values.

Parsers give the arguments as the model wrote them; where a test means the typed value, it
passes the call through :func:`toolwire.prepare_arguments`, as the loop and gateway do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolwire import PreparedArguments, prepare_arguments
from toolwire.messages import ToolCall

from .replies import TOOLS


def schema_of(name: str, tools: Sequence[Mapping[str, Any]] = TOOLS) -> Mapping[str, Any]:
    """The parameters schema of the tool called ``name``."""
    for tool in tools:
        fn = tool.get("function", tool)
        if fn["name"] == name:
            params: Mapping[str, Any] = fn.get("parameters", {})
            return params
    raise KeyError(name)


def prepared(
    call: ToolCall, tools: Sequence[Mapping[str, Any]] = TOOLS, *, strict: bool = False
) -> PreparedArguments:
    """The call's arguments typed by its tool's schema (``ArgumentsError`` if they don't fit)."""
    raw: str | dict[str, Any] = (
        call.arguments_text if call.arguments_text.strip() else call.arguments
    )
    return prepare_arguments(
        raw,
        schema_of(call.name, tools),
        strict=strict,
        name=call.name,
        text_values=call.text_values,
    )


def typed(call: ToolCall, tools: Sequence[Mapping[str, Any]] = TOOLS) -> dict[str, Any]:
    """Just the typed arguments (not strict)."""
    return prepared(call, tools).arguments
