"""Requests sized to a check's weak spot, shared by the work-budget tests: each one froze
every client of a shared gateway before the work it makes was bounded and charged."""

from __future__ import annotations

from typing import Any

#: 63 groups of nested bounded repeats, 1,198 characters: RE2 compiles it to a program of
#: hundreds of thousands of instructions, each matched against every character.
BIG_PATTERN = "(?:a{0,30}b?){0,30}" * 63 + "$"


def namespaces(n: int) -> list[dict[str, Any]]:
    """``n`` Responses namespace tools whose names all flatten to ``ns____a`` (each
    namespace's two CJK characters become underscores)."""
    return [
        {
            "type": "namespace",
            "name": "ns" + chr(0x4E00 + i // 200) + chr(0x4E00 + i % 200),
            "tools": [{"type": "function", "name": "a", "parameters": {"type": "object"}}],
        }
        for i in range(n)
    ]


def fanout_schema(i: int, depth: int = 6, width: int = 4) -> dict[str, Any]:
    """A tool schema (distinct for each ``i``) whose ``$ref`` s fan out ``width`` ways
    ``depth`` times through ``anyOf``: within the expansion bound (about 60,000 nodes), and a
    value that fits no leaf is tried against every path (``width ** depth``)."""
    defs: dict[str, Any] = {
        f"d{k}": {"anyOf": [{"$ref": f"#/$defs/d{k + 1}", "title": str(j)} for j in range(width)]}
        for k in range(depth)
    }
    defs[f"d{depth}"] = {"type": "object", "required": ["never"]}
    return {
        "type": "object",
        "description": f"tool {i}",
        "$defs": defs,
        "properties": {"v": {"$ref": "#/$defs/d0"}},
    }


def fanout_value() -> dict[str, Any]:
    """Arguments that fit no leaf of :func:`fanout_schema`."""
    return {"v": {"w": 1}}
