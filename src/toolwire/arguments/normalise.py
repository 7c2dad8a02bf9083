"""Normalising read arguments, guided only by the tool's JSON schema.

Each change undoes one slip small models make, is named on the result, and never invents a
value: a field the tool does not take is dropped; ``"3"`` becomes 3 where a number is wanted
(``" 3 "`` and ``"007"`` too: white space around it, zeros before it, mean nothing but the
number) and ``3.0`` becomes 3 for an integer; exactly ``"true"``/``"false"`` become booleans, and
Python's ``"True"``/``"False"`` too (a template that quotes every value of a Python call,
``urgent="False"``, teaches its model to); a list or object sent as JSON text is read; one
value where a list is wanted becomes a list of one; an enum option in the wrong case becomes
the option when exactly one matches; ``null`` for an optional field that does not allow null
is dropped. Nothing else — no text rewritten, no
default filled in; the strict check afterwards decides.

Only an explicit ``type`` (or ``enum``/``const``) licenses a change of type: ``items`` or
``properties`` alone bind values that already are lists or objects. A field counts as one
the tool takes wherever the schema declares it (``allOf`` parts, ``anyOf``/``oneOf``
branches, ``if``/``then``/``else``, ``$ref``), and the work spent trying union branches is
bounded, so a recursive schema cannot make it explode.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from jsonschema.protocols import Validator

from ..budget import WorkExceeded, charge
from ..errors import ArgumentsError
from .patterns import has_unchecked, matching_pattern
from .read import MAX_ARGUMENT_DEPTH, read_json
from .schema import (
    allows_null,
    declared,
    resolve,
    types_of,
    validator_for,
)

__all__ = ["Normalised", "normalise"]

#: A number written as text: JSON's, and with leading zeros (``"007"``, a clock's hour), which
#: mean nothing but the number; white space around it is read past.
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_MAX_NUMBER_CHARS = 400
_EXACT_FLOAT_INT = 2**53
#: Numbers written with more digits than this (counting the exponent) stay text.
_MAX_EXPONENT = 400
#: The texts a boolean is written as: JSON's, and Python's (a quoted Python call's value).
_BOOLEAN_TEXTS = {"true": True, "false": False, "True": True, "False": False}
#: Schema nodes visited per call, at most: union branches are tried within this budget.
_WORK_BUDGET = 20_000


@dataclass
class Normalised:
    value: Any
    repairs: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    #: The dropped fields that the schema does not list (the rest are nulls dropped).
    unknown: list[str] = field(default_factory=list)


class _Ctx:
    def __init__(
        self,
        root: Mapping[str, Any],
        validator: Validator,
        memo: dict[Any, Any] | None = None,
    ) -> None:
        self.root = root
        self.validator = validator
        self.repairs: list[str] = []
        self.dropped: list[str] = []
        self.unknown: list[str] = []
        self.work = 0
        # (value, schema, path) -> result: trying union branches meets the same subtree
        # under the same schema again and again; each pair is worked out once
        self.memo: dict[Any, Any] = {} if memo is None else memo

    def repair(self, name: str) -> None:
        if name not in self.repairs:
            self.repairs.append(name)

    def scratch(self) -> _Ctx:
        trial = _Ctx(self.root, self.validator, self.memo)
        trial.work = self.work
        return trial

    def merge(self, other: _Ctx) -> None:
        for name in other.repairs:
            self.repair(name)
        self.dropped.extend(other.dropped)
        self.unknown.extend(other.unknown)


def normalise(
    value: Any, schema: Mapping[str, Any], validator: Validator | None = None
) -> Normalised:
    """Normalise ``value`` (already read) for ``schema``; the input is never mutated."""
    ctx = _Ctx(schema, validator or validator_for(schema))
    out = _norm(value, schema, ctx, "", 0)
    return Normalised(out, ctx.repairs, ctx.dropped, ctx.unknown)


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _valid(value: Any, schema: Any, ctx: _Ctx) -> bool:
    key = ("valid", id(value), id(schema))
    hit = ctx.memo.get(key)
    if hit is not None:
        return bool(hit[0])
    try:
        ok = bool(ctx.validator.evolve(schema=schema).is_valid(value))
    except WorkExceeded:
        raise  # the request's budget is spent: no branch is tried further
    except Exception:  # a branch jsonschema cannot use here: no guidance from it
        ok = False
    ctx.memo[key] = (ok, value, schema)  # keep both alive: their ids stay theirs
    return ok


def _norm(value: Any, schema: Any, ctx: _Ctx, path: str, depth: int, *, drop: bool = True) -> Any:
    """Normalise ``value`` for ``schema``. ``drop`` is False for the parts of a schema
    (``allOf`` members, union branches): only the whole node knows every field it takes."""
    key = ("norm", id(value), id(schema), path, drop)
    hit = ctx.memo.get(key)
    if hit is not None:
        out, repairs, dropped, unknown = hit[0], hit[1], hit[2], hit[3]
        for name in repairs:
            ctx.repair(name)
        ctx.dropped.extend(dropped)
        ctx.unknown.extend(unknown)
        return out
    inner = _Ctx(ctx.root, ctx.validator, ctx.memo)
    inner.work = ctx.work
    out = _norm_once(value, schema, inner, path, depth, drop)
    ctx.work = inner.work
    ctx.memo[key] = (
        out,
        tuple(inner.repairs),
        tuple(inner.dropped),
        tuple(inner.unknown),
        value,
        schema,
    )
    ctx.merge(inner)
    return out


def _norm_once(value: Any, schema: Any, ctx: _Ctx, path: str, depth: int, drop: bool) -> Any:
    ctx.work += 1
    charge(1, "typing arguments by a schema")
    schema = resolve(schema, ctx.root)
    if not isinstance(schema, Mapping) or depth > MAX_ARGUMENT_DEPTH or ctx.work > _WORK_BUDGET:
        return value
    for sub in schema.get("allOf") or ():
        value = _norm(value, sub, ctx, path, depth + 1, drop=False)
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list) and branches:
        value = _branch(value, branches, ctx, path, depth)
    types = types_of(schema, ctx.root, infer=False) if _says_type(schema) else None
    if types is not None:
        value = _coerce(value, types, ctx, depth)
    if isinstance(value, dict) and (types is None or "object" in types):
        value = _object(value, schema, ctx, path, depth, drop)
    elif isinstance(value, list) and (types is None or "array" in types):
        value = _array(value, schema, ctx, path, depth)
    enum = schema.get("enum")
    if isinstance(value, str) and isinstance(enum, list) and value not in enum:
        matches = [o for o in enum if isinstance(o, str) and o.lower() == value.lower()]
        if len(matches) == 1:
            ctx.repair("enum-case")
            value = matches[0]
    return value


def _says_type(schema: Mapping[str, Any]) -> bool:
    return any(k in schema for k in ("type", "enum", "const", "anyOf", "oneOf"))


def _branch(value: Any, branches: list[Any], ctx: _Ctx, path: str, depth: int) -> Any:
    if any(_valid(value, b, ctx) for b in branches):
        return value
    for branch in branches:
        trial = ctx.scratch()
        candidate = _norm(value, branch, trial, path, depth + 1, drop=False)
        ctx.work = trial.work  # the budget spent trying counts, kept or not
        if _valid(candidate, branch, ctx):
            ctx.merge(trial)
            return candidate
        if ctx.work > _WORK_BUDGET:
            break
    return value


def _as_number(text: str, types: set[str]) -> Any:
    """The number a string means, exactly, or None when it means none we can keep."""
    if len(text) > _MAX_NUMBER_CHARS or not _NUMBER.fullmatch(text):
        return None
    try:
        exact = Decimal(text)
    except InvalidOperation:
        return None
    if abs(exact.adjusted()) > _MAX_EXPONENT:
        return None  # "1e5000": more digits than a number is read with; the check refuses it
    if "integer" in types and exact == exact.to_integral_value():
        return int(exact)
    if "number" not in types:
        return None
    if not any(c in text for c in ".eE"):
        return int(text)
    number = float(exact)
    if number in (float("inf"), float("-inf")) or (number == 0 and exact != 0):
        return None  # beyond what a float holds: keep the text for the check to refuse
    return number


def _coerce(value: Any, types: set[str], ctx: _Ctx, depth: int) -> Any:
    if isinstance(value, str) and "string" not in types:
        word = value.strip()  # (a tagged value's text, the template's white space around it)
        if types & {"number", "integer"}:
            number = _as_number(word, types)
            if number is not None:
                ctx.repair("number-from-string")
                return number
        if "boolean" in types and word in _BOOLEAN_TEXTS:
            ctx.repair("boolean-from-string")
            return _BOOLEAN_TEXTS[word]
        if types & {"array", "object"} and value.lstrip()[:1] in ("[", "{"):
            try:
                read = read_json(value, max_depth=max(1, MAX_ARGUMENT_DEPTH - depth))
            except ArgumentsError:
                read = None
            if read is not None and (
                (isinstance(read.value, list) and "array" in types)
                or (isinstance(read.value, dict) and "object" in types)
            ):
                ctx.repair("json-from-string")
                for name in read.repairs:
                    ctx.repair(name)
                return read.value
    if (
        isinstance(value, float)
        and "integer" in types
        and "number" not in types
        and value.is_integer()
        and abs(value) <= _EXACT_FLOAT_INT
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
    value: dict[str, Any],
    schema: Mapping[str, Any],
    ctx: _Ctx,
    path: str,
    depth: int,
    drop: bool,
) -> dict[str, Any]:
    props, patterns, is_open = declared(schema, ctx.root)
    own = schema.get("properties")
    own = own if isinstance(own, Mapping) else {}
    required = schema.get("required")
    required = set(required) if isinstance(required, list) else set()
    extra = schema.get("additionalProperties")
    out: dict[str, Any] = {}
    for key, item in value.items():
        where = _join(path, key)
        if key in own or key in props:
            sub = own.get(key, props.get(key))
            if item is None and key not in required and not allows_null(sub, ctx.root):
                ctx.repair("null-dropped")
                ctx.dropped.append(where)
                continue
            # a field declared only elsewhere (another allOf part, a branch) is that
            # part's to normalise; here it is only kept
            out[key] = _norm(item, sub, ctx, where, depth + 1) if key in own else item
            continue
        pattern = matching_pattern(patterns, key)
        if pattern is not None:
            out[key] = _norm(item, patterns[pattern], ctx, where, depth + 1)
        elif has_unchecked(patterns):
            out[key] = item  # a pattern not checked may take it: kept as sent
        elif is_open or not drop:
            if isinstance(extra, Mapping) and drop:
                out[key] = _norm(item, extra, ctx, where, depth + 1)
            else:
                out[key] = item
        else:
            ctx.dropped.append(where)
            ctx.unknown.append(where)
    return out


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
