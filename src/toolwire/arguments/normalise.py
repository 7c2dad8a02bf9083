"""Normalising read arguments, guided only by the tool's JSON schema.

Each change undoes one slip small models make, is named on the result, and never invents a
value: a field the tool does not take is dropped; ``"3"`` becomes 3 where a number is wanted
and ``3.0`` becomes 3 for an integer; exactly ``"true"``/``"false"`` become booleans; a list
or object sent as JSON text is read; one value where a list is wanted becomes a list of one;
an enum option in the wrong case becomes the option when exactly one matches; ``null`` for an
optional field that does not allow null is dropped. Nothing else — no text rewritten, no
default filled in; the strict check afterwards decides.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from ..errors import ArgumentsError
from .read import read_json
from .schema import allows_null, resolve, types_of, validator_for

__all__ = ["Normalised", "normalise"]

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_MAX_DEPTH = 64


@dataclass
class Normalised:
    value: Any
    repairs: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


class _Ctx:
    def __init__(self, root: Mapping[str, Any], validator: Draft202012Validator) -> None:
        self.root = root
        self.validator = validator
        self.repairs: list[str] = []
        self.dropped: list[str] = []

    def repair(self, name: str) -> None:
        if name not in self.repairs:
            self.repairs.append(name)

    def scratch(self) -> _Ctx:
        return _Ctx(self.root, self.validator)

    def merge(self, other: _Ctx) -> None:
        for name in other.repairs:
            self.repair(name)
        self.dropped.extend(other.dropped)


def normalise(
    value: Any, schema: Mapping[str, Any], validator: Draft202012Validator | None = None
) -> Normalised:
    """Normalise ``value`` (already read) for ``schema``; the input is never mutated."""
    ctx = _Ctx(schema, validator or validator_for(schema))
    out = _norm(value, schema, ctx, "", 0)
    return Normalised(out, ctx.repairs, ctx.dropped)


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _valid(value: Any, schema: Any, ctx: _Ctx) -> bool:
    try:
        return bool(ctx.validator.evolve(schema=schema).is_valid(value))
    except Exception:  # a schema jsonschema cannot use here: no guidance from this branch
        return False


def _norm(value: Any, schema: Any, ctx: _Ctx, path: str, depth: int) -> Any:
    schema = resolve(schema, ctx.root)
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return value
    for sub in schema.get("allOf") or ():
        value = _norm(value, sub, ctx, path, depth + 1)
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list) and branches:
        value = _branch(value, branches, ctx, path, depth)
    types = types_of(schema, ctx.root) if "type" in schema or "enum" in schema else None
    if types is None and "type" not in schema:
        types = {"object"} if "properties" in schema else {"array"} if "items" in schema else None
    if types is not None:
        value = _coerce(value, schema, types, ctx)
    if isinstance(value, dict) and (types is None or "object" in types):
        value = _object(value, schema, ctx, path, depth)
    elif isinstance(value, list) and (types is None or "array" in types):
        value = _array(value, schema, ctx, path, depth)
    enum = schema.get("enum")
    if isinstance(value, str) and isinstance(enum, list) and value not in enum:
        matches = [o for o in enum if isinstance(o, str) and o.casefold() == value.casefold()]
        if len(matches) == 1:
            ctx.repair("enum-case")
            value = matches[0]
    return value


def _branch(value: Any, branches: list[Any], ctx: _Ctx, path: str, depth: int) -> Any:
    if any(_valid(value, b, ctx) for b in branches):
        return value
    for branch in branches:
        trial = ctx.scratch()
        candidate = _norm(value, branch, trial, path, depth + 1)
        if _valid(candidate, branch, ctx):
            ctx.merge(trial)
            return candidate
    return value


def _coerce(value: Any, schema: Mapping[str, Any], types: set[str], ctx: _Ctx) -> Any:
    if isinstance(value, str) and "string" not in types:
        if types & {"number", "integer"} and _NUMBER.fullmatch(value):
            number: Any = float(value) if any(c in value for c in ".eE") else int(value)
            if isinstance(number, float) and number.is_integer() and "number" not in types:
                number = int(number)
            if number not in (float("inf"), float("-inf")):
                ctx.repair("number-from-string")
                return number
        if "boolean" in types and value in ("true", "false"):
            ctx.repair("boolean-from-string")
            return value == "true"
        if types & {"array", "object"} and value.lstrip()[:1] in ("[", "{"):
            try:
                parsed = read_json(value).value
            except ArgumentsError:
                parsed = None
            if (isinstance(parsed, list) and "array" in types) or (
                isinstance(parsed, dict) and "object" in types
            ):
                ctx.repair("json-from-string")
                return parsed
    if (
        isinstance(value, float)
        and "integer" in types
        and "number" not in types
        and value.is_integer()
    ):
        ctx.repair("integer-from-float")
        return int(value)
    if (
        "array" in types
        and value is not None
        and not isinstance(value, list)
        and not _fits(value, types)
        and not (isinstance(value, str) and value.lstrip().startswith("["))
    ):
        ctx.repair("list-from-single")
        return [value]
    return value


def _fits(value: Any, types: set[str]) -> bool:
    kind = _json_kind(value)
    return kind in types or (kind == "integer" and "number" in types)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "integer" if isinstance(value, int) else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    return "null" if value is None else "array"


def _object(
    value: dict[str, Any], schema: Mapping[str, Any], ctx: _Ctx, path: str, depth: int
) -> dict[str, Any]:
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    patterns = schema.get("patternProperties")
    patterns = patterns if isinstance(patterns, Mapping) else {}
    required = schema.get("required")
    required = set(required) if isinstance(required, list) else set()
    extra = schema.get("additionalProperties")
    is_open = extra is True or isinstance(extra, Mapping) or (not props and not patterns)
    out: dict[str, Any] = {}
    for key, item in value.items():
        where = _join(path, key)
        if key in props:
            sub = props[key]
            if item is None and key not in required and not allows_null(sub, ctx.root):
                ctx.repair("null-dropped")
                ctx.dropped.append(where)
                continue
            out[key] = _norm(item, sub, ctx, where, depth + 1)
            continue
        pattern = next((p for p in patterns if _search(p, key)), None)
        if pattern is not None:
            out[key] = _norm(item, patterns[pattern], ctx, where, depth + 1)
        elif is_open:
            out[key] = (
                _norm(item, extra, ctx, where, depth + 1) if isinstance(extra, Mapping) else item
            )
        else:
            ctx.dropped.append(where)
    return out


def _search(pattern: str, key: str) -> bool:
    try:
        return re.search(pattern, key) is not None
    except re.error:
        return False


def _array(
    value: list[Any], schema: Mapping[str, Any], ctx: _Ctx, path: str, depth: int
) -> list[Any]:
    prefix = schema.get("prefixItems")
    prefix = prefix if isinstance(prefix, list) else []
    items = schema.get("items")
    out = []
    for i, item in enumerate(value):
        sub = prefix[i] if i < len(prefix) else items
        out.append(_norm(item, sub, ctx, _join(path, i), depth + 1) if sub is not None else item)
    return out
