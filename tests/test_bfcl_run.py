"""``toolwire bench --suite bfcl``: BFCL's own cases through toolwire in front of an engine
speaking real HTTP on 127.0.0.1 (a fake whose replies are scripted), scored by BFCL's check
in each column — the engine alone, as sent, recovered — so that what toolwire changes is
measured, both ways, case by case."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.testing import FakeOpenAIServer, text_deltas, tool_call_deltas

ROOT = Path(__file__).resolve().parents[1]

try:
    from toolwire.bench.bfcl_data import INSTALL, load_category, sample

    load_category("simple_python")
except Exception as exc:  # (the data is an optional install)
    if os.environ.get("CI"):
        raise
    pytest.skip(f"BFCL's data is not installed ({exc}): {INSTALL}", allow_module_level=True)

from toolwire.bench.bfcl_run import engine_alone, run_bfcl, summary  # noqa: E402


def _case(category: str, case_id: str):  # type: ignore[no-untyped-def]
    (found,) = [c for c in load_category(category) if c.id == case_id]
    return found


TRIANGLE = _case("simple_python", "simple_python_0")  # base 10, height 5
CALL = {"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}
HERMES = f"<tool_call>\n{json.dumps(CALL)}\n</tool_call>"
IRRELEVANT = load_category("irrelevance")[0]


def _run(fake: FakeOpenAIServer, cases, alone: bool = True):  # type: ignore[no-untyped-def]
    backend = OpenAIBackend("m", base_url=fake.base_url, client=new_client())
    ask = engine_alone(fake.base_url, "m") if alone else None
    return asyncio.run(run_bfcl(backend, cases, alone=ask, constrained=False))


def test_a_call_left_as_text_is_lost_alone_and_recovered_through_toolwire() -> None:
    hermes = HERMES
    with FakeOpenAIServer() as fake:
        fake.add_stream(text_deltas(hermes))  # the engine alone
        fake.add_stream(text_deltas(hermes))  # through toolwire, strict: as sent
        report = _run(fake, [TRIANGLE])
    (outcome,) = report.outcomes
    assert not outcome.verdicts["alone"].valid and not outcome.verdicts["sent"].valid
    assert outcome.verdicts["alone"].error_type == "ast_decoder:decoder_failed"
    assert outcome.verdicts["recovered"].valid
    assert outcome.changed_by["recovered"] == "recovered-tagged"  # the pipeline's own notice
    # one generation read twice: strict, then as a caller gets it (and one for the engine)
    assert len(fake.requests) == 2
    # the engine alone was sent BFCL's tools as they are
    assert fake.requests[0]["tools"] == TRIANGLE.tools
    text = summary(report)
    assert "recovered against as sent: 1 gained, 0 lost" in text
    assert "+ simple_python_0: recovered-tagged" in text


def test_arguments_typed_by_their_schema_pass_where_the_engine_s_fail() -> None:
    native = tool_call_deltas([("c1", "calculate_triangle_area", '{"base": "10", "height": 5}')])
    with FakeOpenAIServer() as fake:
        fake.add_stream(native, finish_reason="tool_calls")
        report = _run(fake, [TRIANGLE], alone=False)
    (outcome,) = report.outcomes
    assert outcome.verdicts["sent"].error_type == "type_error:simple"
    assert outcome.verdicts["recovered"].valid
    assert "arguments-repaired" in outcome.changed_by["recovered"]
    assert json.loads(outcome.calls["recovered"][0][1]) == {"base": 10, "height": 5}


def test_a_call_where_none_fits_fails_irrelevance_and_a_lost_case_is_listed() -> None:
    name = IRRELEVANT.tools[0]["function"]["name"]
    native = tool_call_deltas([("c1", name, "{}")])
    with FakeOpenAIServer() as fake:
        fake.add_stream(text_deltas("I cannot help with that."))  # alone: no call, right
        fake.add_stream(native, finish_reason="tool_calls")  # through toolwire: a call
        report = _run(fake, [IRRELEVANT])
    (outcome,) = report.outcomes
    assert outcome.verdicts["alone"].valid and not outcome.verdicts["sent"].valid
    assert report.changed("recovered", "alone") == [(outcome, False)]
    assert "recovered against engine alone: 0 gained, 1 lost" in summary(report)


def test_a_call_to_a_tool_not_offered_is_still_a_call_as_sent() -> None:
    """Strict reading refuses a call to an undeclared tool; the engine still sent a call,
    which BFCL counts: an irrelevance case fails in every column, as in BFCL."""
    native = tool_call_deltas([("c1", "made_up_tool", "{}")])
    with FakeOpenAIServer() as fake:
        fake.add_stream(native, finish_reason="tool_calls")
        report = _run(fake, [IRRELEVANT], alone=False)
    (outcome,) = report.outcomes
    assert outcome.calls["sent"] == [("made_up_tool", "{}")]
    assert not outcome.verdicts["sent"].valid


def test_the_engine_alone_is_read_as_bfcl_reads_it() -> None:
    """A non-streamed engine's ``tool_calls``: JSON arguments are a call; arguments that
    are not JSON, or none, are nothing decoded."""
    from starlette.applications import Starlette
    from starlette.requests import Request as HttpRequest
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from toolwire.testing import ServedApp

    answers = iter(['{"base": 10, "height": 5}', '{"base": 10,', None])
    asked: list[dict] = []  # type: ignore[type-arg]

    async def chat(request: HttpRequest) -> JSONResponse:
        asked.append(await request.json())
        call = {"id": "c", "type": "function"}
        call["function"] = {"name": "calculate_triangle_area", "arguments": next(answers)}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return JSONResponse({"choices": [{"message": message, "finish_reason": "tool_calls"}]})

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    with ServedApp(app) as served:
        ask = engine_alone(served.url + "/v1", "m", options={"temperature": 0.001})

        async def thrice() -> list:  # type: ignore[type-arg]
            return [await ask(TRIANGLE) for _ in range(3)]

        got = asyncio.run(thrice())
    assert asked[0]["tools"] == TRIANGLE.tools and asked[0]["temperature"] == 0.001
    from toolwire.bench.bfcl_run import _score

    verdicts = [_score(TRIANGLE, calls) for calls in got]
    assert [v.valid for v in verdicts] == [True, False, False]
    assert verdicts[1].error_type == verdicts[2].error_type == "ast_decoder:decoder_failed"


def test_the_summary_has_bfcl_s_groups() -> None:
    with FakeOpenAIServer() as fake:
        for _ in range(2):
            fake.add_stream(text_deltas(HERMES))
        fake.add_stream(text_deltas("No."))
        cases = [TRIANGLE, _case("live_simple", load_category("live_simple")[0].id), IRRELEVANT]
        report = _run(fake, cases, alone=False)
    groups = report.groups("recovered")
    assert set(groups) == {"non-live AST", "live AST", "irrelevance"}
    assert groups["non-live AST"] == 1.0 and groups["irrelevance"] == 1.0
    assert "non-live AST" in summary(report)


def test_the_sample_is_stratified_and_the_same_for_a_seed() -> None:
    cases = sample(["simple_python", "irrelevance", "live_multiple"], 3, seed=5)
    assert [c.category for c in cases] == ["simple_python"] * 3 + ["irrelevance"] * 3 + [
        "live_multiple"
    ] * 3
    assert [c.id for c in cases] == [
        c.id for c in sample(["simple_python", "irrelevance", "live_multiple"], 3, seed=5)
    ]
    assert [c.id for c in cases] != [
        c.id for c in sample(["simple_python", "irrelevance", "live_multiple"], 3, seed=6)
    ]


def test_the_command_runs_the_suite_and_says_it_in_json(tmp_path: Path) -> None:
    hermes = HERMES
    with FakeOpenAIServer() as fake:
        fake.add_stream(text_deltas(hermes))
        fake.add_stream(text_deltas(hermes))
        command = [sys.executable, "-m", "toolwire", "bench", "--suite", "bfcl"]
        command += ["--base-url", fake.base_url, "--model", "m", "--engine-alone", "--json"]
        command += ["--categories", "simple_python", "--sample", "1", "--seed", "0"]
        command += ["--labbook", str(tmp_path / "lab.jsonl")]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["suite"] == "bfcl" and result["columns"] == ["alone", "sent", "recovered"]
    (outcome,) = result["outcomes"]
    assert outcome["category"] == "simple_python"
    assert json.loads((tmp_path / "lab.jsonl").read_text())["cases"] == 1
