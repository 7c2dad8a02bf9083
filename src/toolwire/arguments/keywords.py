"""The checker: jsonschema's Draft 2020-12 with every pattern matched in linear time.

jsonschema matches ``pattern``, ``patternProperties`` (and through them
``additionalProperties`` and ``unevaluatedProperties``) with Python's backtracking ``re``;
here those four keywords are jsonschema's own, re-written over :mod:`.patterns`, so no
argument can hold the checker for long, and a pattern that cannot be checked safely refuses
nothing. A schema's ``format: regex`` values (its own patterns, when the schema itself is
checked) are judged the same way: a pattern is valid when RE2 or ``re`` compiles it (a
back-reference is valid ECMA-262 that RE2 lacks); ``re`` only compiles, never matches.

Every keyword the checker evaluates is charged a step of the active work budget
(:mod:`toolwire.budget`): a schema whose references fan out, or whose unions are tried
branch by branch, costs what it costs, and a request pays for it within its budget, never
past it. ``uniqueItems`` is judged by hashing each item's canonical form (jsonschema's own
compares objects pairwise: 3,000 objects took seconds), linear in the items.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterator, Mapping
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import ValidationError

from ..budget import charge
from .patterns import MAX_PATTERN, compiled, fits, has_unchecked, matching_pattern

__all__ = ["SCHEMA_FORMATS", "Checker"]


def _taken(patterns: Any, key: str) -> bool:
    """Whether a ``patternProperties`` takes ``key`` — or might (a pattern not checked)."""
    return matching_pattern(patterns, key) is not None or has_unchecked(patterns)


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and isinstance(pattern, str):
        why = fits(pattern, instance)
        if why is not None:
            yield ValidationError(f"{instance[:60]!r} does not match {pattern!r}: {why}")


def _pattern_properties(
    validator: Any, patterns: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object") or not isinstance(patterns, Mapping):
        return
    for pattern, subschema in patterns.items():
        if compiled(pattern) is None:
            continue  # not checked: it neither takes nor refuses a field
        for key, value in instance.items():
            if matching_pattern({pattern: None}, key) is not None:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    return [k for k in instance if k not in properties and not _taken(patterns, k)]


def _additional_properties(
    validator: Any, extra: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    extras = _additional(instance, schema)
    if validator.is_type(extra, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra, path=key)
    elif not extra and extras:
        listed = ", ".join(repr(k) for k in sorted(extras))
        yield ValidationError(f"Additional properties are not allowed ({listed} unexpected)")


def _valid(errors: Iterator[ValidationError]) -> bool:
    return next(errors, None) is None


def _evaluated(validator: Any, instance: Mapping[str, Any], schema: Any) -> set[str]:
    """The keys some keyword of ``schema`` evaluates: jsonschema's own walk for
    ``unevaluatedProperties``, its patterns matched by :mod:`.patterns`."""
    if not isinstance(schema, Mapping):
        return set()
    keys: set[str] = set()
    for word in ("$ref", "$dynamicRef"):
        ref = schema.get(word)
        if isinstance(ref, str):
            resolved = validator._resolver.lookup(ref)
            inner = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
            keys |= _evaluated(inner, instance, resolved.contents)
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        keys |= properties.keys() & instance.keys()
    for word in ("additionalProperties", "unevaluatedProperties"):
        sub = schema.get(word)
        if sub is not None:
            keys |= {k for k, v in instance.items() if _valid(validator.descend(v, sub))}
    patterns = schema.get("patternProperties")
    if isinstance(patterns, Mapping):
        keys |= {k for k in instance if _taken(patterns, k)}
    dependent = schema.get("dependentSchemas")
    if isinstance(dependent, Mapping):
        for key, sub in dependent.items():
            if key in instance:
                keys |= _evaluated(validator, instance, sub)
    for word in ("allOf", "oneOf", "anyOf"):
        for sub in schema.get(word, []) if isinstance(schema.get(word), list) else []:
            if _valid(validator.descend(instance, sub)):
                keys |= _evaluated(validator, instance, sub)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys |= _evaluated(validator, instance, schema["if"])
            if "then" in schema:
                keys |= _evaluated(validator, instance, schema["then"])
        elif "else" in schema:
            keys |= _evaluated(validator, instance, schema["else"])
    return keys


def _unevaluated_properties(
    validator: Any, unevaluated: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated(validator, instance, schema)
    bad = [
        key
        for key in instance
        if key not in evaluated
        and not _valid(validator.descend(instance[key], unevaluated, path=key, schema_path=key))
    ]
    if bad:
        listed = ", ".join(repr(k) for k in sorted(bad, key=str))
        if unevaluated is False:
            yield ValidationError(f"Unevaluated properties are not allowed ({listed} unexpected)")
        else:
            yield ValidationError(f"Unevaluated properties are not valid ({listed})")


#: The formats a schema's own keywords are checked with (``check_schema``): jsonschema's,
#: with ``regex`` judged without matching anything.
SCHEMA_FORMATS = FormatChecker()


@SCHEMA_FORMATS.checks("regex", raises=re.error)
def _is_regex(instance: object) -> bool:
    if not isinstance(instance, str) or len(instance) > MAX_PATTERN or compiled(instance):
        return True  # not text (the type keyword's), too long to check (not checked), or fine
    re.compile(instance)  # compiling is bounded by the pattern's length; nothing is matched
    return True


def _canonical(value: Any) -> Hashable:
    """A hashable form of a JSON value under JSON Schema's equality: ``1`` and ``1.0`` are
    one number, ``true`` is not ``1``, an object's keys are unordered. Iterative, so a deep
    value cannot blow the stack; linear in the value."""
    done: list[Hashable] = []
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, built = stack.pop()
        if built:
            kind, size, keys = item
            parts = done[len(done) - size :]
            del done[len(done) - size :]
            pairs = frozenset(zip(keys, parts, strict=True)) if kind == "o" else None
            done.append(("o", pairs) if pairs is not None else ("a", tuple(parts)))
        elif isinstance(item, bool) or item is None:
            done.append(("b", item))
        elif isinstance(item, (int, float)):
            whole = isinstance(item, int) or (item == item and item.is_integer())
            done.append(("n", int(item) if whole else item))
        elif isinstance(item, str):
            done.append(("s", item))
        elif isinstance(item, Mapping):
            keys = list(item.keys())
            stack.append((("o", len(keys), keys), True))
            stack.extend((item[k], False) for k in reversed(keys))
        elif isinstance(item, (list, tuple)):
            stack.append((("a", len(item), None), True))
            stack.extend((v, False) for v in reversed(item))
        else:
            done.append(("?", id(item)))
    return done[0]


def _unique_items(
    validator: Any, unique: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not unique or not validator.is_type(instance, "array"):
        return
    charge(1 + len(instance) // 20, "checking uniqueItems")
    seen: set[Hashable] = set()
    for item in instance:
        key = _canonical(item)
        if key in seen:
            yield ValidationError(f"{instance!r:.200} has non-unique elements")
            return
        seen.add(key)


_CHECKING = "checking a value against a schema"


def _charged(keyword: str, check: Any) -> Any:
    """``check`` charging the active work budget each time it is evaluated: a step, and
    one for each member of the keyword's value (``properties``, ``enum`` and ``required``
    loop over theirs)."""

    def charged(
        validator: Any, value: Any, instance: Any, schema: Any
    ) -> Iterator[ValidationError]:
        charge(1 + len(value) if isinstance(value, (dict, list)) else 1, _CHECKING)
        result = check(validator, value, instance, schema)
        return iter(()) if result is None else result

    charged.__name__ = check.__name__
    return charged


_KEYWORDS: dict[str, Any] = {
    **Draft202012Validator.VALIDATORS,
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "unevaluatedProperties": _unevaluated_properties,
    "uniqueItems": _unique_items,
}

Checker: Any = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    {keyword: _charged(keyword, check) for keyword, check in _KEYWORDS.items()},
    format_checker=SCHEMA_FORMATS,
)
