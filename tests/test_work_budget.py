"""No request costs more than its share: the work a request makes the gateway compute is
counted against one budget sized by the request, each check is linear in its input and
bounded in its parameters, and what may be slow runs off the event loop.

Each attack here froze every client of a shared gateway before: 16,000 namespace tools whose
names flatten alike (138 s to make them unique), a pattern of bounded repeats against a long
argument (RE2 is linear in the text, not in the pattern: 10–51 s), ``$ref`` fan-out inside
the expansion bound (28 s to read the tools; 424 s for 128 calls), ``uniqueItems`` over
3,000 objects (17.6 s), a ``$ref`` cycle in an output schema (a 500).

Each is counted, not timed (a busy machine stretches a time; see :mod:`tests.work_count`):
the names looked up, the patterns RE2 compiles and the matches it runs, the budget's steps,
the calls a check makes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from toolwire import events as ev
from toolwire.arguments import patterns, prepare_arguments
from toolwire.arguments.patterns import MAX_PROGRAM, compiled, weight
from toolwire.arguments.schema import validator_for
from toolwire.budget import (
    CEILING_STEPS,
    INLINE_STEPS,
    WorkBudget,
    WorkExceeded,
    charging,
)
from toolwire.errors import ArgumentsError
from toolwire.messages import ToolCall
from toolwire.pipeline.end import prepare_call
from toolwire.server import responses_tools
from toolwire.server.responses_tools import offered

from .work_attacks import (
    BIG_PATTERN,
    fanout_schema,
    fanout_value,
    namespaces,
)
from .work_count import calls_made

# -- the budget itself


def test_a_budget_grows_with_the_request_and_stops_at_its_ceiling() -> None:
    small, large = WorkBudget.for_size(1_000), WorkBudget.for_size(8 << 20)
    assert small.limit < WorkBudget.for_size(100_000).limit <= large.limit == CEILING_STEPS
    assert small.inline and not large.inline
    small.grant("x" * 10_000)  # a long call adds its share
    assert small.limit > WorkBudget.for_size(1_000).limit
    with pytest.raises(WorkExceeded) as caught:
        small.charge(small.limit + 1, "matching a pattern")
    assert "matching a pattern" in str(caught.value) and caught.value.limit == small.limit


def test_charging_reaches_only_the_budget_made_active() -> None:
    mine, other = WorkBudget(1_000_000), WorkBudget(1_000_000)
    schema = {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"type": "integer"}}},
    }
    with charging(mine):
        prepare_arguments({"a": list(range(100))}, schema)
    assert mine.spent > 100 and other.spent == 0
    prepare_arguments({"a": list(range(100))}, schema)  # no budget active: nothing counted
    assert other.spent == 0


# -- 1. names made unique in linear time


class Lookups:
    """The names looked up among those already given while tools are named: one for each
    name, one more for each candidate tried. Past ``limit`` the test fails at once (a
    count from 2 for every name would go on for minutes)."""

    def __init__(self) -> None:
        self.count = 0
        self.limit = 1 << 62


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[Lookups]:
    counted = Lookups()

    class Taken(set[str]):
        def __contains__(self, name: object) -> bool:
            counted.count += 1
            assert counted.count <= counted.limit, f"past {counted.limit:,} names looked up"
            return super().__contains__(name)

    class Names(responses_tools._Names):
        def __init__(self) -> None:
            super().__init__()
            self.taken = Taken()

    monkeypatch.setattr(responses_tools, "_Names", Names)
    yield counted


def test_sixteen_thousand_namespaces_that_flatten_alike_are_named_in_linear_time(
    lookups: Lookups,
) -> None:
    tools = namespaces(16_000)
    lookups.limit = 2 * len(tools)  # its own name, then the next number free: no more
    offer = offered(tools)
    names = [t["function"]["name"] for t in offer.tools]
    assert len(names) == len(set(names)) == 16_000
    # was 138 s: every name counted up from 2 past all the others (128 million lookups)
    assert lookups.count <= 2 * len(tools), lookups.count


def test_long_names_that_share_a_stem_are_made_unique_in_linear_time(lookups: Lookups) -> None:
    # 64-character flat names that differ only at their end: cut to fit a suffix, they
    # collide with each other's numbered names
    tools = [
        {
            "type": "namespace",
            "name": "n" * 50 + f"{i:05d}",
            "tools": [
                {"type": "function", "name": "abcdefgh"},
                {"type": "function", "name": "abcdefgh!"},
            ],
        }
        for i in range(3_000)
    ]
    lookups.limit = 2 * 6_000
    offer = offered(tools)
    names = [t["function"]["name"] for t in offer.tools]
    assert len(names) == len(set(names)) == 6_000 and max(map(len, names)) <= 64
    assert lookups.count <= 2 * 6_000, lookups.count  # at most one candidate a name


# -- 2. a pattern's cost is bounded in the pattern, and charged in the text


class Engine:
    """What RE2 was asked to do: the patterns it compiled, the texts it searched."""

    def __init__(self) -> None:
        self.compiled: list[str] = []
        self.searched: list[str] = []


@pytest.fixture
def re2_work(monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    engine = Engine()
    compile_ = patterns.re2.compile

    def recorded(pattern: str, *rest: Any) -> Any:
        engine.compiled.append(pattern)
        return compile_(pattern, *rest)

    monkeypatch.setattr(patterns.re2, "compile", recorded)
    yield engine


class _Searched:
    """A compiled pattern whose every search is recorded before it runs."""

    def __init__(self, inner: Any, engine: Engine) -> None:
        self._inner, self._engine = inner, engine

    def search(self, text: str) -> Any:
        self._engine.searched.append(text)
        return self._inner.search(text)


def test_a_pattern_of_nested_bounded_repeats_is_not_compiled(re2_work: Engine) -> None:
    assert len(BIG_PATTERN) > 1_100 and weight(BIG_PATTERN) > MAX_PROGRAM
    assert compiled(BIG_PATTERN) is None
    assert re2_work.compiled == []  # judged from its weight, before RE2 compiles anything
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": BIG_PATTERN}}}
    done = prepare_arguments({"s": "a" * 4_000 + "!"}, schema)
    assert done.unchecked == ("properties.s.pattern",)
    # was 23 s: its program of hundreds of thousands of instructions run on every character
    assert not any("a{0,30}b?" in pattern for pattern in re2_work.compiled), re2_work.compiled


@pytest.mark.parametrize(
    "pattern", [r"^[a-z0-9-]{1,63}(\.[a-z0-9-]{1,63})*$", r"^\d{4}-\d{2}-\d{2}$", "^(a+)+$"]
)
def test_honest_patterns_stay_checked(pattern: str) -> None:
    matcher = compiled(pattern)
    assert matcher is not None and matcher.size < MAX_PROGRAM


def test_a_long_match_is_charged_before_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    pattern = "(a{0,30}b?){0,30}"  # within the program bound: about 2,000 instructions
    matcher = compiled(pattern)
    assert matcher is not None
    engine = Engine()
    monkeypatch.setattr(matcher, "_compiled", _Searched(matcher._compiled, engine))
    text = "a" * 40_000 + "!"
    budget = WorkBudget(matcher.cost(text) - 1)
    with charging(budget), pytest.raises(WorkExceeded):
        matcher.search(text)
    assert engine.searched == []  # refused before RE2 ran
    with charging(WorkBudget(matcher.cost(text))):
        matcher.search(text)  # within its budget, the same search runs
    assert engine.searched == [text]


def test_a_call_whose_check_is_past_the_budget_passes_unchecked_and_says_so() -> None:
    pattern = "(a{0,30}b?){0,30}x"
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}
    text = json.dumps({"s": "a" * 40_000})
    call = ev.CallEnd(0, ToolCall("c1", "t", {}, arguments_text=text))
    done, notices = prepare_call(call, schema, budget=WorkBudget.for_size(2_000))
    assert [n.code for n in notices] == ["check-skipped"]
    assert "matching a pattern" in notices[0].message and done.invalid is None
    assert json.loads(done.arguments or "") == {"s": "a" * 40_000}
    strict, notices = prepare_call(call, schema, strict=True, budget=WorkBudget.for_size(2_000))
    assert strict.invalid is not None and [n.code for n in notices] == ["arguments-invalid"]
    # with the budget to spare, the same call is checked (and refused: no x at its end)
    checked, notices = prepare_call(call, schema, budget=WorkBudget(CEILING_STEPS))
    assert checked.invalid is not None and "arguments-invalid" in [n.code for n in notices]


# -- 3. $ref fan-out: each check costs what it costs, within the budget


def test_a_check_against_a_fanned_out_schema_is_bounded_by_the_budget() -> None:
    schema = fanout_schema(0)
    validator_for(schema)  # within the expansion bound: a usable schema
    value = fanout_value()
    call = ev.CallEnd(0, ToolCall("c1", "t", {}, arguments_text=json.dumps(value)))
    budget = WorkBudget.for_size(2_000)
    _, notices = prepare_call(call, schema, budget=budget)
    assert "check-skipped" in [n.code for n in notices]
    # it stopped where the budget ended: the step that passed it was the last one (a check
    # that went on would charge each of its thousands of paths)
    assert budget.limit < budget.spent <= budget.limit + 100, (budget.spent, budget.limit)


def test_reading_fanned_out_tools_is_charged_per_schema_once() -> None:
    schemas = [fanout_schema(i) for i in range(40)]
    budget = WorkBudget(CEILING_STEPS)
    with charging(budget):
        for schema in schemas:
            validator_for(schema)
    spent = budget.spent
    assert spent > 40
    with charging(budget):
        for schema in schemas:  # read before: kept, and free
            validator_for(schema)
    assert budget.spent == spent
    with charging(WorkBudget(10)), pytest.raises(WorkExceeded):
        validator_for(fanout_schema(10_001))


# -- 4. uniqueItems by hashing


def test_unique_items_over_three_thousand_objects_is_linear() -> None:
    schema = {
        "type": "object",
        "properties": {"xs": {"type": "array", "uniqueItems": True, "items": {"type": "object"}}},
    }

    def checked(n: int) -> tuple[ArgumentsError, int]:
        """The refusal of ``n`` distinct objects and a repeat of the last, and the calls
        the two checks (without the repeat, then with it) made."""
        rows = [{"k": i, "v": [i, {"w": str(i)}]} for i in range(n)]
        repeat = {"v": [n - 1, {"w": str(n - 1)}], "k": float(n - 1)}

        def check() -> ArgumentsError:
            prepare_arguments({"xs": rows}, schema)
            with pytest.raises(ArgumentsError) as caught:
                prepare_arguments({"xs": [*rows, repeat]}, schema)
            return caught.value

        return calls_made(check)

    checked(100)  # warm: the schema's checker is made once
    _, small = checked(1_500)
    refused, large = checked(3_000)
    assert "without repeated items" in refused.explanation
    # twice the objects, about twice the calls: pairwise comparing would make it four times
    # (it was 17.6 s for one check of 3,000)
    assert large < 2.5 * small, (small, large)


@pytest.mark.parametrize(
    "items,unique",
    [
        ([1, 1.0], False),
        ([True, 1], True),
        ([0, False], True),
        ([None, 0], True),
        ([{"a": 1, "b": [1, 2]}, {"b": [1, 2.0], "a": 1}], False),
        ([[1], [True]], True),
        (["1", 1], True),
        ([{"a": {}}, {"a": []}], True),
        ([[], {}], True),
        ([1e20, 100000000000000000000], False),
    ],
)
def test_unique_items_agrees_with_jsonschema(items: list[Any], unique: bool) -> None:
    schema = {"type": "array", "uniqueItems": True}
    assert Draft202012Validator(schema).is_valid(items) is unique
    assert validator_for(schema).is_valid(items) is unique


# -- 12. a $ref cycle that never descends is refused, not a 500


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"allOf": [{"$ref": "#"}]},
        {
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
            "$ref": "#/$defs/a",
        },
        {"type": "object", "properties": {"x": {"not": {"$ref": "#/properties/x"}}}},
    ],
)
def test_a_reference_loop_on_the_same_value_is_refused(schema: dict[str, Any]) -> None:
    with pytest.raises(ArgumentsError) as caught:
        validator_for(schema)
    assert "loop back to the same value" in str(caught.value)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"next": {"$ref": "#"}}},  # a linked list
        {"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}}, "$ref": "#/$defs/t"},
        {"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#"}}]},
    ],
)
def test_a_recursive_schema_that_descends_is_kept(schema: dict[str, Any]) -> None:
    assert validator_for(schema) is not None


# -- the meta-schema as one document refuses what the published one refuses


def _published_refuses(schema: Any) -> bool:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return True
    return False


def _ours_refuse(schema: Any) -> bool:
    try:
        validator_for(schema)
    except ArgumentsError:
        return True
    return False


_SCHEMAS: list[Any] = [
    {"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}},
    {"type": 5},
    {"type": ["string", "nul"]},
    {"properties": {"a": {"type": "strin"}}},
    {"properties": {"a": {"minimum": "x"}}},
    {"items": {"$defs": {"x": {"enum": 5}}}},
    {"required": "a"},
    {"required": ["a", 3]},
    {"prefixItems": []},
    {"prefixItems": [{"type": []}]},
    {"minItems": -1},
    {"maxLength": 1.5},
    {"anyOf": []},
    {"allOf": [True, {"not": {"const": None}}]},
    {"dependentRequired": {"a": ["b", "b"]}},
    {"dependentSchemas": {"a": {"type": "object"}}},
    {"$defs": {"a": {"type": "integer", "multipleOf": 0}}},
    {"contentMediaType": 3},
    {"deprecated": "yes"},
    {"$anchor": "1bad"},
    {"$comment": 3},
    {"unevaluatedProperties": {"type": "bogus"}},
    {"patternProperties": {"^a": {"type": "bogus"}}},
    {"propertyNames": {"maxLength": -2}},
    {"if": {"type": "string"}, "then": {"minLength": "2"}},
    {"definitions": {"a": {"type": "nope"}}},
    {"dependencies": {"a": ["b"], "c": {"type": "nope"}}},
    {"examples": "not a list"},
    {"enum": []},
    {"format": 4},
    {"contains": {"type": "integer"}, "minContains": -1},
]


def _tool_schemas() -> list[Any]:
    from pathlib import Path

    found: list[Any] = []
    folder = Path(__file__).parent / "fixtures" / "agents"
    for path in sorted(folder.glob("*.json")):
        for request in json.loads(path.read_text(encoding="utf-8"))["requests"]:
            body = request.get("body")
            for tool in (body or {}).get("tools", []) if isinstance(body, dict) else []:
                for key in ("input_schema", "parameters"):
                    if isinstance(tool.get(key), dict):
                        found.append(tool[key])
                if isinstance(tool.get("function"), dict):
                    found.append(tool["function"].get("parameters"))
    return [s for s in found if isinstance(s, dict)]


def test_the_one_document_meta_schema_agrees_with_the_published_one() -> None:
    corpus = _SCHEMAS + _tool_schemas()
    assert len(corpus) > 60
    for schema in corpus:
        assert _ours_refuse(schema) == _published_refuses(schema), schema


def test_reading_claude_codes_tools_is_quick_and_within_its_budget() -> None:
    schemas = [s for s in _tool_schemas() if "command" in json.dumps(s)][:12]
    budget = WorkBudget.for_size(100_000)
    with charging(budget):
        for schema in schemas:
            validator_for({**schema, "description": "fresh: not read before"})
    assert 0 < budget.spent < budget.limit // 4
    assert budget.limit > INLINE_STEPS
