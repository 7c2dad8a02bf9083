"""``toolwire bench report`` over a labbook holding BFCL runs: each line read on its own and
every value checked before it is drawn; the BFCL runs on a page of their own (two charts,
inside it and as PNGs beside it), beside the page of the other runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from toolwire.bench.bfcl_report import parse_bfcl

ROOT = Path(__file__).resolve().parents[1]

RUN = {
    "suite": "bfcl",
    "model": "qwen2.5-coder-0.5b",
    "cases": 4,
    "categories": {
        "simple_python": {"alone": 0.0, "sent": 0.0, "recovered": 1.0, "constrained": 1.0},
        "irrelevance": {"alone": 1.0, "sent": 1.0, "recovered": 1.0, "constrained": None},
    },
    "overall": {"alone": 0.5, "sent": 0.5, "recovered": 1.0},
    "groups": {
        "alone": {"non-live AST": 0.0, "irrelevance": 1.0},
        "recovered": {"non-live AST": 1.0, "irrelevance": 1.0},
    },
    "date": "2026-12-07",
}


def test_bfcl_lines_are_read_and_checked_alone() -> None:
    bad = {**RUN, "categories": {"$x$": {"sent": "0.5", "recovered": 7}}, "cases": True}
    lines = [json.dumps(RUN), "{not json", json.dumps({"rates": {}}), json.dumps(bad)]
    runs = parse_bfcl("\n".join(lines).encode())
    assert [r.line for r in runs] == [1, 4]
    assert runs[0].categories["simple_python"]["recovered"] == 1.0
    assert runs[0].gain("simple_python") == 1.0 and runs[0].gain("irrelevance") == 0.0
    assert runs[0].columns() == ["alone", "sent", "recovered"]
    # a value of the wrong type is no value: not drawn
    assert runs[1].categories["$x$"] == dict.fromkeys(runs[1].categories["$x$"])
    assert runs[1].cases == 0
    assert runs[0].groups["non-live AST"] == {"alone": 0.0, "recovered": 1.0}


def test_bench_report_draws_the_bfcl_runs_beside_the_others(tmp_path: Path) -> None:
    book = tmp_path / "lab.jsonl"
    book.write_text(json.dumps(RUN) + "\n" + json.dumps({**RUN, "model": "other"}) + "\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, "-m", "toolwire", "bench", "report", str(book)]
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    page = tmp_path / "lab-bfcl.html"
    text = page.read_text()
    assert "#2 other" in text and "100.0%" in text and "engine alone" in text
    assert text.count("data:image/svg+xml;base64,") == 2
    for name in ("accuracy", "gain"):
        assert (tmp_path / f"lab-bfcl-{name}.png").read_bytes().startswith(b"\x89PNG")
    assert not (tmp_path / "lab.html").exists()  # no other runs: no other page
