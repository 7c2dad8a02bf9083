"""The one argument pipeline every backend uses: read, normalise, check, explain."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema.exceptions import SchemaError, UnknownType
from referencing.exceptions import Unresolvable

from ..errors import ArgumentsError
from .explain import check, describe_value, signature
from .normalise import normalise
from .read import ReadError, read_json
from .schema import validator_for

__all__ = ["PreparedArguments", "prepare_arguments"]


@dataclass(frozen=True)
class PreparedArguments:
    """Arguments ready for the tool: typed, checked, and what it took to get there."""

    arguments: dict[str, Any]
    #: Every repair and normalisation applied, by name, in the order first met.
    repairs: tuple[str, ...] = ()
    #: Fields removed: ones the tool does not take, and nulls for optional fields.
    dropped: tuple[str, ...] = ()


def _takes(schema: Mapping[str, Any]) -> str:
    return f"It takes: {signature(schema)}"


def _unreadable(name: str, error: ReadError, schema: Mapping[str, Any]) -> ArgumentsError:
    where = f" at line {error.line}, column {error.column}" if error.line else ""
    text = (
        f"The arguments for {name} could not be read: {error.what}{where}. "
        f"Send them again as one JSON object.\n{_takes(schema)}"
    )
    return ArgumentsError(
        text, kind="limit" if "over" in error.what else "unreadable", problems=error.problems
    )


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
) -> PreparedArguments:
    """Turn what the model sent into arguments the tool can take, or explain why not.

    ``raw`` is the argument text (or an already decoded mapping, as some providers send);
    ``schema`` is the tool's parameters schema. With ``strict`` nothing is repaired or
    normalised: the arguments must be valid JSON that fits the schema as sent, and fields
    the tool does not take are errors. Raises :class:`~toolwire.errors.ArgumentsError` only.
    """
    repairs: list[str] = []
    try:
        if isinstance(raw, Mapping):
            value: Any = dict(raw)
        else:
            result = read_json(raw, strict=strict)
            value = result.value
            repairs += result.repairs
            if isinstance(value, str) and value.lstrip().startswith("{"):
                if strict:
                    raise ReadError("the arguments are a JSON string, not an object", 1, 1)
                value = read_json(value).value
                repairs.append("string-encoded")
    except ReadError as exc:
        raise _unreadable(name, exc, schema) from None
    if not isinstance(value, dict):
        raise _invalid(
            name, [f"- the arguments: expected an object, got {describe_value(value)}."], schema
        )
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    if (
        not strict
        and "arguments" not in props
        and set(value) <= {"arguments", "name"}
        and not ("name" in value and "name" in props)
        and isinstance(value.get("arguments"), (dict, str))
    ):
        inner = value["arguments"]
        if isinstance(inner, str):
            try:
                inner = read_json(inner).value
            except ReadError:
                inner = None
        if isinstance(inner, dict):
            value = inner
            repairs.append("arguments-envelope")
    dropped: list[str] = []
    validator = validator_for(schema)  # a broken schema is refused before any value is judged
    try:
        if not strict:
            done = normalise(value, schema, validator)
            value = done.value
            repairs += [r for r in done.repairs if r not in repairs]
            dropped = done.dropped
        lines = check(value, schema, validator)
        if strict:
            extra = [k for k in value if props and k not in props]
            if extra and not _open(schema):
                lines += [f"- {k}: not a field this tool takes." for k in extra]
    except (SchemaError, UnknownType, Unresolvable, TypeError, re.error, RecursionError) as exc:
        raise ArgumentsError(
            f"The tool {name} has a schema that cannot be checked: {exc}", kind="schema"
        ) from None
    if lines:
        raise _invalid(name, lines, schema)
    return PreparedArguments(value, tuple(dict.fromkeys(repairs)), tuple(dropped))


def _open(schema: Mapping[str, Any]) -> bool:
    extra = schema.get("additionalProperties")
    return extra is True or isinstance(extra, Mapping)
