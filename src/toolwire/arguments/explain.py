"""Checking arguments strictly, and saying what is wrong so a small model can fix it.

The check is ``jsonschema`` (Draft 2020-12, formats not enforced) against the tool's original
schema. Each finding becomes one line naming the field, what was wanted, what was sent and
the valid values; the tool's one-line signature closes the message:

    The arguments for search_mail don't fit. Fix these and call it again:
    - query: required (text), but it was missing.
    - limit: expected a number, got the text "ten".
    It takes: {query: string, limit?: integer, order?: "newest"|"oldest"}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator

from .patterns import has_unchecked, matching_pattern
from .schema import declared, resolve, types_of, validator_for

__all__ = ["cap_problems", "check", "describe_value", "signature", "wanted"]

_KINDS = {
    "string": "text",
    "integer": "a number",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}
_MAX_SHOWN = 60
_MAX_PROBLEMS = 12


def _short(text: str) -> str:
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


def describe_value(value: Any) -> str:
    """How a sent value reads in a message: ``the text "ten"``, ``the number 3.5``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        try:
            return f"the number {value}"
        except ValueError:  # more digits than Python will print
            return "a number with thousands of digits"
    if isinstance(value, str):
        return "the text " + _short(json.dumps(value, ensure_ascii=False))
    if isinstance(value, list):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    return "an object"


def _options(values: Iterable[Any]) -> str:
    return ", ".join(_short(json.dumps(v, ensure_ascii=False)) for v in values)


def wanted(schema: Any, root: Mapping[str, Any]) -> str:
    """What a schema wants, in words: ``text``, ``a number``, ``one of "a", "b"``."""
    schema = resolve(schema, root)
    if isinstance(schema, Mapping):
        if isinstance(schema.get("enum"), list):
            return "one of " + _options(schema["enum"])
        if "const" in schema:
            return "exactly " + _options([schema["const"]])
    types = types_of(schema, root)
    if not types:
        return "a value"
    kinds = []
    for t in ("string", "integer", "number", "boolean", "array", "object", "null"):
        if t in types and _KINDS[t] not in kinds:
            kinds.append(_KINDS[t])
    return " or ".join(kinds)


def _path(error: ValidationError, key: str | None = None) -> str:
    out = ""
    for part in [*error.absolute_path, *([key] if key is not None else [])]:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the arguments"


def _plural(n: Any, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _line(error: ValidationError, root: Mapping[str, Any], validator: Validator) -> list[str]:
    v = error.validator
    value: Any = error.instance
    spec: Any = error.validator_value
    sch: Any = error.schema
    got = describe_value(value)
    path = _path(error)
    if v is None or sch is False:  # a ``false`` subschema: nothing is allowed there
        where = _path(error) if error.absolute_path else _false_path(error)
        return [f"- {where}: not allowed here."]
    if v == "required":
        props = sch.get("properties", {}) if isinstance(sch, Mapping) else {}
        missing = [k for k in spec if isinstance(value, dict) and k not in value]
        return [
            f"- {_path(error, k)}: required ({wanted(props.get(k, {}), root)}), but it was missing."
            for k in missing
        ]
    if v == "type":
        want = wanted(sch, root)
        types = {spec} if isinstance(spec, str) else set(spec) if isinstance(spec, list) else set()
        if (
            "integer" in types
            and "number" not in types
            and isinstance(value, float)
            and not isinstance(value, bool)
        ):
            want = want.replace("a number", "a whole number")
        return [f"- {path}: expected {want}, got {got}."]
    if v == "enum":
        return [f"- {path}: expected one of {_options(spec)}, got {got}."]
    if v == "const":
        return [f"- {path}: expected exactly {_options([spec])}, got {got}."]
    if v in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        word = {
            "minimum": "at least",
            "maximum": "at most",
            "exclusiveMinimum": "more than",
            "exclusiveMaximum": "less than",
        }[str(v)]
        return [f"- {path}: expected a number {word} {spec}, got {got}."]
    if v in ("minLength", "maxLength"):
        word = "at least" if v == "minLength" else "at most"
        return [
            f"- {path}: expected text of {word} {_plural(spec, 'character')}, got {len(value)}."
        ]
    if v in ("minItems", "maxItems"):
        word = "at least" if v == "minItems" else "at most"
        return [f"- {path}: expected a list of {word} {_plural(spec, 'item')}, got {len(value)}."]
    if v == "pattern":
        return [f"- {path}: expected text matching {spec}, got {got}."]
    if v == "additionalProperties" and isinstance(value, dict):
        props = sch.get("properties", {}) if isinstance(sch, Mapping) else {}
        patterns = sch.get("patternProperties", {}) if isinstance(sch, Mapping) else {}
        extra = [
            k
            for k in value
            if k not in props
            and matching_pattern(patterns, k) is None
            and not has_unchecked(patterns)
        ]
        return [f"- {_path(error, k)}: not a field this tool takes." for k in extra]
    if v in ("anyOf", "oneOf"):
        fits = sum(1 for b in spec if validator.evolve(schema=b).is_valid(value) is True)
        options = " | ".join(_wanted_for(b, value, root) for b in spec)
        if v == "oneOf" and fits > 1:
            return [f"- {path}: fits more than one of: {options}; make it match exactly one."]
        inner = _one_branch(error, value, root, validator)
        if inner is not None:
            return inner
        return [f"- {path}: expected {options}, got {got}."]
    if v == "uniqueItems":
        return [f"- {path}: expected a list without repeated items."]
    return [f"- {path}: {error.message}."]


def _wanted_for(schema: Any, value: Any, root: Mapping[str, Any]) -> str:
    want = wanted(schema, root)
    if isinstance(value, float) and types_of(schema, root) == {"integer"}:
        return "a whole number"
    return want


def _false_path(error: ValidationError) -> str:
    """jsonschema gives a ``false`` property no path of its own: take it from the schema path."""
    parts = list(error.relative_schema_path)
    if len(parts) >= 2 and parts[-2] == "properties":
        return str(parts[-1])
    return "the arguments"


def _one_branch(
    error: ValidationError,
    value: Any,
    root: Mapping[str, Any],
    validator: Validator,
) -> list[str] | None:
    """When exactly one branch takes the value's kind (an object for ``Model | None``), its
    own problems say more than "expected an object | null"."""
    by_branch: dict[int, list[ValidationError]] = {}
    for sub in error.context or ():
        branch = sub.relative_schema_path[0] if sub.relative_schema_path else None
        if isinstance(branch, int):
            by_branch.setdefault(branch, []).append(sub)
    kind_fits = [
        b
        for b, subs in by_branch.items()
        if not any(s.validator == "type" and not s.relative_path for s in subs)
    ]
    if len(kind_fits) != 1:
        return None
    lines: list[str] = []
    for sub in by_branch[kind_fits[0]]:
        for line in _line(sub, root, validator):
            if line not in lines:
                lines.append(line)
    return lines or None


def check(value: Any, schema: Mapping[str, Any], validator: Validator | None = None) -> list[str]:
    """The strict check: one line per problem (empty when the value fits)."""
    validator = validator or validator_for(schema)
    if validator.is_valid(value):
        return []
    errors = sorted(
        validator.iter_errors(value),
        key=lambda e: ([str(p) for p in e.absolute_path], str(e.validator)),
    )
    return cap_problems(_lines(errors, value, schema, validator))


def _lines(
    errors: list[ValidationError],
    value: Any,
    schema: Mapping[str, Any],
    validator: Validator,
) -> Iterator[str]:
    # jsonschema reports a field whose schema is ``false`` with no path: name the fields here
    props = schema.get("properties")
    forbidden = [
        k
        for k in (value if isinstance(value, dict) else ())
        if isinstance(props, Mapping) and props.get(k) is False
    ]
    for error in errors:
        if error.validator is None and not error.absolute_path and forbidden:
            for key in forbidden:
                yield f"- {key}: not allowed here."
            continue
        yield from _line(error, schema, validator)


def cap_problems(lines: Iterable[str]) -> list[str]:
    """Distinct problem lines, at most a dozen, then how many more (in linear time)."""
    seen: set[str] = set()
    kept: list[str] = []
    more = 0
    for line in lines:
        if line in seen:
            continue
        seen.add(line)
        if len(kept) < _MAX_PROBLEMS:
            kept.append(line)
        else:
            more += 1
    if more:
        kept.append(f"- … and {more} more.")
    return kept


_MAX_SIG_DEPTH = 3


def _type_sig(schema: Any, root: Mapping[str, Any], depth: int) -> str:
    schema = resolve(schema, root)
    if not isinstance(schema, Mapping):
        return "any"
    if depth > _MAX_SIG_DEPTH:
        return "…"
    if isinstance(schema.get("enum"), list):
        return "|".join(_short(json.dumps(v, ensure_ascii=False)) for v in schema["enum"])
    if "const" in schema:
        return _short(json.dumps(schema["const"], ensure_ascii=False))
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return "|".join(dict.fromkeys(_type_sig(b, root, depth + 1) for b in schema[key]))
    t = schema.get("type")
    if isinstance(t, list):
        return "|".join(str(x) for x in t)
    if isinstance(schema.get("prefixItems"), list):
        return "[" + ", ".join(_type_sig(b, root, depth + 1) for b in schema["prefixItems"]) + "]"
    if t == "array" or (t is None and "items" in schema):
        inner = _type_sig(schema.get("items", {}), root, depth + 1)
        return f"({inner})[]" if "|" in inner else f"{inner}[]"
    props, _, _ = declared(schema, root)
    if (t == "object" or t is None) and props:
        return signature(schema, root, depth + 1) if depth < 2 else "object"
    return str(t) if t else "any"


def signature(
    schema: Mapping[str, Any], root: Mapping[str, Any] | None = None, depth: int = 0
) -> str:
    """A tool's arguments in one line: ``{query: string, limit?: integer}``."""
    root = schema if root is None else root
    schema = resolve(schema, root)
    if not isinstance(schema, Mapping):
        return "{}"
    props, _, _ = declared(schema, root)
    if not props:
        return "{}"
    required: set[str] = set(schema.get("required") or [])
    for part in schema.get("allOf") or ():
        part = resolve(part, root)
        if isinstance(part, Mapping):
            required |= set(part.get("required") or [])
    parts = [
        f"{name}{'' if name in required else '?'}: {_type_sig(sub, root, depth)}"
        for name, sub in props.items()
    ]
    return "{" + ", ".join(parts) + "}"
