"""Tool schemas in each provider family's dialect.

Providers accept different subsets of JSON Schema, and some refuse a whole request over
one keyword. Each family gets the schemas it takes:

``gemini``      the OpenAPI subset: ``$ref``/``$defs`` inlined (depth-limited), ``anyOf``
                with null or a type list with null becomes ``nullable``, every node typed,
                unsupported keywords (``additionalProperties``, ``$schema``, ``const``,
                ``title``…) dropped, a default or format kept in the description, empty
                enum values removed
``anthropic``   one object at the root (no combinator there)
``strict``      only type, description, enum, items, properties, required
``permissive``  as sent

Local checks always use the tool's original schema: a dialect only changes what a
provider is shown.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ..arguments.schema import declared, resolve
from ..errors import UsageError

__all__ = ["DIALECTS", "to_dialect"]

DIALECTS = ("gemini", "anthropic", "strict", "permissive")
_MAX_INLINE = 8
_GEMINI_KEYS = {
    "type",
    "description",
    "nullable",
    "enum",
    "items",
    "properties",
    "required",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "anyOf",
}
_STRICT_KEYS = {"type", "description", "enum", "items", "properties", "required"}


def to_dialect(schema: Mapping[str, Any], dialect: str) -> dict[str, Any]:
    """``schema`` (a tool's parameters) in ``dialect``; the input is never changed.

    An unknown ``dialect`` raises :class:`~toolwire.errors.UsageError` (a ``ValueError``).
    """
    if dialect == "permissive":
        return copy.deepcopy(dict(schema))
    if dialect == "gemini":
        return _gemini(schema, schema, 0)
    if dialect == "strict":
        return _strict(schema, schema, 0)
    if dialect == "anthropic":
        return _anthropic(schema)
    raise UsageError(f"unknown schema dialect {dialect!r}; known: {', '.join(DIALECTS)}")


def _infer_type(node: Mapping[str, Any]) -> str:
    if "properties" in node:
        return "object"
    if "items" in node:
        return "array"
    enum = node.get("enum")
    if isinstance(enum, list) and enum:
        if all(isinstance(v, bool) for v in enum):
            return "boolean"
        if all(isinstance(v, int) and not isinstance(v, bool) for v in enum):
            return "integer"
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in enum):
            return "number"
    return "string"


def _note(description: str, extra: str) -> str:
    return f"{description} ({extra})" if description else extra


def _gemini(node: Any, root: Mapping[str, Any], depth: int) -> dict[str, Any]:
    node = resolve(node, root)
    if not isinstance(node, Mapping) or depth > _MAX_INLINE:
        return (
            {"type": "string", "description": "any value"}
            if depth > _MAX_INLINE
            else {"type": "string"}
        )
    out: dict[str, Any] = {}
    description = str(node.get("description") or "")
    nullable = False
    t = node.get("type")
    if isinstance(t, list):
        nullable = "null" in t
        rest = [x for x in t if x != "null"]
        t = rest[0] if len(rest) == 1 else None
        if len(rest) > 1:
            out["anyOf"] = [{"type": x} for x in rest]
    branches = node.get("anyOf") or node.get("oneOf")
    if isinstance(branches, list):
        kept = [b for b in branches if resolve(b, root) != {"type": "null"}]
        nullable = nullable or len(kept) < len(branches)
        if len(kept) == 1:
            merged = _gemini(kept[0], root, depth + 1)
            if description:
                merged["description"] = description
            if nullable:
                merged["nullable"] = True
            return merged
        out["anyOf"] = [_gemini(b, root, depth + 1) for b in kept]
    if isinstance(node.get("allOf"), list):
        props, _, _ = declared(node, root)
        node = {**node, "properties": props}
    if "const" in node:
        node = {**node, "enum": [node["const"]]}
    if "default" in node:
        description = _note(description, f"default: {node['default']!r}")
    if isinstance(node.get("format"), str):
        description = _note(description, f"format: {node['format']}")
    if "anyOf" not in out:
        out["type"] = t if isinstance(t, str) and t != "null" else _infer_type(node)
    if description:
        out["description"] = description
    if nullable:
        out["nullable"] = True
    enum = node.get("enum")
    if isinstance(enum, list):
        values = [v for v in enum if v != "" and v is not None]
        if values:
            out["enum"] = [str(v) for v in values] if out.get("type") == "string" else values
    props = node.get("properties")
    if isinstance(props, Mapping):
        out["properties"] = {k: _gemini(v, root, depth + 1) for k, v in props.items()}
        required = [r for r in node.get("required") or () if r in props]
        if required:
            out["required"] = required
    if "items" in node:
        out["items"] = _gemini(node["items"], root, depth + 1)
    for key in ("minItems", "maxItems", "minimum", "maximum"):
        if isinstance(node.get(key), (int, float)) and not isinstance(node.get(key), bool):
            out[key] = node[key]
    return {k: v for k, v in out.items() if k in _GEMINI_KEYS}


def _strict(node: Any, root: Mapping[str, Any], depth: int) -> dict[str, Any]:
    node = resolve(node, root)
    if not isinstance(node, Mapping) or depth > _MAX_INLINE:
        return {}
    branches = node.get("anyOf") or node.get("oneOf")
    if isinstance(branches, list):  # the first branch that is not null stands for them all
        kept = [b for b in branches if resolve(b, root) != {"type": "null"}]
        if kept:
            first = _strict(kept[0], root, depth + 1)
            if node.get("description"):
                first["description"] = node["description"]
            return first
    if isinstance(node.get("allOf"), list):
        props, _, _ = declared(node, root)
        node = {**node, "properties": props}
    out: dict[str, Any] = {}
    t = node.get("type")
    if isinstance(t, list):
        rest = [x for x in t if x != "null"]
        t = rest[0] if rest else "string"
    out["type"] = t if isinstance(t, str) else _infer_type(node)
    if isinstance(node.get("description"), str):
        out["description"] = node["description"]
    if isinstance(node.get("enum"), list):
        out["enum"] = list(node["enum"])
    elif "const" in node:
        out["enum"] = [node["const"]]
    if isinstance(node.get("properties"), Mapping):
        out["properties"] = {k: _strict(v, root, depth + 1) for k, v in node["properties"].items()}
        required = [r for r in node.get("required") or () if r in node["properties"]]
        if required:
            out["required"] = required
    if "items" in node:
        out["items"] = _strict(node["items"], root, depth + 1)
    return {k: v for k, v in out.items() if k in _STRICT_KEYS}


def _anthropic(schema: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(schema))
    combinators = [k for k in ("anyOf", "oneOf", "allOf") if k in out]
    if combinators or out.get("type") != "object":
        props, _, _ = declared(schema, schema)
        for key in combinators:
            out.pop(key)
        out["type"] = "object"
        out["properties"] = copy.deepcopy(props)
    out.setdefault("properties", {})
    return out
