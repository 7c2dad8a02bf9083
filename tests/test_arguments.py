"""The argument pipeline: normalise by the schema, check strictly, explain precisely."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from toolwire import ArgumentsError, prepare_arguments
from toolwire.cli import main

SEARCH = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        "order": {"enum": ["newest", "oldest"]},
    },
    "required": ["query"],
}

RICH = {
    "type": "object",
    "$defs": {
        "point": {
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x", "y"],
        }
    },
    "properties": {
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ids": {"type": "array", "items": {"type": "integer"}},
        "where": {"$ref": "#/$defs/point"},
        "meta": {"type": "object", "additionalProperties": True, "properties": {}},
        "labels": {"type": "object", "additionalProperties": {"type": "integer"}},
        "free": {"type": "object"},
        "mode": {"enum": ["Fast", "slow", "SLOW"]},
        "size": {"enum": ["small", "Large"]},
        "note": {"type": ["string", "null"]},
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "either": {"oneOf": [{"type": "integer"}, {"type": "boolean"}]},
        "both": {"allOf": [{"type": "integer"}, {"minimum": 0}]},
        "text": {"type": "string"},
    },
}


def prep(raw: Any, schema: dict[str, Any] = RICH, **kw: Any) -> Any:
    return prepare_arguments(raw, schema, name="tool", **kw)


NORMALISE = [
    ('{"count": "3"}', {"count": 3}, "number-from-string"),
    ('{"ratio": "2.5"}', {"ratio": 2.5}, "number-from-string"),
    ('{"count": "3.0"}', {"count": 3}, "number-from-string"),
    # leading zeros (a clock's hour, transformers' Qwen3 case) and white space around a
    # tagged value's number (vLLM's Step3 case) mean nothing but the number
    ('{"count": "007"}', {"count": 7}, "number-from-string"),
    ('{"ratio": "0.50"}', {"ratio": 0.5}, "number-from-string"),
    ('{"count": " 4 "}', {"count": 4}, "number-from-string"),
    ('{"flag": " true\n"}', {"flag": True}, "boolean-from-string"),
    ('{"count": 3.0}', {"count": 3}, "integer-from-float"),
    ('{"flag": "true"}', {"flag": True}, "boolean-from-string"),
    ('{"flag": "false"}', {"flag": False}, "boolean-from-string"),
    # Python's spelling, which a template quoting every value of a Python call teaches
    ('{"flag": "True"}', {"flag": True}, "boolean-from-string"),
    ('{"flag": "False"}', {"flag": False}, "boolean-from-string"),
    ('{"tags": "[\\"a\\", \\"b\\"]"}', {"tags": ["a", "b"]}, "json-from-string"),
    ('{"where": "{\\"x\\": 1, \\"y\\": 2}"}', {"where": {"x": 1, "y": 2}}, "json-from-string"),
    ('{"tags": "solo"}', {"tags": ["solo"]}, "list-from-single"),
    ('{"ids": "7"}', {"ids": [7]}, "list-from-single"),
    ('{"mode": "fast"}', {"mode": "Fast"}, "enum-case"),
    ('{"size": "LARGE"}', {"size": "Large"}, "enum-case"),
    ('{"count": null, "text": "x"}', {"text": "x"}, "null-dropped"),
    ('{"maybe": "4"}', {"maybe": 4}, "number-from-string"),
    ('{"either": "true"}', {"either": True}, "boolean-from-string"),
    ('{"both": "5"}', {"both": 5}, "number-from-string"),
    ('{"where": {"x": "1", "y": 2}}', {"where": {"x": 1, "y": 2}}, "number-from-string"),
    ('{"labels": {"a": "1"}}', {"labels": {"a": 1}}, "number-from-string"),
]


@pytest.mark.parametrize(("raw", "expected", "repair"), NORMALISE)
def test_each_normalisation(raw: str, expected: dict[str, Any], repair: str) -> None:
    done = prep(raw)
    assert done.arguments == expected
    assert repair in done.repairs


@pytest.mark.parametrize(("raw", "expected", "repair"), NORMALISE)
def test_strict_refuses_each_normalisation(raw: str, expected: Any, repair: str) -> None:
    if repair == "integer-from-float":
        # JSON Schema counts 3.0 as an integer: strict accepts it as sent, unconverted.
        assert prep(raw, strict=True).arguments == {"count": 3.0}
        return
    with pytest.raises(ArgumentsError):
        prep(raw, strict=True)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('{"flag": "yes"}', "flag"),
        ('{"flag": "1"}', "flag"),
        ('{"count": "3 items"}', "count"),
        ('{"count": "3 4"}', "count"),
        ('{"count": "0x1F"}', "count"),
        ('{"count": "+3"}', "count"),
        ('{"count": "about 3"}', "count"),
        ('{"count": 3.5}', "count"),
        ('{"mode": "SLOW"}', None),  # exact option: fine
        ('{"mode": "Slow"}', "mode"),  # matches two options case-insensitively: untouched
        ('{"text": 3}', "text"),  # no text is invented from a number
        ('{"tags": "[a, b"}', "tags"),  # broken list text is not wrapped as one item
    ],
)
def test_what_must_not_be_touched(raw: str, field: str | None) -> None:
    if field is None:
        assert prep(raw).arguments == json.loads(raw)
        return
    with pytest.raises(ArgumentsError) as info:
        prep(raw)
    assert f"- {field}:" in info.value.explanation
    assert json.dumps(json.loads(raw)[field]) in info.value.explanation or "list" in str(info.value)


def test_unknown_fields_dropped_and_open_objects_kept() -> None:
    done = prep(
        '{"text": "a", "junk": 1, "where": {"x": 1, "y": 2, "z": 3}, '
        '"meta": {"anything": [1]}, "free": {"k": "v"}}'
    )
    assert done.arguments == {
        "text": "a",
        "where": {"x": 1, "y": 2},
        "meta": {"anything": [1]},
        "free": {"k": "v"},
    }
    assert done.dropped == ("junk", "where.z")


def test_open_root_keeps_fields() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "additionalProperties": True,
    }
    assert prepare_arguments('{"a": "x", "b": 1}', schema).arguments == {"a": "x", "b": 1}


def test_envelope_and_string_encoded_are_unwrapped() -> None:
    assert prep('{"arguments": {"count": 2}}').arguments == {"count": 2}
    assert "arguments-envelope" in prep('{"name": "tool", "arguments": "{\\"count\\": 2}"}').repairs
    assert prep('"{\\"count\\": 2}"').repairs == ("string-encoded",)
    takes = {"type": "object", "properties": {"arguments": {"type": "object"}}}
    assert prepare_arguments('{"arguments": {"a": 1}}', takes).arguments == {"arguments": {"a": 1}}


def test_mapping_input_from_native_providers() -> None:
    assert prep({"count": "4"}).arguments == {"count": 4}


def test_the_explanation_reads_as_specified() -> None:
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments('{"limit": "ten"}', SEARCH, name="search_mail")
    assert info.value.explanation == (
        "The arguments for search_mail don't fit. Fix these and call it again:\n"
        "- query: required (text), but it was missing.\n"
        '- limit: expected a number, got the text "ten".\n'
        'It takes: {query: string, limit?: integer, order?: "newest"|"oldest"}'
    )
    assert info.value.kind == "invalid" and len(info.value.problems) == 2


@pytest.mark.parametrize(
    ("raw", "line"),
    [
        (
            '{"query": "a", "limit": 99}',
            "- limit: expected a number at most 50, got the number 99.",
        ),
        (
            '{"query": "a", "order": "random"}',
            '- order: expected one of "newest", "oldest", got the text "random".',
        ),
        ('{"query": ["a"]}', "- query: expected text, got a list of 1 item."),
        ('{"query": "a", "limit": 2.5}', "- limit: expected a whole number, got the number 2.5."),
    ],
)
def test_problem_lines(raw: str, line: str) -> None:
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments(raw, SEARCH, name="search_mail")
    assert line in info.value.problems


def test_nested_paths_and_refs_in_explanations() -> None:
    with pytest.raises(ArgumentsError) as info:
        prep('{"where": {"x": "left"}, "either": "maybe"}')
    text = info.value.explanation
    assert '- where.x: expected a number, got the text "left".' in text
    assert "- where.y: required (a number), but it was missing." in text
    assert "- either: expected a number | true or false" in text
    assert "where?: {x: number, y: number}" in text


def test_unreadable_arguments_say_where() -> None:
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments('{"query": "a",\n "limit": ten}', SEARCH, name="search_mail")
    assert info.value.kind == "unreadable"
    assert info.value.explanation.startswith(
        "The arguments for search_mail could not be read: unexpected word 'ten' where a value "
        "should be at line 2, column 11."
    )
    assert info.value.explanation.endswith(
        'It takes: {query: string, limit?: integer, order?: "newest"|"oldest"}'
    )


def test_strict_mode() -> None:
    assert prepare_arguments('{"query": "a"}', SEARCH, strict=True).repairs == ()
    with pytest.raises(ArgumentsError, match="not a field this tool takes"):
        prepare_arguments('{"query": "a", "x": 1}', SEARCH, strict=True)
    with pytest.raises(ArgumentsError, match="not strict JSON"):
        prepare_arguments("{'query': 'a'}", SEARCH, strict=True)


def test_a_broken_schema_is_the_tools_fault() -> None:
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments('{"a": 1}', {"type": "object", "properties": {"a": {"type": 5}}})
    assert info.value.kind == "schema"


# ----------------------------------------------------------------------- properties

_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 100)
    | st.floats(-10, 10)
    | st.text(max_size=6)
    | st.sampled_from(["3", "2.0", "true", "false", "FAST", "slow", "[1]", '{"x": 1}', "null"]),
    lambda c: (
        st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(["x", "y", "k"]), c, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@given(args=st.dictionaries(st.sampled_from([*RICH["properties"], "junk"]), _values, max_size=6))
def test_every_success_passes_the_strict_check(args: dict[str, Any]) -> None:
    for raw in (args, json.dumps(args)):
        try:
            done = prep(raw)
        except ArgumentsError:
            continue
        assert Draft202012Validator(RICH).is_valid(done.arguments)
        assert prep(done.arguments, strict=True).arguments == done.arguments


@settings(max_examples=300, deadline=None)
@given(raw=st.text(max_size=40))
def test_only_the_documented_error_is_raised(raw: str) -> None:
    with contextlib.suppress(ArgumentsError):
        prep(raw)


def test_cli_args(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    tool = {"type": "function", "function": {"name": "search_mail", "parameters": SEARCH}}
    (tmp_path / "tool.json").write_text(json.dumps(tool))
    monkeypatch.setattr(sys, "stdin", io.StringIO("{query: 'x', limit: '5', junk: 1,}"))
    assert main(["args", "--schema", str(tmp_path / "tool.json")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {
        "arguments": {"query": "x", "limit": 5},
        "repairs": ["bare-keys", "single-quotes", "trailing-comma", "number-from-string"],
        "dropped": ["junk"],
    }
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"limit": "ten"}'))
    assert main(["args", "--schema", str(tmp_path / "tool.json")]) == 1
    assert capsys.readouterr().out.startswith("The arguments for search_mail don't fit.")
    (tmp_path / "params.json").write_text(json.dumps(SEARCH))
    monkeypatch.setattr(sys, "stdin", io.StringIO("{query: 'x'}"))
    assert main(["args", "--schema", str(tmp_path / "params.json"), "--strict"]) == 1
    assert "could not be read" in capsys.readouterr().out


def test_the_text_null_of_a_text_or_null_parameter_is_null_when_values_are_text() -> None:
    # MiniMax M2's template writes text as it is and every other value as JSON: for a
    # parameter of text or null, its ``null`` is the null (and JSON arguments keep the text)
    schema = {
        "type": "object",
        "properties": {
            "a": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "b": {"type": ["string", "null"]},
            "c": {"type": "string"},
        },
    }
    got = prepare_arguments({"a": "null", "b": " null ", "c": "null"}, schema, text_values=True)
    assert got.arguments == {"a": None, "b": None, "c": "null"}
    assert prepare_arguments({"a": "null"}, schema).arguments == {"a": "null"}
