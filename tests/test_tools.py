"""Tools from functions and schemas, and the registry."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel

from toolwire.tools import Tool, Toolbox, ToolDefinitionError


class Point(BaseModel):
    x: float
    y: float


def search_mail(
    query: str,
    limit: int = 10,
    order: Literal["newest", "oldest"] = "newest",
    where: Point | None = None,
    workspace: str = "",
) -> list[str]:
    """Search the mailbox.

    Finds messages whose subject or body match.

    Args:
        query: What to look for,
            in plain words.
        limit (int): How many messages at most.
        order: Which come first.
        where: A point, for no reason.
        workspace: The session's mailbox.

    Returns:
        The subjects.
    """
    return []


def test_a_tool_from_a_function() -> None:
    tool = Tool.from_function(search_mail, session=["workspace"], read_only=True)
    assert tool.name == "search_mail" and tool.read_only and not tool.side_effects
    assert tool.description == "Search the mailbox.\n\nFinds messages whose subject or body match."
    params = tool.parameters
    assert params["type"] == "object" and params["required"] == ["query"]
    props = params["properties"]
    assert list(props) == ["query", "limit", "order", "where"]  # workspace is the session's
    assert props["query"] == {"description": "What to look for, in plain words.", "type": "string"}
    assert props["limit"]["type"] == "integer" and props["limit"]["default"] == 10
    assert props["order"]["enum"] == ["newest", "oldest"]
    assert "title" not in params and "title" not in props["query"]
    assert "Point" in params["$defs"] and "anyOf" in props["where"]
    assert tool.schema()["function"]["name"] == "search_mail"


def test_a_tool_from_a_schema() -> None:
    tool = Tool.from_schema(
        "lookup",
        {"type": "object", "properties": {"id": {"type": "integer"}}},
        description="Look a record up.",
        side_effects=True,
    )
    assert tool.schema() == {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a record up.",
            "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}},
        },
    }


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "1abc"])
def test_bad_names(name: str) -> None:
    with pytest.raises(ToolDefinitionError):
        Tool.from_schema(name, {"type": "object"})


def test_what_cannot_be_a_tool() -> None:
    def splat(*args: int) -> None:
        """Varargs."""

    with pytest.raises(ToolDefinitionError, match="cannot be described"):
        Tool.from_function(splat)
    with pytest.raises(ToolDefinitionError, match="session parameters"):
        Tool.from_function(search_mail, session=["tenant"])
    with pytest.raises(ToolDefinitionError, match="object schema"):
        Tool.from_schema("x", {"type": "string"})


def test_the_registry() -> None:
    box = Toolbox()

    @box.tool
    def a(x: int) -> int:
        """Write something."""
        return x

    @box.tool(read_only=True)
    def b(y: str) -> str:
        """Read something."""
        return y

    assert a(2) == 2  # the decorator gives the function back
    assert [t.name for t in box] == ["a", "b"] and len(box) == 2 and "a" in box
    assert [s["function"]["name"] for s in box.schemas(read_only=True)] == ["b"]
    assert box.get("nope") is None
    with pytest.raises(ToolDefinitionError, match="already registered"):
        box.add(a)
