"""The bench's third judgement: each case asked again, constrained, on an engine that can.

The backends here are scripted: they answer a strict request one way and a constrained one
(``constrained and not strict``) another, so each judgement's rates can only come out right
if the bench asked both ways and kept each reply apart. The real in-process engine is run
through the CLI at the end.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from toolwire.bench import PromptSet, Report, parse_labbook, run_bench, summary, write_report
from toolwire.bench.cases import Case
from toolwire.cli import main
from toolwire.errors import BackendError, UsageError
from toolwire.events import CallEnd, Done, Event, TextDelta
from toolwire.messages import ToolCall
from toolwire.pipeline import Request
from toolwire.pipeline.transport import Transport

from .test_bench import write_set
from .test_bench_report import entry, svgs

WEATHER = {
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

CASES = [
    Case("oslo", "Oslo for 3 days?", "get_weather", {"days": {"equals": 3}}),
    Case("rome", "Rome?", "get_weather", {"city": {"contains": "rome"}}),
    Case("hi", "Hi!", None, {}),
]
PROMPTS = PromptSet("mini", 1, [WEATHER], CASES)


def call(city: str, days: int | None = None) -> list[Event]:
    arguments: dict[str, Any] = {"city": city} | ({"days": days} if days is not None else {})
    text = json.dumps(arguments)
    return [CallEnd(0, ToolCall("c1", "get_weather", arguments, text)), Done("tool_calls")]


def text(words: str) -> list[Event]:
    return [TextDelta(words), Done("stop")]


class TwoWays:
    """Answers each prompt from ``strict`` when the request is strict, from ``constrained``
    when it is constrained and not strict; records every request it was sent."""

    name = "two-ways"
    can_constrain = True

    def __init__(
        self, strict: dict[str, list[Event]], constrained: dict[str, list[Event] | Exception]
    ) -> None:
        self.strict, self.constrained = strict, constrained
        self.requests: list[Request] = []

    async def stream(self, request: Request) -> Any:
        self.requests.append(request)
        prompt = request.messages[0]["content"]
        answer = self.constrained[prompt] if request.constrained and not request.strict else None
        if isinstance(answer, Exception):
            raise answer
        for event in answer if answer is not None else self.strict[prompt]:
            yield event


class CannotConstrain(TwoWays):
    name = "http"
    can_constrain = False


def scripted(cls: type[TwoWays] = TwoWays) -> TwoWays:
    return cls(
        strict={
            # the engine left Oslo's call in the text: recovery reads it (days as sent, 5)
            "Oslo for 3 days?": text(
                '{"name": "get_weather", "arguments": {"city": "Oslo", "days": 5}}'
            ),
            "Rome?": text("I cannot check the weather."),
            "Hi!": call("Hi"),  # a false call
        },
        constrained={
            "Oslo for 3 days?": call("Oslo", 3),
            "Rome?": call("Rome"),
            "Hi!": text("Hello!"),
        },
    )


def test_a_backend_that_can_constrain_gets_a_second_pass_judged_apart() -> None:
    backend = scripted()
    seen: list[tuple[int, int]] = []
    report = asyncio.run(
        run_bench(
            backend,
            PROMPTS,
            constrained=True,
            options={"temperature": 0},
            progress=lambda done, total: seen.append((done, total)),
        )
    )
    # every case twice: strict first, then not strict and constrained
    assert [(r.strict, r.constrained) for r in backend.requests] == [(True, False)] * 3 + [
        (False, True)
    ] * 3
    assert all(r.temperature == 0 for r in backend.requests)
    assert seen == [(n, 6) for n in range(1, 7)]
    assert report.constrained and report.judgements() == ["sent", "recovered", "constrained"]

    sent, recovered, constrained = (report.rates(j) for j in report.judgements())
    assert sent["call_rate"] == 0.0 and sent["false_calls"] == 1.0
    assert recovered["call_rate"] == pytest.approx(1 / 2)  # Oslo's call, read from the text
    assert recovered["arguments_correct"] == 0.0  # days 5, not 3
    assert constrained == {
        "call_rate": 1.0,
        "parse_rate": 1.0,
        "right_tool": 1.0,
        "schema_valid": 1.0,
        "arguments_correct": 1.0,
        "false_calls": 0.0,
    }
    oslo = report.outcomes[0]
    assert [c.arguments for c in oslo.constrained_calls] == [{"city": "Oslo", "days": 3}]
    assert oslo.constrained_failures == [] and oslo.recovered_failures == ["args: days=5"]
    assert report.outcomes[2].constrained_text == "Hello!"

    data = report.to_json()
    assert data["constrained_rates"] == constrained
    assert data["constrained_failures"] == {}
    assert data["counts"]["constrained_errors"] == 0
    assert set(data["seconds"]) == {"sent", "constrained"}
    assert all(0 <= s <= data["duration"] + 0.01 for s in data["seconds"].values())


def test_a_backend_without_can_constrain_gets_no_second_pass() -> None:
    for backend in (scripted(CannotConstrain), scripted()):
        # asked for it, but the engine cannot (or, for the second, not asked at all)
        asked = isinstance(backend, CannotConstrain)
        report = asyncio.run(run_bench(backend, PROMPTS, constrained=asked))
        assert [(r.strict, r.constrained) for r in backend.requests] == [(True, False)] * 3
        assert not report.constrained and report.judgements() == ["sent", "recovered"]
        assert set(report.rates("constrained").values()) == {None}
        assert all(not o.constrained_calls for o in report.outcomes)
        data = report.to_json()
        assert data["constrained_rates"] is None and data["constrained_failures"] is None
        assert data["counts"]["constrained_errors"] is None
        assert data["seconds"]["constrained"] is None


def test_a_failed_constrained_request_is_counted_and_left_out_of_its_rates() -> None:
    backend = scripted()
    backend.constrained["Rome?"] = BackendError("the grammar could not be built")
    report = asyncio.run(run_bench(backend, PROMPTS, constrained=True))
    assert report.counts()["constrained_errors"] == 1 and report.counts()["request_errors"] == 0
    rates = report.rates("constrained")
    assert rates["call_rate"] == 1.0  # over Oslo alone: Rome's request failed
    assert report.failures("constrained") == {"rome": ["error: the grammar could not be built"]}
    assert report.failures()["rome"] == ["no call"]  # as sent is untouched


def test_markup_left_in_a_constrained_reply_is_named() -> None:
    backend = scripted()
    backend.constrained["Rome?"] = text('<tool_call>{"name": "get_weather"')
    report = asyncio.run(run_bench(backend, PROMPTS, constrained=True))
    assert report.outcomes[1].constrained_failures == [
        "call markup left in the text, constrained",
        "no call",
    ]


def test_the_summary_shows_three_columns() -> None:
    report = asyncio.run(run_bench(scripted(), PROMPTS, constrained=True))
    lines = summary(report).splitlines()
    assert "s as sent" in lines[0] and "s constrained)" in lines[0]
    assert lines[1].split() == ["as", "sent", "recovered", "constrained"]
    assert lines[2].split() == ["call", "rate", "0.0%", "50.0%", "100.0%"]
    assert lines[7].split() == ["false", "calls", "100.0%", "100.0%", "0.0%"]
    assert "  request errors, constrained: 0" in lines

    without = summary(asyncio.run(run_bench(scripted(), PROMPTS)))
    assert without.splitlines()[2].split() == ["call", "rate", "0.0%", "50.0%", "n/a"]
    assert "constrained: n/a, no constrained pass" in without


def test_the_labbook_round_trip_with_and_without_the_constrained_judgement() -> None:
    with_it = asyncio.run(run_bench(scripted(), PROMPTS, constrained=True)).to_json()
    without = asyncio.run(run_bench(scripted(CannotConstrain), PROMPTS, constrained=True))
    older = entry()  # a line written before there was a constrained pass: no such keys
    lines = [json.dumps(with_it), json.dumps(without.to_json()), json.dumps(older)]
    book = parse_labbook("\n".join(lines).encode())
    assert book.skipped == []
    new, http, old = book.runs
    assert new.constrained_rates == with_it["constrained_rates"]
    assert new.rates_of("constrained")["arguments_correct"] == 1.0
    assert new.rates_of("recovered") == with_it["recovered_rates"]
    assert new.judgements == ["sent", "recovered", "constrained"]
    assert new.seconds_of("constrained") == with_it["seconds"]["constrained"]
    assert new.seconds_of("sent") == with_it["seconds"]["sent"]
    assert new.counts["constrained_errors"] == 0
    assert http.constrained_rates is None and http.rates_of("constrained") == {}
    assert http.judgements == ["sent", "recovered"]
    assert http.seconds_of("constrained") is None and http.counts["constrained_errors"] is None
    assert old.judgements == ["sent"] and old.constrained_failures == {}
    assert old.seconds_of("sent") == older["duration"]  # one pass: all of it was as sent


def test_a_bad_constrained_line_is_skipped_under_its_own_name() -> None:
    bad = entry(constrained_rates={**entry()["rates"], "call_rate": 1.5})
    slow = entry(seconds={"sent": 1.0, "constrained": -2})
    book = parse_labbook((json.dumps(bad) + "\n" + json.dumps(slow) + "\n").encode())
    assert book.runs == []
    (_, first), (_, second) = book.skipped
    assert first.startswith("constrained_rates.call_rate must be a number from 0 to 1")
    assert second.startswith("seconds.constrained must be a number of at least 0")


def test_the_report_shows_the_three_judgements_side_by_side(tmp_path: Path) -> None:
    rates = entry()["rates"]
    lines = [
        entry(model="old"),  # as sent only
        entry(model="http", recovered_rates={**rates, "call_rate": 0.951}),
        entry(
            model="local",
            recovered_rates={**rates, "call_rate": 0.962},
            constrained_rates={**rates, "call_rate": 0.973, "false_calls": 0.012},
            constrained_failures={"weather-city": ["called get_time, not get_weather"]},
            counts={**entry()["counts"], "constrained_errors": 1},
            duration=99.0,
            seconds={"sent": 33.0, "constrained": 66.0},
        ),
    ]
    book = tmp_path / "lab.jsonl"
    book.write_text("".join(json.dumps(line) + "\n" for line in lines))
    files = write_report(book, tmp_path / "r.html")
    page = files.html.read_text(encoding="utf-8")
    rows = page.split("<h2>What went wrong</h2>")[0].split("<tr>")
    judged = [
        (row.split('rowspan="')[1][0] if "rowspan" in row else "", row.split("<td>")[1][:12])
        for row in rows
        if "<td>" in row
    ]
    # each run's judgements, one row each, under the run's label: 1, 2 and 3 rows
    assert [j for _, j in judged] == [
        "as sent</td>",
        "as sent</td>",
        "recovered</t",
        "as sent</td>",
        "recovered</t",
        "constrained<",
    ]
    assert [n for n, _ in judged if n] == ["2", "3"]
    for value in ("95.1%", "96.2%", "97.3%", "1.2%"):
        assert page.count(value) == 1
    # seconds per reply as sent and constrained (33 replies): older runs show the duration
    assert '<td class="n">1.00</td><td class="n">2.00</td>' in page
    assert '<td class="n">3.34</td><td class="n">—</td>' in page
    assert "#3 local, constrained: 1 case" in page and "called get_time" in page
    assert "request errors, constrained" in page
    assert len(svgs(page)) == 3

    # the charts grow a bar per judgement: the same runs with as sent only draw shorter
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps(entry(model=m)) + "\n" for m in ("old", "http", "local")))
    single = write_report(plain, tmp_path / "p.html")
    assert png_height(files.pngs[0]) > png_height(single.pngs[0])
    assert png_height(files.pngs[2]) > png_height(single.pngs[2])  # seconds: two bars
    assert png_height(files.pngs[1]) == png_height(single.pngs[1])  # counts: one bar each


def png_height(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[20:24], "big")


def test_a_transport_cannot_constrain_unless_it_says_so() -> None:
    assert Transport.can_constrain is False


def test_no_constrained_flag_over_http_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from toolwire.testing import FakeOpenAIServer, text_deltas

    prompts = str(write_set(tmp_path / "set.json"))
    with FakeOpenAIServer() as server:
        for _ in range(5):
            server.add_stream(text_deltas("Hello!"))
        args = ["bench", "--base-url", server.base_url, "--model", "m", "--prompts", prompts]
        assert main([*args, "--no-constrained"]) == 0
        assert len(server.requests) == 5
    out = capsys.readouterr().out
    assert "as sent  recovered  constrained" in out
    assert "  false calls            0.0%       0.0%          n/a" in out
    assert "constrained: n/a, no constrained pass" in out


def test_the_local_engine_gets_the_constrained_pass_unless_turned_off(
    qwen_gguf: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real in-process engine, through the CLI: it gets the second pass exactly when it
    says it can constrain, and ``--no-constrained`` turns the pass off."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"llama-cpp-python missing under CI: {exc}")
        pytest.skip("llama-cpp-python not installed: pip install 'toolwire[local]'")

    data = {
        "name": "one",
        "version": 1,
        "tools": [WEATHER],
        "cases": [
            {
                "id": "paris",
                "prompt": "What is the weather in Paris?",
                "expect": {"call": "get_weather", "args": {"city": {"contains": "paris"}}},
            }
        ],
    }
    prompts = tmp_path / "one.json"
    prompts.write_text(json.dumps(data))
    book = tmp_path / "lab.jsonl"
    args = ["bench", "--local", str(qwen_gguf), "--prompts", str(prompts), "--json"]
    args += ["--temperature", "0", "--max-tokens", "64", "--ctx", "2048", "--labbook", str(book)]
    reports = []
    for extra in ([], ["--no-constrained"]):
        assert main([*args, *extra]) == 0
        reports.append(json.loads(capsys.readouterr().out))
    on, off = reports
    assert on["counts"]["request_errors"] == 0
    # the in-process engine constrains: a second pass, its rates and its seconds
    assert on["constrained_rates"] is not None and on["counts"]["constrained_errors"] == 0
    assert on["seconds"]["constrained"] > 0
    assert off["constrained_rates"] is None and off["seconds"]["constrained"] is None
    runs = parse_labbook(book.read_bytes()).runs
    assert [r.constrained_rates is not None for r in runs] == [True, False]


def test_an_unknown_judgement_is_refused() -> None:
    with pytest.raises(UsageError, match="no judgement 'healed'"):
        Report("x", []).rates("healed")  # type: ignore[arg-type]


def test_the_constrained_pass_is_judged_after_the_pipeline_recovery() -> None:
    """Through the real reply pipeline over HTTP: an engine that leaves the call in its text.
    The strict pass gets no call (as sent), the bench's recovery reads it (recovered), and the
    constrained pass, not strict, gets it from the pipeline's own recovery, as a caller does.
    (The HTTP backend is only told it can constrain; what a grammar changes is the local
    engine's to show.)"""
    from toolwire.backends import OpenAIBackend
    from toolwire.testing import FakeOpenAIServer, text_deltas

    class SaysItCan(OpenAIBackend):
        can_constrain = True

    reply = '{"name": "get_weather", "arguments": {"city": "Rome"}}'
    prompts = PromptSet("mini", 1, [WEATHER], [CASES[1]])
    with FakeOpenAIServer() as server:
        server.add_stream(text_deltas(reply))
        server.add_stream(text_deltas(reply))
        backend = SaysItCan("m", base_url=server.base_url)
        report = asyncio.run(run_bench(backend, prompts, constrained=True))
        assert len(server.requests) == 2
    (outcome,) = report.outcomes
    assert outcome.calls == [] and outcome.constrained_text == ""
    assert [c.arguments for c in outcome.recovered_calls] == [{"city": "Rome"}]
    assert [c.arguments for c in outcome.constrained_calls] == [{"city": "Rome"}]
    assert [report.rates(j)["call_rate"] for j in report.judgements()] == [0.0, 1.0, 1.0]
