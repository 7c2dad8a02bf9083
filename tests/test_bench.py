"""The reliability benchmark against the fake server: the rates are what the replies earn."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from toolwire.bench import PromptSet, Report, load_prompts, run_bench
from toolwire.bench.cases import Case, check_arguments
from toolwire.cli import main
from toolwire.events import CallEnd, Done, Event, TextDelta
from toolwire.messages import ToolCall
from toolwire.testing import FakeOpenAIServer, text_deltas, tool_call_deltas


def test_the_shipped_prompt_set() -> None:
    prompts = load_prompts()
    assert len(prompts.cases) >= 30 and len(prompts.tools) >= 5
    none = [c for c in prompts.cases if c.call is None]
    assert len(none) >= 0.25 * len(prompts.cases)
    names = {t["function"]["name"] for t in prompts.tools}
    assert all(c.call in names for c in prompts.cases if c.call)
    kinds = {
        json.dumps(p.get("type"))
        for t in prompts.tools
        for p in t["function"]["parameters"]["properties"].values()
    }
    assert {'"string"', '"integer"', '"number"', '"boolean"', '"array"', '"object"'} <= kinds


def test_checks() -> None:
    case = Case(
        "x", "p", "f", {"n": {"equals": 3}, "s": {"contains": "LIS"}, "e": {"one_of": ["a", "b"]}}
    )
    assert check_arguments(case, {"n": 3.0, "s": "lisbon", "e": "b"}) == []
    assert check_arguments(case, {"n": 4, "s": "porto", "e": "c"}) == ["n=4", 's="porto"', 'e="c"']
    assert check_arguments(case, {}) == ["n missing", "s missing", "e missing"]


def write_set(path: Path) -> Path:
    data: dict[str, Any] = {
        "name": "mini",
        "version": 2,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather.",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "city": {"type": "string"},
                            "days": {"type": "integer", "maximum": 7},
                        },
                        "required": ["city"],
                    },
                },
            }
        ],
        "cases": [
            {
                "id": "good",
                "prompt": "Lisbon?",
                "expect": {"call": "get_weather", "args": {"city": {"contains": "lisbon"}}},
            },
            {
                "id": "wrong-args",
                "prompt": "Tokyo 3 days?",
                "expect": {"call": "get_weather", "args": {"days": {"equals": 3}}},
            },
            {"id": "missed", "prompt": "Berlin?", "expect": {"call": "get_weather", "args": {}}},
            {"id": "chat", "prompt": "Hi!", "expect": {"call": None}},
            {"id": "false-call", "prompt": "Thanks", "expect": {"call": None}},
        ],
    }
    path.write_text(json.dumps(data))
    return path


def test_a_run_against_the_fake_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAIServer() as server:
        server.add_stream(
            tool_call_deltas([("a", "get_weather", '{"city": "Lisbon"}')]),
            finish_reason="tool_calls",
        )
        server.add_stream(
            tool_call_deltas([("b", "get_weather", '{"city": "Tokyo", "days": 9}')]),
            finish_reason="tool_calls",
        )
        server.add_stream(text_deltas("<tool_call>\nget_weather(Berlin)\n</tool_call>"))
        server.add_stream(text_deltas("Hello!"))
        server.add_stream(
            tool_call_deltas([("c", "get_weather", '{"city": "x"}')]), finish_reason="tool_calls"
        )
        book = tmp_path / "lab.jsonl"
        code = main(
            [
                "bench",
                "--base-url",
                server.base_url,
                "--model",
                "m",
                "--prompts",
                str(write_set(tmp_path / "set.json")),
                "--json",
                "--labbook",
                str(book),
                "--notes",
                "fake",
                "--temperature",
                "0",
            ]
        )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    rates = report["rates"]
    assert rates["call_rate"] == pytest.approx(2 / 3)  # good, wrong-args called; missed not
    assert rates["right_tool"] == 1.0 and rates["parse_rate"] == 1.0
    assert rates["schema_valid"] == pytest.approx(1 / 2)  # days 9 is over the maximum
    assert rates["arguments_correct"] == pytest.approx(1 / 2)
    assert rates["false_calls"] == pytest.approx(1 / 2)
    assert report["counts"] == {
        "runs": 5,
        "visible_calls": 1,
        "multiple_calls": 0,
        "request_errors": 0,
        "recovered": 0,
        "constrained_errors": None,
    }
    assert report["recovered_rates"] == rates  # nothing here that recovery could read
    # an HTTP engine cannot constrain: no second pass, so no constrained judgement at all
    assert report["constrained_rates"] is None and report["constrained_failures"] is None
    assert report["seconds"]["constrained"] is None
    assert 0 < report["seconds"]["sent"] <= report["duration"] + 0.01
    assert len(server.requests) == 5  # one generation per case, not two
    assert "missed" in report["failures"] and "false-call" in report["failures"]
    entry = json.loads(book.read_text().splitlines()[0])
    assert entry["prompts"] == "mini v2" and entry["notes"] == "fake"
    assert entry["temperature"] == 0 and entry["tool_choice"] == "auto"


def test_request_errors_are_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "bench",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--prompts",
            str(write_set(tmp_path / "set.json")),
            "--json",
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["counts"]["request_errors"] == 5
    assert report["rates"]["call_rate"] is None


def test_each_reply_is_judged_as_sent_and_with_recovery(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAIServer() as server:
        # the engine's parser missed the call: it arrives as a fence of JSON in the text
        server.add_stream(
            text_deltas('```json\n{"name": "get_weather", "arguments": {"city": "Lisbon"}}\n```')
        )
        server.add_stream(
            tool_call_deltas([("b", "get_weather", '{"city": "Tokyo", "days": 3}')]),
            finish_reason="tool_calls",
        )
        server.add_stream(text_deltas('{"name": "get_weather", "arguments": {"town": "Berlin"}}'))
        server.add_stream(text_deltas("Hello!"))
        server.add_stream(text_deltas("You are welcome."))
        args = ["bench", "--base-url", server.base_url, "--model", "m", "--json"]
        assert main([*args, "--prompts", str(write_set(tmp_path / "set.json"))]) == 0
    report = json.loads(capsys.readouterr().out)
    # as sent: the backend's own drift recovery was kept out, so only Tokyo's call counts
    assert report["rates"]["call_rate"] == pytest.approx(1 / 3)
    assert report["rates"]["arguments_correct"] == 1.0
    assert report["counts"]["visible_calls"] == 2 and report["counts"]["recovered"] == 2
    recovered = report["recovered_rates"]
    assert recovered["call_rate"] == 1.0 and recovered["right_tool"] == 1.0
    # Berlin's call names a field the tool does not take and lacks the one it needs
    assert recovered["schema_valid"] == pytest.approx(2 / 3)
    assert recovered["arguments_correct"] == pytest.approx(2 / 3)
    assert recovered["false_calls"] == 0.0
    assert report["failures"]["good"][0].startswith("a call left as visible text")


class Replies:
    """A backend that answers every request with the same events."""

    name = "fixed"

    def __init__(self, events: list[Any]) -> None:
        self.events = events

    async def stream(self, request: Any) -> Any:
        for event in self.events:
            yield event


_DAYS = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}


def judge_one(events: list[Event]) -> Report:
    """The bench over one case that expects ``days`` = 3, answered with ``events``."""
    case = Case("days", "Oslo for 3 days?", "get_weather", {"days": {"equals": 3}})
    prompts = PromptSet("mini", 1, [_DAYS], [case])
    return asyncio.run(run_bench(Replies(events), prompts))


def test_arguments_are_judged_as_a_caller_receives_them() -> None:
    """A native call sends "3" for an integer: a caller gets 3 (typed by the schema)."""
    text = '{"city": "Oslo", "days": "3"}'
    call = ToolCall("c1", "get_weather", {"city": "Oslo", "days": "3"}, text)
    report = judge_one([CallEnd(0, call), Done("tool_calls")])
    assert report.outcomes[0].failures == []
    for rates in (report.rates(), report.rates("recovered")):
        assert rates["schema_valid"] == 1.0 and rates["arguments_correct"] == 1.0


def test_values_written_as_text_are_typed_by_the_schema() -> None:
    """An XML family writes every value as text, and says so with ``text_values``."""
    call = ToolCall("c1", "get_weather", {"city": "Oslo", "days": "3"}, text_values=True)
    report = judge_one([CallEnd(0, call), Done("tool_calls")])
    assert report.outcomes[0].failures == []
    assert report.rates()["arguments_correct"] == 1.0


def test_a_recovered_call_is_typed_by_the_schema_too() -> None:
    reply = '{"name": "get_weather", "arguments": {"city": "Oslo", "days": "3"}}'
    report = judge_one([TextDelta(reply), Done("stop")])
    (outcome,) = report.outcomes
    assert outcome.failures == [
        "a call left as visible text: the engine's parser missed the model's format",
        "no call",
    ]
    assert outcome.recovered_failures == []
    assert [(c.name, c.text) for c in outcome.recovered_calls] == [
        ("get_weather", '{"city": "Oslo", "days": "3"}')
    ]
    assert report.rates()["call_rate"] == 0.0
    recovered = report.rates("recovered")
    assert recovered["schema_valid"] == 1.0 and recovered["arguments_correct"] == 1.0


def test_arguments_that_cannot_be_typed_fail_the_schema_and_are_still_checked() -> None:
    text = '{"city": "Oslo", "days": "three"}'
    call = ToolCall("c1", "get_weather", {"city": "Oslo", "days": "three"}, text)
    report = judge_one([CallEnd(0, call), Done("tool_calls")])
    schema, args = report.outcomes[0].failures
    assert schema.startswith("schema: ") and "days" in schema
    assert args == 'args: days="three"'
    rates = report.rates()
    assert rates["right_tool"] == 1.0
    assert rates["schema_valid"] == 0.0 and rates["arguments_correct"] == 0.0
