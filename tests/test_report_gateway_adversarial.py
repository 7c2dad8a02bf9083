"""Regressions from an adversarial review of the bench report, the gateway's argument
repair and request checks, and drift recovery's JSON lines.

Each test failed on the code as reviewed; each names the input, what went wrong, and what
should happen instead.
"""

from __future__ import annotations

import asyncio
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from toolwire.bench import write_report
from toolwire.bench.cases import Case, PromptSet
from toolwire.bench.run import run_bench
from toolwire.errors import LabbookError
from toolwire.events import CallEnd, Done, TextDelta
from toolwire.formats.drift import DriftGuard
from toolwire.formats.recovery import recover_calls
from toolwire.messages import ToolCall
from toolwire.server import create_app

from .test_bench import Replies
from .test_bench_report import entry as run_entry
from .test_bench_report import svgs

# --------------------------------------------------------------------------- helpers


def entry(**changes: Any) -> dict[str, Any]:
    """A run as the bench writes it, with the rates after recovery too (both are drawn)."""
    return run_entry(**{"recovered_rates": {**run_entry()["rates"], "call_rate": 1.0}, **changes})


def labbook(tmp_path: Path, *entries: dict[str, Any]) -> Path:
    # ensure_ascii: a lone surrogate is written as the \udXXX escape Python's json reads back
    path = tmp_path / "lab.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="ascii")
    return path


# --------------------------------------------------------------------------- bench report


def test_report_with_a_lone_surrogate_in_the_notes_is_written(tmp_path: Path) -> None:
    """notes "\\ud800" (valid in Python's json): writing the page raised UnicodeEncodeError.
    The page should be written as valid UTF-8 (the surrogate replaced or escaped)."""
    book = labbook(tmp_path, entry(notes="before \ud800 after"))
    out = tmp_path / "report.html"
    files = write_report(book, out)
    page = out.read_bytes().decode("utf-8")  # strict UTF-8
    assert files.shown and "before" in page and "after" in page


def test_report_with_a_lone_surrogate_in_the_model_name_draws(tmp_path: Path) -> None:
    """model "a\\ud800b": matplotlib's FT2Font.set_text raised TypeError while drawing the
    chart labels. The report should be drawn (the label made drawable)."""
    book = labbook(tmp_path, entry(model="a\udc80b"))
    out = tmp_path / "report.html"
    write_report(book, out)
    out.read_bytes().decode("utf-8")


@pytest.mark.parametrize(
    ("counts", "field"),
    [
        ({"runs": 1, "visible_calls": 10**400}, "visible_calls"),  # count / replies: overflow
        ({"runs": 10**400, "visible_calls": 1}, "runs"),  # int too large for a float
    ],
)
def test_report_with_huge_counts_does_not_overflow(
    tmp_path: Path, counts: dict[str, int], field: str
) -> None:
    """counts of 10**400 passed the labbook's check (a whole number of at least 0) and then
    drawing raised OverflowError. Counts are bounded: the line is skipped with the reason,
    and the other runs are drawn."""
    book = labbook(tmp_path, entry(counts=counts), entry(model="fine"))
    files = write_report(book, tmp_path / "report.html")
    assert [r.model for r in files.shown] == ["fine"]
    ((line, reason),) = files.labbook.skipped
    assert line == 1 and reason.startswith(f"counts.{field} must be a whole number from 0 to")


@pytest.mark.parametrize("model", ["a\x00b", "tab\x0bvt", "\x1b[31mred", "\ufffe"])
def test_control_characters_in_a_model_name_keep_the_charts_well_formed(
    tmp_path: Path, model: str
) -> None:
    """A control character (or U+FFFE) in one run's model name went into the SVG as is:
    every chart on the page was then malformed XML, which a browser shows as a broken
    image. Each SVG should stay well-formed XML."""
    book = labbook(tmp_path, entry(model=model), entry(model="other"))
    out = tmp_path / "report.html"
    write_report(book, out)
    charts = svgs(out.read_text(encoding="utf-8"))
    assert len(charts) == 3
    for svg in charts:
        ET.fromstring(svg)


@pytest.mark.parametrize("last", [-5, 0])
def test_report_with_a_negative_last_fails_cleanly(tmp_path: Path, last: int) -> None:
    """`toolwire bench report --last -5` (argparse type=int) with two runs: book.runs[5:]
    was empty and drawing raised ValueError (max() of an empty sequence). A ``last`` below
    1 is refused with LabbookError, before anything is drawn."""
    book = labbook(tmp_path, entry(), entry())
    out = tmp_path / "report.html"
    with pytest.raises(LabbookError, match=f"--last must be at least 1, not {last}"):
        write_report(book, out, last=last)
    assert not out.exists()


# --------------------------------------------------------------------------- bench rates


def test_an_args_failure_mentioning_schema_is_not_counted_as_schema_invalid() -> None:
    """A call to the right tool with arguments that fit its schema but are not the expected
    ones (query "SELECT * FROM information_schema.tables") failed "args: query=...schema...",
    and the rates' substring test ("schema" in the failures) counted it schema-invalid:
    schema_valid 0.0. schema_valid should be 1.0 (arguments_correct 0.0)."""
    tools = [
        {
            "type": "function",
            "function": {
                "name": "run_sql",
                "parameters": {
                    "type": "object",
                    "properties": {"query": {"type": "string"}},
                    "required": ["query"],
                },
            },
        }
    ]
    case = Case("sql", "List the users.", "run_sql", {"query": {"contains": "users"}})
    prompts = PromptSet("mini", 1, tools, [case])
    text = json.dumps({"query": "SELECT * FROM information_schema.tables"})
    backend = Replies(
        [CallEnd(0, ToolCall("c1", "run_sql", json.loads(text), text)), Done("tool_calls")]
    )
    report = asyncio.run(run_bench(backend, prompts))
    for rates in (report.rates(), report.rates("recovered")):
        assert rates["arguments_correct"] == 0.0
        assert rates["schema_valid"] == 1.0


# --------------------------------------------------------------------------- gateway


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
        },
    }
]
USER = [{"role": "user", "content": "hi"}]


def _client(events: list[Any]) -> TestClient:
    return TestClient(create_app(Replies(events)), raise_server_exceptions=False)


def _surrogate_call() -> list[Any]:
    # the model's text is plain ASCII JSON; it decodes to a lone surrogate
    text = '{"x": "a\\ud800b"}'
    return [CallEnd(0, ToolCall("c1", "f", {"x": "a\ud800b"}, text)), Done("tool_calls")]


def test_gateway_reply_with_a_lone_surrogate_escape_in_arguments() -> None:
    """Arguments '{"x": "a\\ud800b"}' (ASCII JSON text) were decoded, then re-encoded with
    ensure_ascii=False into a string UTF-8 cannot encode: the reply was a 500. It should be
    a 200 whose arguments are JSON (e.g. the escape kept)."""
    r = _client(_surrogate_call()).post(
        "/v1/chat/completions", json={"messages": USER, "tools": TOOLS}
    )
    assert r.status_code == 200
    call = r.json()["choices"][0]["message"]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"x": "a\ud800b"}


def test_gateway_stream_with_a_lone_surrogate_escape_in_arguments() -> None:
    """Streamed, the same call cut the stream short: no call chunk, no finish, no [DONE].
    The stream should carry the call and end with data: [DONE]."""
    r = _client(_surrogate_call()).post(
        "/v1/chat/completions", json={"messages": USER, "tools": TOOLS, "stream": True}
    )
    lines = [line for line in r.text.splitlines() if line]
    assert lines and lines[-1] == "data: [DONE]"
    assert any('"tool_calls"' in line for line in lines)


@pytest.mark.parametrize(
    "extra",
    [
        '"tool_choice": {"type": "function", "function": "f"}',
        '"tool_choice": {"type": "function", "function": null}',
        '"max_tokens": NaN',
        '"max_tokens": Infinity',
        '"max_completion_tokens": "many"',
        '"max_completion_tokens": [1]',
    ],
)
def test_gateway_malformed_request_fields_get_a_400(extra: str) -> None:
    """Each of these request fields raised inside _parse (AttributeError, ValueError,
    OverflowError, TypeError) and the client got a bare 500 instead of a 400 in OpenAI's
    error shape. (NaN and Infinity are accepted by the json module that reads the body.)"""
    body = (
        '{"messages": ' + json.dumps(USER) + ', "tools": ' + json.dumps(TOOLS) + ", " + extra + "}"
    )
    r = _client([TextDelta("ok"), Done("stop")]).post(
        "/v1/chat/completions", content=body, headers={"content-type": "application/json"}
    )
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "invalid_request_error"


# --------------------------------------------------------------------------- drift recovery

WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
PARIS = json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})
ROME = json.dumps({"name": "get_weather", "arguments": {"city": "Rome"}})


def test_lenient_recovery_reads_every_json_line() -> None:
    """Two calls as JSON lines, read leniently (tools in words, and the bench's visible
    check): the lenient reader took the pair as one object with 'extra-objects', kept the
    first and dropped Rome, as 'bare-json'. Both calls should be recovered as json-lines,
    as they are when read strictly."""
    strict = recover_calls(f"{PARIS}\n{ROME}", WEATHER)
    assert strict is not None and len(strict[0]) == 2
    lenient = recover_calls(f"{PARIS}\n{ROME}", WEATHER, lenient=True)
    assert lenient is not None
    assert [a["city"] for _, a, _ in lenient[0]] == ["Paris", "Rome"]


@pytest.mark.parametrize(
    "bad",
    [
        '{"name": "get_weather", "arguments": {"city": NaN}}',
        '{"name": "get_weather", "arguments": {"city": Infinity}}',
        '{"name": "get_weather", "arguments": {"city": 1e999}}',
        '{"name": "get_weather", "arguments": {"city": ' + "[" * 300 + "]" * 300 + "}}",
    ],
    ids=["NaN", "Infinity", "1e999", "nested-300"],
)
def test_json_lines_are_read_as_strictly_as_one_call(bad: str) -> None:
    """Alone, each of these is refused by the strict reader (not JSON, or nested past
    MAX_ARGUMENT_DEPTH). As one of several JSON lines it was read by Python's permissive
    decoder and recovered, its argument text '{"city": NaN}' / Infinity going to the client
    as if it were JSON. A JSON line should be read as strictly as a single call."""
    assert recover_calls(bad, WEATHER) is None
    # a line that is not a call makes the whole reply not a reply of calls
    assert recover_calls(f"{PARIS}\n{bad}", WEATHER) is None


def test_drift_guard_holding_a_long_reply_is_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    """A streamed reply opening with "{" is held until it ends; every held TextDelta
    re-joined all the text held so far, so the work was quadratic (seconds of CPU for
    120 KB in 30 000 deltas, the gateway's event loop blocked meanwhile). What decides
    whether the reply may be a call is its opening, so the text looked at per delta must
    stay bounded, however long the reply (counted, not timed)."""
    from toolwire.formats import drift

    seen: list[int] = []
    real = drift._may_be_a_call

    def counting(text: str) -> bool:
        seen.append(len(text))
        return real(text)

    monkeypatch.setattr(drift, "_may_be_a_call", counting)
    guard = DriftGuard(WEATHER, release_on_start=True)
    guard.push([TextDelta(" " * 5000), TextDelta("{")])
    for _ in range(30_000):
        guard.push([TextDelta('"a" ')])
    released = guard.end()
    assert "".join(e.text for e in released if isinstance(e, TextDelta)).lstrip().startswith("{")
    assert len(seen) == 30_002 and max(seen) <= 12
