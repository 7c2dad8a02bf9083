"""``toolwire bench report``: a labbook's runs drawn side by side as one HTML page with PNGs."""

from __future__ import annotations

import base64
import json
import re
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire.bench import labbook as labbook_module
from toolwire.bench import parse_labbook, write_report
from toolwire.cli import main
from toolwire.errors import LabbookError
from toolwire.testing import FakeOpenAIServer, text_deltas, tool_call_deltas

from .test_bench import write_set


def entry(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "prompts": "toolwire-bench v1",
        "rates": {
            "call_rate": 0.913,
            "parse_rate": 1.0,
            "right_tool": 0.857,
            "schema_valid": 0.944,
            "arguments_correct": 0.778,
            "false_calls": 0.1,
        },
        "counts": {"runs": 33, "visible_calls": 0, "multiple_calls": 1, "request_errors": 0},
        "failures": {"weather-days": ["args: days=5"]},
        "duration": 110.2,
        "model": "qwen",
        "engine": "llama-cpp-python in-process (qwen.gguf)",
        "base_url": None,
        "temperature": 0,
        "tool_choice": "auto",
        "thinking": True,
        "repeat": 1,
        "date": "2026-11-29T10:00:00+00:00",
        "notes": "",
    }
    base.update(changes)
    return base


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def svgs(page: str) -> list[str]:
    return [
        base64.b64decode(m).decode("utf-8")
        for m in re.findall(r'src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', page)
    ]


def test_two_bench_runs_then_their_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end: two real bench runs append to a labbook, and the report draws both."""
    prompts = write_set(tmp_path / "set.json")
    book = tmp_path / "lab.jsonl"
    reports = []
    with FakeOpenAIServer() as server:
        for notes, replies in [
            ("all good", ["call", "call", "call", "text", "text"]),
            ("a weak engine", ["text", "markup", "call", "call", "text"]),
        ]:
            for reply in replies:
                if reply == "call":
                    server.add_stream(
                        tool_call_deltas([("a", "get_weather", '{"city": "Lisbon", "days": 3}')]),
                        finish_reason="tool_calls",
                    )
                elif reply == "markup":
                    server.add_stream(text_deltas('<tool_call>{"name": "get_weather"'))
                else:
                    server.add_stream(text_deltas("Hello!"))
            args = ["bench", "--base-url", server.base_url, "--model", "m", "--json"]
            args += ["--prompts", str(prompts), "--labbook", str(book), "--notes", notes]
            assert main(args) == 0
            reports.append(json.loads(capsys.readouterr().out))

    out = tmp_path / "out" / "report.html"
    assert main(["bench", "report", str(book), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "2 runs drawn" in printed and str(out) in printed

    page = out.read_text(encoding="utf-8")
    assert "#1 m" in page and "#2 m" in page
    assert "all good" in page and "a weak engine" in page
    for report in reports:  # every rate of every run is on the page, as a percentage
        for value in [*report["rates"].values(), *report["recovered_rates"].values()]:
            assert ("—" if value is None else f"{value:.1%}") in page
    assert page.count("<td>recovered</td>") == 2  # each run judged with recovery too
    assert reports[1]["counts"]["visible_calls"] == 1
    assert "the engine&#x27;s parser missed the model&#x27;s format" in page
    pngs = sorted(out.parent.glob("report-*.png"))
    assert [p.name for p in pngs] == [
        "report-diagnostics.png",
        "report-rates.png",
        "report-seconds.png",
    ]
    for png in pngs:
        assert f'href="{png.name}"' in page
        width, height = png_size(png)
        assert width > 300 and height > 100
    drawn = svgs(page)
    assert len(drawn) == 3 and all("<svg" in svg for svg in drawn)
    # self-contained: nothing is fetched from elsewhere, and nothing runs
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "<script" not in page
    assert "default-src 'none'" in page


def test_older_runs_without_recovered_rates_are_drawn_too(tmp_path: Path) -> None:
    book = tmp_path / "lab.jsonl"
    recovered = {**entry()["rates"], "call_rate": 0.987}
    lines = [entry(), entry(recovered_rates=recovered)]
    book.write_text("".join(json.dumps(line) + "\n" for line in lines))
    files = write_report(book, tmp_path / "r.html")
    assert [r.recovered_rates is None for r in files.shown] == [True, False]
    page = files.html.read_text(encoding="utf-8")
    assert page.count("98.7%") == 1  # the recovery table lists only the run that has them


def test_a_line_written_with_the_old_name_healed_rates_still_draws(tmp_path: Path) -> None:
    """Labbooks written before the rename carry ``healed_rates``: read as the recovered rates."""
    book = tmp_path / "lab.jsonl"
    old = {**entry()["rates"], "call_rate": 0.987}
    book.write_text(json.dumps(entry(healed_rates=old)) + "\n")
    files = write_report(book, tmp_path / "r.html")
    assert files.labbook.skipped == []
    (run,) = files.shown
    assert run.recovered_rates == old
    page = files.html.read_text(encoding="utf-8")
    assert "<td>recovered</td>" in page and page.count("98.7%") == 1
    assert (tmp_path / "r-rates.png").stat().st_size > 1000


def test_a_bad_old_healed_rates_line_is_skipped_under_its_own_name(tmp_path: Path) -> None:
    book = tmp_path / "lab.jsonl"
    bad = {**entry()["rates"], "call_rate": 2.0}
    book.write_text(json.dumps(entry(healed_rates=bad)) + "\n" + json.dumps(entry()) + "\n")
    files = write_report(book, tmp_path / "r.html")
    ((line, reason),) = files.labbook.skipped
    assert line == 1 and reason.startswith("healed_rates.call_rate must be a number from 0 to 1")


def test_the_labbook_is_escaped_and_labels_are_not_formulas(tmp_path: Path) -> None:
    book = tmp_path / "lab.jsonl"
    hostile = entry(
        model='m$\\frac{1}{$"><img src=x onerror=alert(1)>',
        notes="<script>alert(1)</script>",
        failures={"<b>case</b>": ["</ul><script>x</script>"]},
    )
    book.write_text(json.dumps(hostile) + "\n")
    files = write_report(book, tmp_path / "r.html")
    page = files.html.read_text(encoding="utf-8")
    assert "<script" not in page and "<img src=x" not in page and "<b>case" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "onerror=alert(1)&gt;" in page  # shown, as text
    # the label reached the chart as text: matplotlib drew it instead of failing on mathtext
    assert all(png_size(p)[0] > 300 for p in files.pngs)


def test_lines_that_are_not_runs_are_named_and_the_rest_are_read(tmp_path: Path) -> None:
    lines = [
        json.dumps(entry(model="first")),
        '{"prompts": "cut short when the run was kil',
        json.dumps(["not", "an", "object"]),
        json.dumps({"hello": "a line from something else"}),
        json.dumps(entry(rates={"call_rate": 1.5})),
        json.dumps(entry(rates={"call_rate": "high"})),
        json.dumps(entry(counts={"runs": -1})),
        json.dumps(entry(duration=10**400)),
        '{"rates": {"call_rate": NaN}}',
        "[" * 100_000 + "]" * 100_000,
        "",
        json.dumps(entry(model="second", rates={"call_rate": None})),
    ]
    data = "\n".join(lines).encode() + b"\n\xff\xfe{}\n"
    book = parse_labbook(data)
    assert [r.model for r in book.runs] == ["first", "second"]
    assert [r.number for r in book.runs] == [1, 2]
    assert book.runs[1].rates["call_rate"] is None and book.runs[1].line == 12
    reasons = dict(book.skipped)
    assert sorted(reasons) == [2, 3, 4, 5, 6, 7, 8, 9, 10, 13]
    assert reasons[2].startswith("not JSON")
    assert reasons[3] == "not a JSON object"
    assert "no 'rates'" in reasons[4]
    assert "rates.call_rate must be a number from 0 to 1" in reasons[5]
    assert "rates.call_rate must be a number or null" in reasons[6]
    assert "counts.runs" in reasons[7]
    assert "duration" in reasons[8]
    assert "rates.call_rate" in reasons[9]  # NaN is read, then refused
    assert reasons[10] == "nested too deeply"
    assert reasons[13] == "not UTF-8 text"


def test_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    long_line = json.dumps(entry(notes="x" * (labbook_module.MAX_LINE_BYTES + 1)))
    book = parse_labbook((long_line + "\n" + json.dumps(entry(notes="y" * 5000))).encode())
    assert book.skipped == [(1, f"longer than {labbook_module.MAX_LINE_BYTES} bytes")]
    assert len(book.runs[0].notes) == labbook_module.MAX_TEXT  # cut to what a page can show
    many = {f"case-{i}": ["x"] * 50 for i in range(1000)}
    (run,) = parse_labbook(json.dumps(entry(failures=many)).encode()).runs
    assert len(run.failures) == labbook_module.MAX_FAILED_CASES
    assert all(len(f) == 5 for f in run.failures.values())

    monkeypatch.setattr(labbook_module, "MAX_LABBOOK_BYTES", 100)
    with pytest.raises(LabbookError, match="the limit is 100 bytes"):
        parse_labbook(b"{}\n" * 50)


def test_errors_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "report", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read the labbook" in capsys.readouterr().err
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"truncated\n')
    assert main(["bench", "report", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "holds no bench runs" in err and "line 1: not JSON" in err
    assert not (tmp_path / "empty.html").exists()


def test_last_and_the_default_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    book = tmp_path / "lab.jsonl"
    book.write_text("".join(json.dumps(entry(model=f"model-{i}")) + "\n" for i in range(5)))
    assert main(["bench", "report", str(book), "--last", "2"]) == 0
    assert "2 runs drawn" in capsys.readouterr().out
    page = (tmp_path / "lab.html").read_text(encoding="utf-8")
    assert "#4 model-3" in page and "#5 model-4" in page and "model-2" not in page
    assert "3 earlier runs not shown" in page


def test_many_runs_make_taller_charts_and_the_same_input_the_same_page(tmp_path: Path) -> None:
    book = tmp_path / "lab.jsonl"
    book.write_text(json.dumps(entry()) + "\n")
    one = write_report(book, tmp_path / "one.html")
    again = write_report(book, tmp_path / "again.html")
    # the page names its PNGs, so compare the pages with their names taken out
    first = one.html.read_text(encoding="utf-8").replace("one-", "")
    assert first == again.html.read_text(encoding="utf-8").replace("again-", "")
    book.write_text("".join(json.dumps(entry(model=f"m{i}")) + "\n" for i in range(40)))
    forty = write_report(book, tmp_path / "forty.html")
    assert len(forty.shown) == 40
    assert png_size(forty.pngs[0])[1] > 3 * png_size(one.pngs[0])[1]
    assert forty.html.read_text(encoding="utf-8").count("<th>#") == 3 * 40  # three tables


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000) | st.text(max_size=500).map(str.encode))
def test_any_bytes_give_runs_or_named_lines(data: bytes) -> None:
    book = parse_labbook(data)  # raises nothing: LabbookError only past the size limit
    assert len(book.runs) + len(book.skipped) <= book.lines
    assert all(why for _, why in book.skipped)
