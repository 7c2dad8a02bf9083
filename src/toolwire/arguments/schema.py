"""Small questions asked of a JSON schema: its types, its references, whether null fits.

Shared by normalisation, the checker's explanations and the tool signature, so that each
reads a schema the same way. References are local (``#/$defs/…``, ``#/definitions/…``) and
followed a bounded number of times, so a recursive schema cannot loop.

A schema is refused (:func:`validator_for`, the one check every API makes of a tool's
schema) when its references chain deeper than :data:`MAX_REF_DEPTH` hops, or when following
them would expand it past :data:`MAX_SCHEMA_EXPANSION` nodes (each definition referring to
the next twice doubles it at every step): every walk over a schema, jsonschema's included,
would otherwise recurse past Python's stack or run for ever. A reference back to a
definition being expanded (a recursive schema: a tree, a list of lists) is not followed
again — it is bounded by the value checked against it, not by the schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import orjson

from ..budget import charge
from ..errors import ArgumentsError

if TYPE_CHECKING:
    from jsonschema.protocols import Validator
from .patterns import matching_pattern, unchecked

__all__ = [
    "MAX_REF_DEPTH",
    "MAX_SCHEMA_EXPANSION",
    "allows_null",
    "declared",
    "matching_pattern",
    "recursive_unions",
    "resolve",
    "types_of",
    "unchecked_patterns",
    "validator_for",
]


def _dumped(schema: Mapping[str, Any]) -> str | bytes:
    """The schema as canonical JSON, the key its cached work is kept by: orjson's (a call's
    hot path: a schema is dumped for every call), or the standard library's where orjson
    refuses (a key that is not a string); a ``TypeError``/``ValueError`` when neither can."""
    try:
        return orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(schema, sort_keys=True)


@lru_cache(maxsize=1)
def _meta() -> Validator:
    """The checker of schemas: Draft 2020-12's meta-schema as one document (see
    :mod:`.metaschema`), each keyword it evaluates charged like any check's."""
    # (jsonschema is loaded with the first check: a reader that only walks a schema, to
    # tell which tool a call names, starts without it)
    from .keywords import SCHEMA_FORMATS, Checker
    from .metaschema import flat_metaschema

    meta: Validator = Checker(flat_metaschema(), format_checker=SCHEMA_FORMATS)
    return meta


@lru_cache(maxsize=256)
def _validator(dumped: str | bytes) -> Validator:
    """A schema checked and its validator made: run once per schema (cached), so its
    work is charged to the request that first declares it, and only then. The cache keeps
    256: enough for many clients' tools; each entry holds its schema and validator (about
    150 objects), which every full collection of the process scans."""
    charge(1 + len(dumped) // 256, "reading a tool's schema")
    schema = json.loads(dumped)
    problem = ref_problem(schema) or _loop(schema)
    if problem is not None:
        raise ArgumentsError(f"The tool's schema is not usable: {problem}", kind="schema")
    from jsonschema.exceptions import best_match

    from .keywords import Checker

    error = best_match(_meta().iter_errors(schema))
    if error is not None:
        raise ArgumentsError(
            f"The tool's schema is not a valid JSON schema: {error.message}", kind="schema"
        )
    checker: Validator = Checker(schema)
    return checker


def validator_for(schema: Mapping[str, Any]) -> Validator:
    """A checked, cached Draft 2020-12 validator; a broken schema is the tool's fault."""
    try:
        dumped = _dumped(schema)
    except (TypeError, ValueError) as exc:
        raise ArgumentsError(f"The tool's schema is not JSON: {exc}", kind="schema") from None
    return _validator(dumped)


_MAX_HOPS = 32

#: ``$ref`` hops one after another (each inside the one before), at most, in a schema.
MAX_REF_DEPTH = 64
#: The nodes a schema would have with its references expanded (a reference back to a
#: definition being expanded counted once), at most.
MAX_SCHEMA_EXPANSION = 100_000


class _Frame:
    """A node being measured by :func:`ref_problem`: what is left of it to walk, and what
    was found so far."""

    def __init__(self, node: Any, root: Any, *, hop: bool) -> None:
        self.node = node
        self.hop = hop  # reached through a $ref: a hop deeper than its parent
        self.children: list[tuple[Any, bool]] = [
            (child, False) for child in (node.values() if isinstance(node, Mapping) else node)
        ]
        ref = node.get("$ref") if isinstance(node, Mapping) else None
        target = _pointer(root, ref) if isinstance(ref, str) else None
        if isinstance(target, (Mapping, list)):
            self.children.append((target, True))
        self.size = 1
        self.depth = 0

    def add(self, measured: tuple[int, int], hop: bool) -> None:
        self.size += measured[0]
        self.depth = max(self.depth, measured[1] + hop)


def ref_problem(root: Any) -> str | None:
    """Why the references of ``root`` cannot be followed safely (None: they can).

    One walk with an explicit stack (no recursion, whatever the nesting), each node's
    expanded size and reference depth worked out once and reused wherever it is referred
    to: linear in the schema's size, whatever its references would expand to."""
    if not isinstance(root, (Mapping, list)):
        return None
    memo: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded size, $ref depth)
    active: set[int] = {id(root)}  # being expanded: a reference back to one is a cycle
    stack = [_Frame(root, root, hop=False)]
    while stack:
        frame = stack[-1]
        if frame.children:
            child, hop = frame.children.pop()
            if not isinstance(child, (Mapping, list)) or id(child) in active:
                frame.size += 1  # a leaf, or a reference back (a cycle: not expanded again)
                continue
            measured = memo.get(id(child))
            if measured is None:
                stack.append(_Frame(child, root, hop=hop))
                active.add(id(child))
                continue
            frame.add(measured, hop)
        else:
            stack.pop()
            active.discard(id(frame.node))
            measured = (min(frame.size, MAX_SCHEMA_EXPANSION + 1), frame.depth)
            memo[id(frame.node)] = measured
            if not stack:
                return None
            stack[-1].add(measured, frame.hop)
            frame = stack[-1]
        if frame.depth > MAX_REF_DEPTH:
            return f"its $ref references chain more than {MAX_REF_DEPTH} deep"
        if frame.size > MAX_SCHEMA_EXPANSION:
            return f"its $ref references would expand it past {MAX_SCHEMA_EXPANSION} nodes"
    return None


#: The keywords that apply a subschema to the value itself, not to a part of it: a cycle of
#: references through only these never reaches a smaller value, so no check of it ends.
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_ONE = ("not", "if", "then", "else")


def _in_place(node: Mapping[str, Any], root: Any) -> list[Any]:
    """The subschemas ``node`` applies to the very value it checks."""
    found: list[Any] = []
    for word in _IN_PLACE_LISTS:
        value = node.get(word)
        if isinstance(value, list):
            found += value
    found += [node[word] for word in _IN_PLACE_ONE if word in node]
    dependent = node.get("dependentSchemas")
    if isinstance(dependent, Mapping):
        found += dependent.values()
    ref = node.get("$ref")
    if isinstance(ref, str):
        found.append(_pointer(root, ref))
    return [child for child in found if isinstance(child, Mapping)]


def _loop(root: Any) -> str | None:
    """Why ``root`` cannot be checked at all: a ``$ref`` that leads back to itself through
    keywords that apply to the same value (``{"$ref": "#"}``, two definitions referring to
    each other through ``allOf``), which no value can end. One depth-first walk with an
    explicit stack over the schema's objects, each visited once: linear in the schema."""
    if not isinstance(root, Mapping):
        return None
    nodes: list[Mapping[str, Any]] = []
    stack: list[Any] = [root]
    while stack:  # every object of the schema, wherever it sits
        item = stack.pop()
        if isinstance(item, Mapping):
            nodes.append(item)
            stack.extend(v for k, v in item.items() if k not in ("enum", "const", "default"))
        elif isinstance(item, list):
            stack.extend(item)
    state: dict[int, int] = {}  # id -> 1 on the walk's path, 2 done
    for start in nodes:
        if id(start) in state:
            continue
        path: list[tuple[Mapping[str, Any], list[Any]]] = [(start, _in_place(start, root))]
        state[id(start)] = 1
        while path:
            node, children = path[-1]
            if not children:
                state[id(node)] = 2
                path.pop()
                continue
            child = children.pop()
            seen = state.get(id(child))
            if seen == 1:
                return "its $ref references loop back to the same value without descending into it"
            if seen is None:
                state[id(child)] = 1
                path.append((child, _in_place(child, root)))
    return None


def _pointer(root: Mapping[str, Any], ref: str) -> Any:
    if not ref.startswith("#"):
        return None
    node: Any = root
    for raw in ref[1:].split("/")[1:] if ref != "#" else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    """The schema with ``$ref`` followed (sibling keywords kept beside the target's)."""
    hops = 0
    while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str) and hops < _MAX_HOPS:
        target = _pointer(root, schema["$ref"])
        if not isinstance(target, Mapping):
            return schema
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        schema = _merge(target, siblings) if siblings else target
        hops += 1
    return schema


def _merge(target: Mapping[str, Any], siblings: Mapping[str, Any]) -> dict[str, Any]:
    """A ``$ref`` target with its sibling keywords: both apply, so their properties and
    required fields add up rather than one replacing the other."""
    merged = {**target, **siblings}
    for key in ("properties", "patternProperties"):
        a, b = target.get(key), siblings.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            merged[key] = {**a, **b}
    a, b = target.get("required"), siblings.get("required")
    if isinstance(a, list) and isinstance(b, list):
        merged["required"] = list(dict.fromkeys([*a, *b]))
    return merged


def declared(
    schema: Any, root: Mapping[str, Any], _depth: int = 0
) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """Every field an object schema may take, wherever it is declared.

    Properties may sit in the node itself, in ``allOf`` parts, in ``anyOf``/``oneOf``
    branches, in ``if``/``then``/``else`` or ``dependentSchemas``, or behind ``$ref``.
    Returns the properties (name → first schema found), the pattern properties, and
    whether the object is open (takes fields it does not name).
    """
    charge(1, "finding the fields a schema takes")
    schema = resolve(schema, root)
    props: dict[str, Any] = {}
    patterns: dict[str, Any] = {}
    if not isinstance(schema, Mapping) or _depth > _MAX_HOPS:
        return props, patterns, True
    own = schema.get("properties")
    if isinstance(own, Mapping):
        props.update(own)
    own_patterns = schema.get("patternProperties")
    if isinstance(own_patterns, Mapping):
        patterns.update(own_patterns)
    extra = schema.get("additionalProperties")
    is_open = extra is True or isinstance(extra, Mapping)
    subs: list[Any] = []
    for key in ("allOf", "anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            subs.extend(schema[key])
    for key in ("if", "then", "else"):
        if key in schema:
            subs.append(schema[key])
    if isinstance(schema.get("dependentSchemas"), Mapping):
        subs.extend(schema["dependentSchemas"].values())
    for sub in subs:
        if not isinstance(sub, Mapping):
            continue
        p, q, o = declared(sub, root, _depth + 1)
        for name, value in p.items():
            props.setdefault(name, value)
        for name, value in q.items():
            patterns.setdefault(name, value)
        is_open = is_open or (o and _says_object_things(sub, root))
    if not props and not patterns:
        is_open = True  # an object schema that names no field takes any
    return props, patterns, is_open


def _says_object_things(schema: Any, root: Mapping[str, Any]) -> bool:
    schema = resolve(schema, root)
    if not isinstance(schema, Mapping):
        return False
    extra = schema.get("additionalProperties")
    return extra is True or isinstance(extra, Mapping)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def types_of(
    schema: Any, root: Mapping[str, Any], _hops: int = 0, *, infer: bool = True
) -> set[str] | None:
    """The JSON types a schema admits, or None when it does not say (any type).

    With ``infer``, ``properties`` implies an object and ``items`` a list — right for
    describing a schema, wrong for changing a value (those keywords bind only values that
    already are objects or lists).
    """
    schema = resolve(schema, root)
    if not isinstance(schema, Mapping) or _hops > _MAX_HOPS:
        return None
    t = schema.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list) and t and all(isinstance(x, str) for x in t):
        return set(t)
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return {_json_type(v) for v in schema["enum"]}
    if "const" in schema:
        return {_json_type(schema["const"])}
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            found: set[str] = set()
            for option in options:
                sub = types_of(option, root, _hops + 1, infer=infer)
                if sub is None:
                    return None
                found |= sub
            return found
    if infer and "properties" in schema:
        return {"object"}
    if infer and "items" in schema:
        return {"array"}
    return None


def allows_null(schema: Any, root: Mapping[str, Any]) -> bool:
    types = types_of(schema, root)
    return types is None or "null" in types


@lru_cache(maxsize=256)
def _recursive_unions(dumped: str | bytes) -> bool:
    root = json.loads(dumped)
    seen: set[tuple[str, bool]] = set()

    def walk(node: Any, in_union: bool, stack: tuple[str, ...]) -> bool:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#"):
                if ref in stack:
                    return in_union  # a cycle: recursive; through a union, expensive
                if (ref, in_union) not in seen:
                    seen.add((ref, in_union))
                    target = _pointer(root, ref)
                    if walk(target, in_union, (*stack, ref)):
                        return True
            for key, child in node.items():
                if key in ("$defs", "definitions"):
                    continue
                if walk(child, in_union or key in ("anyOf", "oneOf"), stack):
                    return True
        elif isinstance(node, list):
            return any(walk(child, in_union, stack) for child in node)
        return False

    return walk(root, False, ())


def recursive_unions(schema: Mapping[str, Any]) -> bool:
    """True when the schema refers back to itself through ``anyOf``/``oneOf``.

    Checking a value against such a schema costs jsonschema time that grows exponentially
    with the value's nesting, so the pipeline bounds that nesting.
    """
    return _recursive_unions(_dumped(schema))


def unchecked_patterns(schema: Mapping[str, Any]) -> tuple[str, ...]:
    """Where ``schema`` has a pattern that cannot be checked safely (see :mod:`.patterns`)."""
    return unchecked(_dumped(schema))
