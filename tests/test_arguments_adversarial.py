"""The argument pipeline under attack: regressions for bugs found by review, and properties.

Each regression states the behaviour the spec (issue 3) asks for. How long things take is
measured in benchmarks/argument_scaling.py, never here.
"""

from __future__ import annotations

import io
import json
import sys
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from toolwire import ArgumentsError, prepare_arguments
from toolwire.arguments import MAX_ARGUMENT_DEPTH, read_json
from toolwire.arguments.read import ReadError
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
COUNT = {"type": "object", "properties": {"count": {"type": "integer"}}}


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


# ----------------------------------------------------------------------- reader


def test_many_run_together_objects_join() -> None:
    # (Their reading time is measured in benchmarks/argument_scaling.py.)
    objects = [f'{{"k{i}": 1}}' for i in range(10_000)]
    result = read_json("".join(objects))  # one call in 10,000 pieces
    assert result.value == {f"k{i}": 1 for i in range(10_000)}
    assert result.repairs == ("joined-objects",)


@pytest.mark.parametrize(
    "text",
    ['{"a": "x\\ud83d', '{"a": "x\\ud83d\\ude', "{'a': 'x\\ud83d"],
    ids=["pair", "half", "sq"],
)
def test_a_string_cut_inside_a_surrogate_pair_invents_no_character(text: str) -> None:
    # The cut escape is dropped like any other cut escape; U+FFFD was never sent.
    assert read_json(text).value == {"a": "x"}


@pytest.mark.parametrize(
    ("text", "where"),
    [('{"a": 1}{"b": 2}', (1, 9)), ('{"a": 1}\n\n{"a": 2}', (3, 1))],
)
def test_strict_points_at_the_second_object(text: str, where: tuple[int, int]) -> None:
    with pytest.raises(ReadError) as info:
        read_json(text, strict=True)
    assert (info.value.line, info.value.column) == where


# ----------------------------------------------------------------------- only ArgumentsError


@pytest.mark.parametrize(
    "raw",
    [
        '{"count": "%s"}' % ("1" * 5000),  # int() past Python's 4,300-digit limit: ValueError
        [1, 2],  # a decoded JSON array: TypeError
    ],
    ids=["5000-digit-text", "list"],
)
def test_only_arguments_error_escapes(raw: Any) -> None:
    with pytest.raises(ArgumentsError):
        prepare_arguments(raw, COUNT)


RECURSIVE = {
    "list": {
        "type": "object",
        "$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "properties": {"n": {"$ref": "#/$defs/node"}},
    },
    "expr": {
        "type": "object",
        "$defs": {
            "expr": {
                "anyOf": [
                    {"type": "string"},
                    {"type": "array", "items": {"$ref": "#/$defs/expr"}},
                ]
            }
        },
        "properties": {"n": {"$ref": "#/$defs/expr"}},
    },
}


@pytest.mark.parametrize("schema", RECURSIVE.values(), ids=RECURSIVE.keys())
@pytest.mark.parametrize("raw", ['{"n": 5}', '{"n": '], ids=["invalid", "unreadable"])
def test_a_recursive_schema_still_gets_an_explanation(schema: Any, raw: str) -> None:
    # explain._type_sig follows items/anyOf without a depth bound: RecursionError.
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments(raw, schema)
    assert "It takes: {n?: " in info.value.explanation


def test_cli_args_survives_a_lone_surrogate_escape(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Valid JSON; the reader keeps the lone surrogate and the CLI's print raises.
    (tmp_path / "s.json").write_text(json.dumps(SEARCH))
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"query": "\\ud800"}'))
    assert main(["args", "--schema", str(tmp_path / "s.json")]) in (0, 1)
    capsys.readouterr()


# ----------------------------------------------------------------------- normalise


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1e23", 10**23), ("12345678901234567890.0", 12345678901234567890)],
)
def test_number_from_text_keeps_the_digits_sent(text: str, expected: int) -> None:
    # Through float() "1e23" became 99999999999999991611392: digits nobody sent.
    assert prepare_arguments({"count": text}, COUNT).arguments == {"count": expected}


def test_a_fraction_too_small_for_a_float_is_not_a_whole_number() -> None:
    # "1e-400" underflowed to 0.0 and became the integer 0.
    with pytest.raises(ArgumentsError):
        prepare_arguments({"count": "1e-400"}, COUNT)


VALID_AS_SENT: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "allOf-properties",
        {
            "type": "object",
            "allOf": [
                {"properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"b": {"type": "integer"}}},
            ],
        },
        {"a": "x", "b": 2},
    ),
    (
        "allOf-constraint",
        {
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
            "allOf": [{"properties": {"b": {"minimum": 0}}}],
        },
        {"a": "x", "b": 2},
    ),
    (
        "ref-with-sibling-properties",
        {
            "$defs": {"base": {"type": "object", "properties": {"a": {"type": "string"}}}},
            "$ref": "#/$defs/base",
            "properties": {"c": {"type": "integer"}},
        },
        {"a": "x", "c": 1},
    ),
    (
        "oneOf-branch-properties",
        {
            "type": "object",
            "properties": {"mode": {"type": "string"}},
            "oneOf": [
                {"properties": {"url": {"type": "string"}}, "required": ["url"]},
                {"properties": {"path": {"type": "string"}}, "required": ["path"]},
            ],
        },
        {"mode": "x", "url": "u"},
    ),
    (
        "if-then-properties",
        {
            "type": "object",
            "properties": {"kind": {"enum": ["a", "b"]}},
            "if": {"properties": {"kind": {"const": "a"}}},
            "then": {"properties": {"x": {"type": "integer"}}, "required": ["x"]},
        },
        {"kind": "a", "x": 1},
    ),
    (
        "items-without-type",
        {"type": "object", "properties": {"t": {"items": {"type": "string"}}}},
        {"t": "solo"},
    ),
    (
        "envelope-taken-by-additionalProperties",
        {"type": "object", "additionalProperties": {"type": "object"}},
        {"arguments": {"x": 1}},
    ),
    (
        "envelope-taken-by-patternProperties",
        {"type": "object", "patternProperties": {"^arg": {"type": "object"}}},
        {"arguments": {"x": 1}},
    ),
]


@pytest.mark.parametrize(
    ("schema", "args"), [c[1:] for c in VALID_AS_SENT], ids=[c[0] for c in VALID_AS_SENT]
)
def test_arguments_that_fit_as_sent_come_back_unchanged(
    schema: dict[str, Any], args: dict[str, Any]
) -> None:
    # Fields the tool takes through allOf, a $ref's siblings, oneOf branches or if/then were
    # dropped as unknown; valid values were wrapped or unwrapped.
    assert Draft202012Validator(schema).is_valid(args)
    done = prepare_arguments(json.dumps(args), schema)
    assert done.arguments == args
    assert done.dropped == ()


def test_a_recursive_union_schema_is_explained_or_bounded() -> None:
    ui: dict[str, Any] = {
        "type": "object",
        "$defs": {
            "c": {
                "oneOf": [{"$ref": "#/$defs/col"}, {"$ref": "#/$defs/row"}, {"$ref": "#/$defs/t"}]
            },
            "col": {
                "type": "object",
                "properties": {
                    "type": {"const": "column"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/c"}},
                },
                "required": ["type", "children"],
                "additionalProperties": False,
            },
            "row": {
                "type": "object",
                "properties": {
                    "type": {"const": "row"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/c"}},
                },
                "required": ["type", "children"],
                "additionalProperties": False,
            },
            "t": {
                "type": "object",
                "properties": {
                    "type": {"const": "text"},
                    "text": {"type": "string"},
                    "size": {"type": "integer"},
                },
                "required": ["type", "text"],
                "additionalProperties": False,
            },
        },
        "properties": {"root": {"$ref": "#/$defs/c"}},
        "required": ["root"],
    }

    def tree(depth: int) -> str:
        node: Any = {"type": "text", "text": "hi", "size": "big"}
        for i in range(depth):
            node = {"type": "column" if i % 2 else "row", "children": [node]}
        return json.dumps({"root": node})

    # A shallow tree is explained down to the field that is wrong; a deep one is refused
    # at once, since jsonschema's union checks grow exponentially with depth (timings in
    # benchmarks/argument_scaling.py).
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments(tree(2), ui)
    assert "size" in info.value.explanation and info.value.kind == "invalid"
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments(tree(8), ui)
    assert info.value.kind == "limit" and "nested" in info.value.explanation


def test_json_text_does_not_lift_the_depth_limit() -> None:
    schema = {
        "type": "object",
        "$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
        "properties": {"n": {"$ref": "#/$defs/n"}},
    }
    inner = "[" * 99 + "]" * 99
    raw = '{"n": ' + "[" * 50 + json.dumps(inner) + "]" * 50 + "}"
    assert MAX_ARGUMENT_DEPTH < 50 + 99
    # the text is not read as the list it spells (that would pass the depth limit), so the
    # innermost value stays text where a list is wanted: the call does not fit its schema
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments(raw, schema)
    assert info.value.kind == "invalid"
    assert "expected a list, got the text" in info.value.explanation


@pytest.mark.parametrize(
    ("raw", "inner"),
    [
        (json.dumps("{query: 'x'}"), {"bare-keys", "single-quotes"}),
        ('{"arguments": "{query: \'x\'}"}', {"bare-keys", "single-quotes"}),
        ('{"query": "q", "tags": "[\'a\', \'b\'"}', {"single-quotes", "unclosed-brackets"}),
    ],
    ids=["string-encoded", "envelope", "json-from-string"],
)
def test_repairs_inside_nested_json_text_are_named(raw: str, inner: set[str]) -> None:
    schema = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "tags": {"type": "array"}},
    }
    assert inner <= set(prepare_arguments(raw, schema).repairs)


# ----------------------------------------------------------------------- strict


PATTERNED = {
    "type": "object",
    "properties": {"a": {"type": "integer"}},
    "patternProperties": {"^x_": {"type": "integer"}},
}


def test_strict_accepts_fields_taken_by_pattern_properties() -> None:
    assert prepare_arguments('{"a": 1, "x_1": 2}', PATTERNED, strict=True).arguments == {
        "a": 1,
        "x_1": 2,
    }


def test_strict_refuses_a_nested_field_the_tool_does_not_take() -> None:
    # Without strict, p.z is dropped as a field the tool does not take; strict let it through.
    schema = {
        "type": "object",
        "properties": {"p": {"type": "object", "properties": {"x": {"type": "number"}}}},
    }
    assert prepare_arguments('{"p": {"x": 1, "z": 2}}', schema).dropped == ("p.z",)
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments('{"p": {"x": 1, "z": 2}}', schema, strict=True)
    assert "p.z" in info.value.explanation


def test_strict_names_each_unknown_field_once() -> None:
    schema = {**SEARCH, "additionalProperties": False}
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments('{"query": "a", "x": 1}', schema, strict=True)
    assert info.value.problems == ("- x: not a field this tool takes.",)


def test_strict_problem_list_is_capped_like_any_other() -> None:
    raw = json.dumps({"query": "a", **{f"k{i}": 1 for i in range(500)}})
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments(raw, SEARCH, strict=True)
    assert len(info.value.problems) <= 13


def test_strict_does_not_blame_a_pattern_field() -> None:
    schema = {**PATTERNED, "additionalProperties": False}
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments('{"a": 1, "x_1": 2, "bad": 3}', schema, strict=True)
    assert "x_1" not in info.value.explanation
    assert "- bad: not a field this tool takes." in info.value.problems


# ----------------------------------------------------------------------- explanations


@pytest.mark.parametrize(
    "field",
    [{"type": ["integer", "null"]}, {"anyOf": [{"type": "integer"}, {"type": "null"}]}],
    ids=["type-list", "anyOf"],
)
def test_a_fraction_for_an_optional_integer_is_not_called_a_non_number(field: Any) -> None:
    # Said: "expected a number or null, got the number 2.5".
    schema = {"type": "object", "properties": {"n": field}}
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments('{"n": 2.5}', schema)
    assert "whole number" in info.value.problems[0]


def test_an_optional_object_names_the_field_inside_that_is_wrong() -> None:
    # The shape pydantic gives Optional[Model]; said only "expected an object | null, got an
    # object".
    schema = {
        "type": "object",
        "$defs": {
            "Point": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x", "y"],
            }
        },
        "properties": {"where": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]}},
    }
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments('{"where": {"x": "left", "y": 2}}', schema)
    assert "where.x" in info.value.explanation


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"allOf": [False, {"type": "string"}]}}},
        {"type": "object", "properties": {"a": False, "b": {"type": "string"}}, "required": ["b"]},
    ],
    ids=["allOf", "forbidden-and-required"],
)
def test_a_false_subschema_is_the_arguments_fault_not_the_schemas(schema: Any) -> None:
    # Sorting errors compared a None validator with a str: TypeError, reported as kind "schema".
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments('{"a": 1}', schema)
    assert info.value.kind == "invalid"


def test_a_false_subschema_names_its_field() -> None:
    schema = {"type": "object", "properties": {"a": False, "b": {"type": "string"}}}
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments('{"a": 1}', schema)
    assert info.value.problems[0].startswith("- a:")


def test_the_signature_reads_all_of() -> None:
    schema = {
        "type": "object",
        "allOf": [
            {"properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"properties": {"b": {"type": "integer"}}},
        ],
    }
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments("{}", schema)
    assert "It takes: {}" not in info.value.explanation


@pytest.mark.parametrize(
    ("raw", "kind"),
    [('{"query": over}', "unreadable"), ("[" * 200, "limit"), ('{"a":' * 200, "limit")],
    ids=["word-over", "depth-list", "depth-object"],
)
def test_unreadable_kind_follows_the_reader(raw: str, kind: str) -> None:
    # pipeline._unreadable guessed the kind from the word "over" in the message.
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments(raw, SEARCH)
    assert info.value.kind == kind


def test_many_problems_are_capped() -> None:
    # (Explaining 16,000 problems is timed in benchmarks/argument_scaling.py.)
    schema = {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
    }
    with pytest.raises(ArgumentsError) as info:
        prepare_arguments(json.dumps({"tags": list(range(16_000))}), schema)
    assert len(info.value.problems) == 13
    assert info.value.problems[-1] == "- … and 15988 more."
