"""The grammar of a structured output and where the pipeline uses it, without a model: the
schema's GBNF, matched by llguidance over bytes, takes exactly the JSON the schema
describes; the plan gives it to an engine that can constrain, on a turn with no tools; and
the reply's check names why one does not fit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolwire import events as ev
from toolwire.backends.llamacpp import LlamaCppBackend
from toolwire.errors import BackendError
from toolwire.formats.gbnf import Constraint
from toolwire.pipeline import OutputFormat, Request, planned
from toolwire.pipeline.structured import (
    MAX_GRAMMAR_BOUND,
    CallOrOutput,
    OutputCheck,
    OutputConstraint,
    misfit,
    ollama_format,
    output_grammar,
    response_format,
)
from toolwire.testing import ScriptedLlama

llguidance = pytest.importorskip("llguidance")
pytest.importorskip("llama_cpp")

TEMPLATES = Path(__file__).parent / "fixtures" / "chat_templates"
CITY = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "population": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "kind": {"enum": ["capital", "town"]},
    },
    "required": ["name", "population"],
    "additionalProperties": False,
}
TOKENIZER = llguidance.LLTokenizer("byte")


def matches(grammar: str, text: str) -> bool:
    matcher = llguidance.LLMatcher(TOKENIZER, llguidance.grammar_from("gbnf", grammar))
    tokens = TOKENIZER.tokenize_str(text)
    return bool(matcher.try_consume_tokens(tokens) == len(tokens) and matcher.is_accepting())


@pytest.mark.parametrize(
    ("text", "fits"),
    [
        ('{"name": "Oslo", "population": 709000}', True),
        ('{\n  "name": "Oslo",\n  "population": 7,\n  "tags": ["a", "b"]\n}', True),
        ('{"name": "Oslo", "population": 7, "kind": "capital"}', True),
        ('{"name": "Os\\"lo \\u00e9", "population": -3}', True),
        ('{"name": "Oslo"}', False),  # a required field missing
        ('{"name": "Oslo", "population": 7.5}', False),  # not an integer
        ('{"name": "Oslo", "population": 7, "mayor": "x"}', False),  # not declared
        ('{"name": "Oslo", "population": 7, "kind": "city"}', False),  # not in the enum
        ('{"name": "Os\nlo", "population": 7}', False),  # a raw line break is not JSON
        ('{"name": "Oslo", "population": 7} and more', False),
        ("Oslo has 709000 people.", False),
    ],
)
def test_the_schema_grammar_takes_exactly_what_the_schema_does(text: str, fits: bool) -> None:
    output = OutputFormat("json_schema", CITY, "City", True)
    assert matches(output_grammar(output), text) is fits
    assert (misfit(output, text) is None) is fits  # the check agrees with the grammar


@pytest.mark.parametrize(
    ("text", "fits"),
    [("{}", True), ('{"a": [1, {"b": null}]}', True), ("[1, 2]", False), ('"x"', False)],
)
def test_json_object_is_any_object(text: str, fits: bool) -> None:
    output = OutputFormat("json_object")
    assert matches(output_grammar(output), text) is fits
    assert (misfit(output, text) is None) is fits


def test_a_bound_too_large_for_a_grammar_is_left_to_the_check() -> None:
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "maxLength": 1_000_000}},
        "required": ["s"],
        "additionalProperties": False,
    }
    output = OutputFormat("json_schema", schema, "Big")
    grammar = output_grammar(output)
    assert len(grammar) < 5_000  # not a million nested repetitions
    assert matches(grammar, '{"s": "' + "x" * 300 + '"}')
    small = {**schema, "properties": {"s": {"type": "string", "maxLength": 3}}}
    assert not matches(output_grammar(OutputFormat("json_schema", small, "Small")), '{"s": "abcd"}')


def test_a_constant_that_looks_like_a_bound_is_kept() -> None:
    schema = {"const": {"maxLength": 1000}}
    grammar = output_grammar(OutputFormat("json_schema", schema, "Const"))
    assert matches(grammar, '{"maxLength": 1000}') and not matches(grammar, "{}")


def test_bounds_at_the_limit_make_a_grammar_an_engine_takes() -> None:
    """Each bound a grammar keeps is spelt out as nested repetitions: at the limit, for an
    array and the strings in it, the grammar still compiles (a recursive compiler included)."""
    bound = MAX_GRAMMAR_BOUND
    item = {"type": "string", "minLength": 1, "maxLength": bound}
    schema = {
        "type": "object",
        "properties": {"a": {"type": "array", "items": item, "minItems": bound, "maxItems": bound}},
        "required": ["a"],
    }
    grammar = output_grammar(OutputFormat("json_schema", schema, "Many"))
    assert matches(grammar, json.dumps({"a": ["x"] * bound}))
    assert not matches(grammar, json.dumps({"a": ["x"] * (bound - 1)}))


def test_a_ref_schema_as_pydantic_writes_it_is_followed() -> None:
    schema = {
        "$defs": {
            "Place": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            }
        },
        "type": "object",
        "properties": {"home": {"$ref": "#/$defs/Place"}},
        "required": ["home"],
        "additionalProperties": False,
    }
    grammar = output_grammar(OutputFormat("json_schema", schema, "Person"))
    assert matches(grammar, '{"home": {"city": "Oslo"}}')
    assert not matches(grammar, '{"home": {"town": "Oslo"}}')


def test_the_wire_shapes_of_each_dialect() -> None:
    output = OutputFormat("json_schema", CITY, "City", True)
    assert response_format(output) == {
        "type": "json_schema",
        "json_schema": {"name": "City", "strict": True, "schema": CITY},
    }
    assert response_format(OutputFormat("json_object")) == {"type": "json_object"}
    assert ollama_format(output) == CITY and ollama_format(OutputFormat("json_object")) == "json"


# --------------------------------------------------------------------------- the plan


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _backend(can_constrain: bool) -> LlamaCppBackend:
    template = (TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()
    backend = LlamaCppBackend("qwen.gguf", llama=ScriptedLlama(template, "{}"))
    backend.can_constrain = can_constrain
    return backend


ASK = [{"role": "user", "content": "Oslo?"}]
CITY_OUT = OutputFormat("json_schema", CITY, "City", True)


def test_with_no_tools_the_output_grammar_holds_from_the_first_token() -> None:
    _, plan = planned(_backend(True), Request(ASK, output=CITY_OUT))
    assert plan.mode == "plain" and isinstance(plan.constraint, OutputConstraint)
    assert plan.constraint.required and plan.constraint.trigger("{") is None
    assert plan.constraint.grammar("required") == output_grammar(CITY_OUT)


@pytest.mark.parametrize(
    "changes",
    [
        {"constrained": False},  # the client turned grammars off
        {"tools": [WEATHER], "tool_choice": "required"},  # a call's grammar, not the output's
    ],
)
def test_the_output_grammar_is_not_used(changes: dict[str, Any]) -> None:
    _, plan = planned(_backend(True), Request(ASK, output=CITY_OUT, **changes))
    assert not isinstance(plan.constraint, (OutputConstraint, CallOrOutput))
    if "tools" in changes:
        assert isinstance(plan.constraint, Constraint)  # the tools' own, as without output


def test_with_tools_the_reply_is_a_call_or_the_answer_in_the_schema() -> None:
    _, plan = planned(_backend(True), Request(ASK, [WEATHER], output=CITY_OUT))
    assert isinstance(plan.constraint, CallOrOutput) and plan.constraint.required
    grammar = plan.constraint.grammar("required")
    call = {"name": "get_weather", "arguments": {"city": "Oslo"}}
    assert matches(grammar, "<tool_call>\n" + json.dumps(call) + "\n</tool_call>")
    assert matches(grammar, json.dumps({"name": "Oslo", "population": 7}))
    assert not matches(grammar, "Oslo is sunny.")  # neither a call nor the answer
    assert not matches(grammar, json.dumps({"name": "Oslo"}))  # the answer must fit
    # the rules of each are kept apart: no name is defined twice
    names = [line.split(" ::= ")[0] for line in grammar.splitlines()]
    assert len(names) == len(set(names))


def test_an_engine_that_cannot_constrain_gets_no_grammar() -> None:
    _, plan = planned(_backend(False), Request(ASK, output=CITY_OUT))
    assert plan.constraint is None


def test_toolwire_strict_keeps_the_output_grammar() -> None:
    """The client asked for the format: ``strict`` (no tolerances) does not turn it off."""
    _, plan = planned(_backend(True), Request(ASK, output=CITY_OUT, strict=True))
    assert isinstance(plan.constraint, OutputConstraint)


# --------------------------------------------------------------------------- the check


def _checked(check: OutputCheck, text: str, finish: str = "stop") -> list[ev.Event]:
    out: list[ev.Event] = []
    for event in (ev.TextDelta(text[:3]), ev.TextDelta(text[3:]), ev.Done(finish)):
        out += check.push(event)
    return out


def test_the_check_names_the_field_that_does_not_fit() -> None:
    loose = OutputFormat("json_schema", CITY, "City")
    text = '{"name": 5, "population": 1}'
    out = _checked(OutputCheck(Request(ASK, output=loose), upstream=True), text)
    notice = next(e for e in out if isinstance(e, ev.Notice))
    assert notice.code == "output-not-schema"
    assert "at 'name'" in notice.message and "not of type 'string'" in notice.message
    assert isinstance(out[-1], ev.Done)


@pytest.mark.parametrize(
    ("upstream", "kind"), [(True, "output-schema"), (False, "output-schema-local")]
)
def test_with_strict_a_misfit_is_an_error_of_who_wrote_it(upstream: bool, kind: str) -> None:
    check = OutputCheck(Request(ASK, output=CITY_OUT), upstream=upstream)
    with pytest.raises(BackendError) as caught:
        _checked(check, "no JSON here")
    assert caught.value.kind == kind


def test_a_turn_that_called_a_tool_is_not_checked() -> None:
    check = OutputCheck(Request(ASK, [WEATHER], output=CITY_OUT), upstream=True)
    out = _checked(check, "not JSON", "tool_calls")
    assert out[-1] == ev.Done("tool_calls") and not [e for e in out if isinstance(e, ev.Notice)]


def test_a_reply_that_fits_passes_untouched() -> None:
    text = json.dumps({"name": "Oslo", "population": 7})
    out = _checked(OutputCheck(Request(ASK, output=CITY_OUT), upstream=False), text)
    assert "".join(e.text for e in out if isinstance(e, ev.TextDelta)) == text
    assert not [e for e in out if isinstance(e, ev.Notice)]
