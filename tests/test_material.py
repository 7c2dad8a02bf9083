"""The generalisation material: the templates the corpus lacks, and the round-trip benchmark.

``tests/fixtures/unseen_templates`` (development) and ``tests/fixtures/held_out`` hold
published templates copied byte for byte; their ``sources.json`` say where each came from.
These tests keep the files equal to what was copied and the split equal to its fixed rule.
Nothing here parses or measures a held-out file: only the benchmarks do (their integrity is
checked, never their results).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
UNSEEN = FIXTURES / "unseen_templates"
HELD_OUT = FIXTURES / "held_out" / "chat_templates"
CORPUS = FIXTURES / "chat_templates"
DIRECTORIES = [UNSEEN, HELD_OUT]

#: The kinds the issue names: development material whatever the hash says.
NAMED_KINDS = {
    "vllm-tool_chat_template_deepseekv31.jinja",
    "vllm-tool_chat_template_mistral_parallel.jinja",
    "vllm-tool_chat_template_minimax_m1.jinja",
    "vllm-tool_chat_template_llama3.2_pythonic.jinja",
    "vllm-tool_chat_template_llama4_pythonic.jinja",
    "sglang-tool_chat_template_llama4_pythonic.jinja",
    "vllm-tool_chat_template_gemma3_pythonic.jinja",
    "vllm-tool_chat_template_phi4_mini.jinja",
    "GLM-4.7-Flash.jinja",
}


def _sources(directory: Path) -> dict[str, dict[str, Any]]:
    doc: dict[str, dict[str, Any]] = json.loads(
        (directory / "sources.json").read_text(encoding="utf-8")
    )
    return doc


def _git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _held_out_by_hash(name: str) -> bool:
    return int(hashlib.sha256(name.encode()).hexdigest(), 16) % 3 == 0


@pytest.mark.parametrize("directory", DIRECTORIES, ids=lambda d: d.name)
def test_sources_json_lists_exactly_the_files(directory: Path) -> None:
    assert sorted(_sources(directory)) == sorted(p.name for p in directory.glob("*.jinja"))


@pytest.mark.parametrize("directory", DIRECTORIES, ids=lambda d: d.name)
def test_every_file_is_what_was_copied(directory: Path) -> None:
    for name, source in _sources(directory).items():
        data = (directory / name).read_bytes()
        assert len(data) == source["bytes"], name
        assert hashlib.sha256(data).hexdigest() == source["sha256"], name
        assert _git_blob(data) == source["git_blob"], name
        assert source["repo"] and source["path"] and len(source["commit"]) == 40, name


def test_the_split_follows_its_rule() -> None:
    for name in _sources(UNSEEN):
        assert name in NAMED_KINDS or not _held_out_by_hash(name), name
    for name in _sources(HELD_OUT):
        assert name not in NAMED_KINDS and _held_out_by_hash(name), name


def test_no_template_is_in_two_places() -> None:
    digests: dict[str, str] = {}
    for directory in [CORPUS, *DIRECTORIES]:
        for path in directory.glob("*.jinja"):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            assert digest not in digests, (path.name, digests.get(digest))
            digests[digest] = path.name


@functools.cache
def _benchmark() -> ModuleType:
    """``benchmarks/round_trip.py``, imported by its path (registered: it has dataclasses)."""
    path = Path(__file__).parent.parent / "benchmarks" / "round_trip.py"
    spec = importlib.util.spec_from_file_location("round_trip", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_round_trip_of_a_template_a_family_reads() -> None:
    bench = _benchmark()
    row = bench.measure(UNSEEN / "Qwen-QwQ-32B.jinja")
    assert (row.format, row.via, row.renders_calls, row.round_trips) == (
        "hermes",
        "probe",
        True,
        True,
    )
    assert not row.wrong_claim and not row.missed


def test_a_template_that_does_not_compile_renders_no_calls() -> None:
    # vLLM's deepseekv31 example has ``{% set tool_json = tool | tojson}``: a syntax error
    row = _benchmark().measure(UNSEEN / "vllm-tool_chat_template_deepseekv31.jinja")
    assert not row.renders_calls and not row.round_trips
    assert row.why.startswith("refused") and "syntax" in row.why


def test_totals_count_wrong_claims_and_misses() -> None:
    bench = _benchmark()
    rows = [
        bench.Row("a", "hermes", "probe", True, True),
        bench.Row("b", "hermes", "probe", True, False, "read calls []"),
        bench.Row("c", "none", "", True, False, "no family named"),
        bench.Row("d", "none", "", False, False, "no text"),
    ]
    assert bench.totals(rows) == {
        "templates": 4,
        "detected": 2,
        "render_calls": 3,
        "round_trip": 1,
        "wrong_claims": 1,
        "missed": 1,
    }
    assert any("round trip: 1 of 3" in line for line in bench.report("t", rows))


def test_the_benchmark_runs_on_named_corpus_templates(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _benchmark()
    assert bench.main(["--set", "corpus", "Qwen3-Coder.jinja", "google-gemma-2-2b-it.jinja"]) == 0
    out = capsys.readouterr().out
    assert "qwen-xml/probe" in out and "google-gemma-2-2b-it.jinja" in out
    assert "round trip: 1 of 1 (templates that render calls)" in out
