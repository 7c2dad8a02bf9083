"""The argument pipeline under attack: properties over generated input.

Only ArgumentsError ever leaves the pipeline, valid JSON comes back unchanged, a cut-off
text reads as a prefix of the truth, and odd but valid schemas never break it.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from toolwire import ArgumentsError, prepare_arguments
from toolwire.arguments import read_json
from toolwire.arguments.read import ReadError

# ----------------------------------------------------------------------- properties

_TOKENS = st.sampled_from(
    [
        *"{}[],:'\"\\#`\n\t ",
        "//",
        "/*",
        "*/",
        "\\u",
        "\\ud83d",
        "\\ude00",
        "True",
        "None",
        "null",
        "true",
        "1",
        "-",
        "1e5",
        "1e999",
        "0.5",
        '"a"',
        "'b'",
        "key",
        "```json\n",
        "NaN",
        '{"a":',
        ",}",
        ",]",
        "}{",
    ]
)


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=st.lists(_TOKENS, max_size=30).map("".join), strict=st.booleans())
def test_reader_refuses_only_with_read_errors_and_keeps_valid_json(text: str, strict: bool) -> None:
    try:
        result = read_json(text, strict=strict)
    except ReadError:
        return
    try:
        truth = json.loads(text)
    except ValueError:
        assert not strict, "strict accepted text that is not JSON"
        assert result.repairs, "a repaired read names no repair"
        return
    assert result.value == truth and result.repairs == ()


def _prefix_of(got: Any, truth: Any) -> bool:
    """``got`` is what a cut-off copy of ``truth`` may read as: nothing added, nothing changed."""
    if isinstance(truth, str):
        return isinstance(got, str) and truth.startswith(got)
    if isinstance(truth, bool) or truth is None:
        return got is truth
    if isinstance(truth, (int, float)):
        return isinstance(got, (int, float)) and not isinstance(got, bool)
    if isinstance(truth, list):
        n = len(got) if isinstance(got, list) else -1
        return 0 <= n <= len(truth) and (
            n == 0 or (got[:-1] == truth[: n - 1] and _prefix_of(got[-1], truth[n - 1]))
        )
    if not isinstance(got, dict) or list(got) != list(truth)[: len(got)]:
        return False
    keys = list(got)
    return all(got[k] == truth[k] for k in keys[:-1]) and (
        not keys or _prefix_of(got[keys[-1]], truth[keys[-1]])
    )


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=_JSON, indent=st.sampled_from([None, 1]), data=st.data())
def test_a_cut_off_text_reads_as_a_prefix_of_the_truth(value: Any, indent: Any, data: Any) -> None:
    text = json.dumps({"v": value}, ensure_ascii=False, indent=indent)
    cut = data.draw(st.integers(0, len(text)))
    with contextlib.suppress(ReadError):
        assert _prefix_of(read_json(text[:cut]).value, {"v": value})


_LEAF_SCHEMAS = st.sampled_from(
    [
        True,
        False,
        {},
        {"type": "string"},
        {"type": "integer", "minimum": 0},
        {"type": "number"},
        {"type": "boolean"},
        {"type": ["string", "null"]},
        {"type": ["integer", "string"]},
        {"enum": [1, "1", None, True]},
        {"enum": ["a", "A", "b"]},
        {"enum": ["Fast", "slow"]},
        {"const": 3},
        {"type": "array", "items": {"type": "integer"}},
        {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        {"type": "object", "additionalProperties": {"type": "integer"}},
        {"type": "object", "patternProperties": {"^x": {"type": "integer"}}},
        {"$ref": "#/$defs/point"},
    ]
)
_SCHEMAS = st.recursive(
    _LEAF_SCHEMAS,
    lambda c: (
        st.lists(c, min_size=1, max_size=3).map(lambda xs: {"anyOf": xs})
        | st.lists(c, min_size=1, max_size=3).map(lambda xs: {"oneOf": xs})
        | st.builds(lambda i: {"type": "array", "items": i}, c)
        | st.builds(
            lambda ps, extra: {
                "type": "object",
                "properties": ps,
                **({} if extra is None else {"additionalProperties": extra}),
            },
            st.dictionaries(st.sampled_from(["k", "x1", "a"]), c, max_size=3),
            st.one_of(st.none(), st.booleans()),
        )
    ),
    max_leaves=5,
)
_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 10)
    | st.sampled_from([2.0, 2.5])
    | st.sampled_from(["3", "2.0", "true", "false", "yes", "1", "A", "fast", "[1]", '{"x": 1}']),
    lambda c: (
        st.lists(c, max_size=3)
        | st.dictionaries(st.sampled_from(["k", "x1", "a", "b", "x", "y"]), c, max_size=3)
    ),
    max_leaves=10,
)
_POINT = {
    "type": "object",
    "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
    "required": ["x", "y"],
}


def _strings(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return set().union(*(_strings(v) for v in items)) if items else set()


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    props=st.dictionaries(st.sampled_from(["k", "a", "b"]), _SCHEMAS, max_size=3),
    args=st.dictionaries(st.sampled_from(["k", "a", "b", "x1"]), _VALUES, max_size=4),
    as_text=st.booleans(),
    strict=st.booleans(),
)
def test_odd_schemas_never_break_the_pipeline(
    props: dict[str, Any], args: dict[str, Any], as_text: bool, strict: bool
) -> None:
    schema = {"type": "object", "$defs": {"point": _POINT}, "properties": props}
    try:
        done = prepare_arguments(json.dumps(args) if as_text else args, schema, strict=strict)
    except ArgumentsError:
        return
    assert Draft202012Validator(schema).is_valid(done.arguments)
    assert set(done.arguments) <= set(args), "a field was invented"
    for text in _strings(done.arguments) - _strings(args):
        # new text only comes from an enum option (a case fix) or from JSON text that was read
        assert text in json.dumps(schema) or any(text in s for s in _strings(args)), text
    if strict:
        assert done.arguments == args and done.repairs == () and done.dropped == ()
