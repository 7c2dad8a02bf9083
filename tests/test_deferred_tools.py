"""Deferred tools in Messages, as Claude Code sends them with ``ENABLE_TOOL_SEARCH=true``: a
tool marked ``defer_loading`` is not offered until a ``tool_reference`` in a tool result (its
tool search's answer) loads it; the reference reaches the model as a line of text. The real
Claude Code's round trip is in tests/test_agents_claude.py."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.server.anthropic_input import parse_messages
from toolwire.server.refusal import RequestError

SCHEMA = {"type": "object", "properties": {"a": {"type": "number"}}}
TOOLS = [
    {"name": "ToolSearch", "input_schema": {"type": "object"}},
    {"name": "mcp__calc__calculator", "input_schema": SCHEMA, "defer_loading": True},
    {"name": "mcp__calc__other", "input_schema": SCHEMA, "defer_loading": True},
]
ASK = {"role": "user", "content": "Add 2 and 3."}
SEARCH = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "t1", "name": "ToolSearch", "input": {"query": "calc"}}],
}


def _found(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": list(blocks)}],
    }


def _offered(messages: list[dict[str, Any]]) -> list[str]:
    call = parse_messages({"model": "m", "max_tokens": 9, "tools": TOOLS, "messages": messages})
    return [t["function"]["name"] for t in call.request.tools or ()]


def test_a_deferred_tool_waits_for_its_reference() -> None:
    assert _offered([ASK]) == ["ToolSearch"]
    reference = {"type": "tool_reference", "tool_name": "mcp__calc__calculator"}
    found = [ASK, SEARCH, _found(reference)]
    assert _offered(found) == ["ToolSearch", "mcp__calc__calculator"]
    call = parse_messages({"model": "m", "max_tokens": 9, "tools": TOOLS, "messages": found})
    result = call.request.messages[-1]
    assert result["role"] == "tool" and "mcp__calc__calculator" in result["content"]


@pytest.mark.parametrize(
    "block", [{"type": "tool_reference"}, {"type": "tool_reference", "tool_name": 5}]
)
def test_a_malformed_reference_is_a_400_naming_it(block: dict[str, Any]) -> None:
    with pytest.raises(RequestError) as raised:
        _offered([ASK, SEARCH, _found(block)])
    assert raised.value.param == "messages[2].content[0].content[0].tool_name"


def test_content_that_is_not_blocks_is_a_400_not_a_crash() -> None:
    with pytest.raises(RequestError):
        parse_messages(
            {
                "model": "m",
                "max_tokens": 9,
                "tools": TOOLS,
                "messages": [{"role": "user", "content": ["hi"]}],
            }
        )
