"""Schema dialects and refusal classification."""

from __future__ import annotations

import copy
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from toolwire.errors import BackendError
from toolwire.schemas import classify_refusal, to_dialect
from toolwire.tools import Tool


class Point(BaseModel):
    x: float
    y: float


def place(
    name: str,
    where: Point | None = None,
    kind: Literal["home", "work", ""] = "home",
    tags: list[str] | None = None,
    when: str = "now",
) -> None:
    """Save a place."""


SCHEMA: dict[str, Any] = Tool.from_function(place).parameters  # type: ignore[assignment]


def walk(node: Any) -> list[dict[str, Any]]:
    out = []
    if isinstance(node, dict):
        out.append(node)
        for v in node.values():
            out += walk(v)
    elif isinstance(node, list):
        for v in node:
            out += walk(v)
    return out


def test_gemini() -> None:
    original = copy.deepcopy(SCHEMA)
    g = to_dialect(SCHEMA, "gemini")
    assert original == SCHEMA  # never changed in place
    nodes = walk(g)
    assert not any(
        k in n
        for n in nodes
        for k in ("$ref", "$defs", "additionalProperties", "$schema", "const", "title", "default")
    )
    props = g["properties"]
    assert props["where"]["nullable"] is True and props["where"]["type"] == "object"
    assert set(props["where"]["properties"]) == {"x", "y"}  # the $ref inlined
    assert props["kind"]["enum"] == ["home", "work"]  # the empty option removed
    assert "default: 'home'" in props["kind"]["description"]
    assert props["tags"]["type"] == "array" and props["tags"]["nullable"] is True
    for node in nodes:
        if node is not g["properties"] and ("properties" in node or "items" in node):
            assert "type" in node
    assert all("type" in p or "anyOf" in p for p in props.values())


def test_gemini_type_lists_and_depth() -> None:
    g = to_dialect({"type": "object", "properties": {"n": {"type": ["integer", "null"]}}}, "gemini")
    assert g["properties"]["n"] == {"type": "integer", "nullable": True}
    loop: dict[str, Any] = {
        "$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
        "type": "object",
        "properties": {"t": {"$ref": "#/$defs/n"}},
    }
    deep = to_dialect(loop, "gemini")  # a recursive schema ends, depth-limited
    assert deep["properties"]["t"]["type"] == "array"


def test_strict() -> None:
    s = to_dialect(SCHEMA, "strict")
    allowed = {"type", "description", "enum", "items", "properties", "required"}
    for node in walk(s):
        if node is s["properties"] or node is s.get("properties", {}).get("where", {}).get(
            "properties"
        ):
            continue
        assert set(node) <= allowed, node
    assert s["properties"]["where"]["type"] == "object"
    assert s["required"] == ["name"]


def test_anthropic_has_one_object_at_the_root() -> None:
    schema = {
        "anyOf": [
            {"properties": {"a": {"type": "string"}}},
            {"properties": {"b": {"type": "integer"}}},
        ]
    }
    a = to_dialect(schema, "anthropic")
    assert a["type"] == "object" and set(a["properties"]) == {"a", "b"} and "anyOf" not in a
    assert to_dialect(SCHEMA, "anthropic") == SCHEMA


def test_permissive_and_unknown() -> None:
    assert to_dialect(SCHEMA, "permissive") == SCHEMA
    with pytest.raises(ValueError):
        to_dialect(SCHEMA, "openapi")


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (
            400,
            '{"error": {"message": "registry.ollama.ai/library/gemma:2b does not support tools"}}',
            "tools",
        ),
        (404, '{"error": {"message": "No endpoints found that support tool use."}}', "tools"),
        (
            400,
            '{"error": {"message": "Invalid schema for function \'f\': \'$ref\' is not allowed"}}',
            "schema",
        ),
        (
            400,
            '{"error": {"message": "Invalid JSON payload received. '
            'Unknown name \\"additionalProperties\\" at \'tools[0]\'"}}',
            "schema",
        ),
        (400, '{"error": {"message": "tools.0.input_schema: JSON schema is invalid"}}', "schema"),
        (401, '{"error": {"message": "invalid api key"}}', None),
        (400, '{"error": {"message": "max_tokens is too large"}}', None),
    ],
)
def test_refusals(status: int, body: str, kind: str | None) -> None:
    assert classify_refusal(BackendError("refused", status=status, body=body)) == kind
