"""The one argument pipeline every backend uses: read, normalise, check, explain."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema.exceptions import SchemaError, UnknownType
from referencing.exceptions import Unresolvable

from ..errors import ArgumentsError
from .explain import cap_problems, check, describe_value, signature
from .normalise import normalise
from .patterns import matching_pattern
from .read import ReadError, read_json
from .schema import declared, recursive_unions, types_of, unchecked_patterns, validator_for

__all__ = ["PreparedArguments", "prepare_arguments"]


@dataclass(frozen=True)
class PreparedArguments:
    """Arguments ready for the tool: typed, checked, and what it took to get there."""

    arguments: dict[str, Any]
    #: Every repair and normalisation applied, by name, in the order first met.
    repairs: tuple[str, ...] = ()
    #: Fields removed: ones the tool does not take, and nulls for optional fields.
    dropped: tuple[str, ...] = ()
    #: Of those, the fields the tool does not take (its schema does not list them).
    unknown: tuple[str, ...] = ()
    #: Where the schema has a pattern that could not be checked (``properties.host.pattern``):
    #: one a linear-time matcher cannot take, so the arguments were not checked against it.
    unchecked: tuple[str, ...] = ()


def _takes(schema: Mapping[str, Any]) -> str:
    return f"It takes: {signature(schema)}"


def _unreadable(name: str, error: ReadError, schema: Mapping[str, Any]) -> ArgumentsError:
    where = f" at line {error.line}, column {error.column}" if error.line else ""
    text = (
        f"The arguments for {name} could not be read: {error.what}{where}. "
        f"Send them again as one JSON object.\n{_takes(schema)}"
    )
    return ArgumentsError(text, kind=error.kind, problems=error.problems)


def _invalid(name: str, lines: list[str], schema: Mapping[str, Any]) -> ArgumentsError:
    text = (
        f"The arguments for {name} don't fit. Fix these and call it again:\n"
        + "\n".join(lines)
        + f"\n{_takes(schema)}"
    )
    return ArgumentsError(text, kind="invalid", problems=tuple(lines))


def prepare_arguments(
    raw: str | Mapping[str, Any],
    schema: Mapping[str, Any],
    *,
    strict: bool = False,
    name: str = "the tool",
    text_values: bool = False,
) -> PreparedArguments:
    """Turn what the model sent into arguments the tool can take, or explain why not.

    ``raw`` is the argument text (or an already decoded mapping, as some providers send);
    ``schema`` is the tool's parameters schema. With ``strict`` nothing is repaired or
    normalised: the arguments must be valid JSON that fits the schema as sent, and fields
    the tool does not take are errors. ``text_values`` says the grammar wrote every value as
    text (XML parameters): a value for a parameter that is not text is read as the JSON it
    spells (``3``, ``[1, 2]``), as the grammar means it — that is no repair; Python's
    ``True``/``False``/``None`` are the named repair ``python-literals``.
    Raises :class:`~toolwire.errors.ArgumentsError` only.
    """
    repairs: list[str] = []
    validator = validator_for(schema)  # a broken schema is refused before any value is judged
    try:
        if isinstance(raw, Mapping):
            value: Any = dict(raw)
        elif isinstance(raw, str):
            result = read_json(raw, strict=strict)
            value = result.value
            repairs += result.repairs
            if isinstance(value, str) and value.lstrip().startswith("{"):
                if strict:
                    raise ReadError("the arguments are a JSON string, not an object", 1, 1)
                inner = read_json(value)
                value = inner.value
                repairs += ["string-encoded", *inner.repairs]
        else:
            value = raw  # already decoded: a list, a number… (refused below)
    except ReadError as exc:
        raise _unreadable(name, exc, schema) from None
    if not isinstance(value, dict):
        raise _invalid(
            name, [f"- the arguments: expected an object, got {describe_value(value)}."], schema
        )
    if not all(isinstance(k, str) for k in value):
        raise _invalid(name, ["- the arguments: every field name must be text."], schema)
    if text_values:
        value = _read_text_values(value, schema, repairs, strict=strict)
    if not strict:
        value = _unwrap_envelope(value, schema, repairs)
    if recursive_unions(schema) and _nesting(value) > MAX_UNION_NESTING:
        raise ArgumentsError(
            f"The arguments for {name} are nested {_nesting(value)} levels deep; this tool's "
            f"schema allows at most {MAX_UNION_NESTING} to be checked. Send a flatter value.\n"
            + _takes(schema),
            kind="limit",
        )
    dropped: list[str] = []
    unknown: list[str] = []
    try:
        done = normalise(value, schema, validator)
        if strict:
            # strict: the value as sent must fit; a field normalising would drop is an error
            unknown = [d for d in done.dropped if d not in _nulls(value)]
            lines = cap_problems(
                [
                    *check(value, schema, validator),
                    *(f"- {d}: not a field this tool takes." for d in unknown),
                ]
            )
        else:
            value = done.value
            repairs += done.repairs
            dropped = done.dropped
            unknown = done.unknown
            lines = check(value, schema, validator)
    except (
        SchemaError,
        UnknownType,
        Unresolvable,
        TypeError,
        ValueError,
        re.error,
        RecursionError,
    ) as exc:
        raise ArgumentsError(
            f"The tool {name} has a schema that cannot be checked: {exc}", kind="schema"
        ) from None
    if lines:
        raise _invalid(name, lines, schema)
    return PreparedArguments(
        value,
        tuple(dict.fromkeys(repairs)),
        tuple(dropped),
        tuple(unknown),
        unchecked_patterns(schema),
    )


#: Nesting checked against a schema that recurses through anyOf/oneOf, at most: jsonschema
#: explores every branch at every level, so its work grows exponentially with depth.
MAX_UNION_NESTING = 10


def _nesting(value: Any) -> int:
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _nulls(value: dict[str, Any]) -> set[str]:
    """Top-level fields dropped for being null: strict leaves them to the check."""
    return {k for k, v in value.items() if v is None}


def _unwrap_envelope(
    value: dict[str, Any], schema: Mapping[str, Any], repairs: list[str]
) -> dict[str, Any]:
    """``{"arguments": {...}}`` around the real arguments, when the tool takes no such field."""
    props, patterns, is_open = declared(schema, schema)
    if (
        is_open
        or "arguments" in props
        or matching_pattern(patterns, "arguments") is not None
        or not set(value) <= {"arguments", "name"}
        or ("name" in value and "name" in props)
        or not isinstance(value.get("arguments"), (dict, str))
    ):
        return value
    inner: Any = value["arguments"]
    found: tuple[str, ...] = ()
    if isinstance(inner, str):
        try:
            read = read_json(inner)
            inner, found = read.value, read.repairs
        except ReadError:
            return value
    if not isinstance(inner, dict):
        return value
    repairs += ["arguments-envelope", *found]
    return inner


def _read_text_values(
    value: dict[str, Any], schema: Mapping[str, Any], repairs: list[str], *, strict: bool
) -> dict[str, Any]:
    """Each text value of a parameter that is not text, read as the JSON it spells.

    Python's ``True``/``False``/``None`` where a boolean or null is wanted (what a template
    renders with Jinja's ``string`` filter) are the named repair ``python-literals``. Any
    other text stays text (and with ``strict`` so does a Python literal): normalising may
    still read it, and otherwise the check names it. For a parameter of text or null, the
    text ``null`` is null: the JSON a template writes for every value that is not text.
    """
    props, _, _ = declared(schema, schema)
    out: dict[str, Any] = {}
    for key, item in value.items():
        prop = props.get(key)
        types = types_of(prop, schema, infer=False) if prop is not None else None
        if isinstance(item, str) and types is not None and {"string", "null"} <= types:
            # text or null: a template writes text as it is and the rest as JSON, so the
            # text ``null`` is the null it rendered (what the peers read, too)
            if item.strip() == "null":
                item = None
        elif isinstance(item, str) and types is not None and "string" not in types:
            text = item.strip()
            if not strict and text in _PY_LITERALS and _json_kind(_PY_LITERALS[text]) in types:
                item = _PY_LITERALS[text]
                repairs.append("python-literals")
            else:
                with contextlib.suppress(ReadError):
                    item = read_json(text, strict=True).value
        out[key] = item
    return out


_PY_LITERALS = {"True": True, "False": False, "None": None}


def _json_kind(value: Any) -> str:
    return "null" if value is None else "boolean"
