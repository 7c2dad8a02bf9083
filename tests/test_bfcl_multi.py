"""BFCL's multi-turn categories: the simulated APIs run and judged as BFCL judges them (its own
checker asked beside ours), and whole conversations — call, result, next call, next turn —
through toolwire's tool loop and through the engine alone, against an engine speaking real
HTTP on 127.0.0.1 that answers each turn with BFCL's own ground truth."""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import os
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.errors import ToolwireError
from toolwire.testing import ServedApp

try:
    from toolwire.bench.bfcl_data import INSTALL, MULTI_TURN, load_category, sample

    load_category("multi_turn_base")
    import mpmath  # noqa: F401  (the simulated math API's one dependency)
except Exception as exc:  # (the data is an optional install)
    if os.environ.get("CI"):
        raise
    pytest.skip(f"BFCL's data is not installed ({exc}): {INSTALL}", allow_module_level=True)

from toolwire.bench.bfcl_run import engine_alone, run_bfcl, summary
from toolwire.bench.bfcl_state import MAX_STEPS, World, check_turns, parse_call


def _case(category: str, case_id: str):  # type: ignore[no-untyped-def]
    (found,) = [c for c in load_category(category) if c.id == case_id]
    return found


BASE = _case("multi_turn_base", "multi_turn_base_0")  # 4 turns over a file system
MISS_FUNC = _case("multi_turn_miss_func", "multi_turn_miss_func_0")  # sort held out


def _truth(case):  # type: ignore[no-untyped-def]
    return [[[parse_call(t) for t in turn]] if turn else [] for turn in case.multi.ground_truth]


# ---------------------------------------------------------------------------------------------
# The judgement, against BFCL's own.


def _as_text(call: Any) -> str:
    name, args, kwargs = call
    return (
        f"{name}({','.join([repr(a) for a in args] + [f'{k}={v!r}' for k, v in kwargs.items()])})"
    )


def test_every_ground_truth_passes_and_perturbations_are_judged_as_bfcl_judges_them() -> None:
    """Each case's own ground truth passes; a call dropped, two swapped, a value changed or a
    turn split into two steps is judged exactly as BFCL's ``multi_turn_checker`` judges it."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    rng = random.Random(7)
    names = itertools.count()
    judged = failed = 0
    for category in MULTI_TURN:
        for case in load_category(category):
            assert check_turns(case.multi, _truth(case)).valid, case.id
            variant = copy.deepcopy(_truth(case))
            t = rng.randrange(len(variant))
            if not variant[t]:
                continue
            calls = variant[t][0]
            kind = rng.choice(["drop", "swap", "value", "split"])
            if kind == "drop":
                calls.pop(rng.randrange(len(calls)))
            elif kind == "swap" and len(calls) > 1:
                i = rng.randrange(len(calls) - 1)
                calls[i], calls[i + 1] = calls[i + 1], calls[i]
            elif kind == "value" and calls[0][2]:
                name, args, kwargs = calls[0]
                key = rng.choice(sorted(kwargs))
                calls[0] = (
                    name,
                    args,
                    {**kwargs, key: "other" if isinstance(kwargs[key], str) else 7},
                )
            elif kind == "split" and len(calls) > 1:
                variant[t] = [calls[:1], calls[1:]]
            if not calls:
                variant[t] = []
            entry = {
                "id": case.id,
                "initial_config": case.multi.initial_config,
                "involved_classes": case.multi.involved_classes,
            }
            texts = [[[_as_text(c) for c in step] for step in steps] for steps in variant]
            theirs = multi_turn_checker(
                texts, case.multi.ground_truth, entry, category, f"m{next(names)}"
            )
            ours = check_turns(case.multi, variant)
            assert ours.valid == theirs["valid"], (case.id, kind, theirs.get("error_type"))
            if not ours.valid:
                assert ours.error_type == theirs["error_type"], case.id
            judged += 1
            failed += not ours.valid
    assert judged > 700 and failed > 200  # the perturbations mostly fail: the check bites


def test_the_world_runs_calls_as_bfcl_does_without_eval() -> None:
    world = World(BASE.multi)
    assert world.run_one("ls", (), {}) == json.dumps(
        {"current_directory_content": ["document", "archive"]}
    )
    assert world.run_one("rm", (), {"file_name": "x; import os"}).startswith("{")
    assert (
        world.run_one("kill", (), {})
        == "Error during execution: Function call kill is not allowed."
    )
    assert (
        world.run_one("nothing", (), {}) == "Error during execution: name 'nothing' is not defined"
    )
    assert world.run_one("cd", (), {"nope": 1}).startswith("Error during execution: ")
    # a method keeps what it is given: the world gives it a copy
    tweets = World(_case("multi_turn_base", "multi_turn_base_90").multi)
    mentions = ["@a"]
    tweets.run_one("authenticate_twitter", (), {"username": "u", "password": "p"})
    tweets.run_one("post_tweet", (), {"content": "hi", "mentions": mentions})
    tweets.run_one("mention", (), {"tweet_id": 10, "mentioned_usernames": ["@b"]})
    assert mentions == ["@a"]


def test_a_call_too_large_to_run_is_an_error_the_model_reads() -> None:
    """An integer past 64 bits is refused before the API runs (``power`` would compute for
    minutes); a result too long to show is the API's error, as BFCL gives it."""
    world = World(_case("multi_turn_base", "multi_turn_base_0").multi)
    math = World(
        next(
            c for c in load_category("multi_turn_base") if "MathAPI" in c.multi.involved_classes
        ).multi
    )
    assert math.run_one("power", (), {"base": 10, "exponent": 10**30}) == (
        "Error during execution: an integer argument is larger than 64 bits"
    )
    assert math.run_one("power", (), {"base": 10, "exponent": [2**70]}).startswith("Error")
    assert math.run_one("power", (), {"base": 10, "exponent": 5000}).startswith(
        "Error during execution: "
    )
    assert world.run_one("cd", (), {"folder": "document"}).startswith("{")


def test_held_out_functions_keep_bfcl_s_order() -> None:
    """Each named function leaves the list (its first of that name) and joins at its turn in
    the order BFCL names them."""
    import json as _json

    from toolwire.bench.bfcl_data import data_dir

    rows = (data_dir() / "BFCL_v4_multi_turn_miss_func.json").read_text().splitlines()
    for case, row in zip(load_category("multi_turn_miss_func"), rows, strict=True):
        named = _json.loads(row)["missed_function"]
        for turn, names in named.items():
            assert [f["name"] for f in case.multi.held_out[int(turn)]] == names, case.id
        assert not {n for ns in named.values() for n in ns} & {f["name"] for f in case.functions}


def test_ground_truth_is_read_as_literals_only() -> None:
    assert parse_call("sort('final_report.pdf')") == ("sort", ("final_report.pdf",), {})
    assert parse_call("cd(folder='..')") == ("cd", (), {"folder": ".."})
    for bad in ("__import__('os').system('x')", "f(x=g())", "f(**a)", "1+1", "f(" * 5000):
        with pytest.raises(ToolwireError):
            parse_call(bad)


def test_a_conversation_cut_short_or_silent_fails() -> None:
    truth = _truth(BASE)
    assert check_turns(BASE.multi, truth[:2]).error_type == "multi_turn:force_terminated"
    silent = [truth[0], [], *truth[2:]]
    assert check_turns(BASE.multi, silent).error_type == "multi_turn:empty_turn_model_response"


# ---------------------------------------------------------------------------------------------
# Whole conversations, against an engine that answers each turn with BFCL's ground truth.


class Oracle:
    """An OpenAI-compatible engine over real HTTP: a turn's first reply makes the ground
    truth's calls of that turn (natively, or as Hermes text with ``as_text``), a reply after
    tool results ends the turn in words. ``always`` calls again after every result."""

    def __init__(self, case: Any, *, as_text: bool = False, always: bool = False) -> None:
        self.case = case
        self.as_text = as_text
        self.always = always
        self.requests: list[dict[str, Any]] = []

    def _calls(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        messages = body["messages"]
        if messages[-1]["role"] != "user" and not self.always:
            return []
        turn = sum(m["role"] == "user" for m in messages) - 1
        order = {
            t["function"]["name"]: list(t["function"]["parameters"].get("properties", {}))
            for t in body.get("tools") or ()
        }
        out = []
        for text in self.case.multi.ground_truth[turn] if not self.always else ["ls(a=True)"]:
            name, args, kwargs = parse_call(text)
            named = dict(zip(order.get(name, []), args, strict=False))
            out.append({"name": name, "arguments": {**named, **kwargs}})
        return out

    async def chat(self, request: HttpRequest) -> Response:
        body = await request.json()
        self.requests.append(body)
        calls = self._calls(body)
        message: dict[str, Any] = {"role": "assistant", "content": "Done." if not calls else None}
        if calls and self.as_text:
            message["content"] = "".join(
                f"<tool_call>\n{json.dumps(c)}\n</tool_call>" for c in calls
            )
        elif calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{len(body['messages'])}_{i}",
                    "type": "function",
                    "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
                }
                for i, c in enumerate(calls)
            ]
        finish = "tool_calls" if "tool_calls" in message else "stop"
        if not body.get("stream"):
            return JSONResponse(
                {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}
            )

        async def events() -> AsyncIterator[str]:
            delta: dict[str, Any] = {"role": "assistant", "content": message["content"]}
            if "tool_calls" in message:
                delta["tool_calls"] = [
                    {"index": i, **c} for i, c in enumerate(message["tool_calls"])
                ]
            chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            yield f"data: {json.dumps(chunk)}\n\n"
            last = {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
            yield f"data: {json.dumps(last)}\n\n" + "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")


def _converse(oracle: Oracle, *, alone: bool = True):  # type: ignore[no-untyped-def]
    app = Starlette(routes=[Route("/v1/chat/completions", oracle.chat, methods=["POST"])])
    with ServedApp(app) as served:
        url = served.url + "/v1"
        backend = OpenAIBackend("m", base_url=url, client=new_client())
        ask = engine_alone(url, "m", options={"temperature": 0.001}) if alone else None
        report = asyncio.run(run_bfcl(backend, [oracle.case], alone=ask, constrained=False))
    return report


def test_a_whole_conversation_passes_in_every_column_and_shares_its_generations() -> None:
    oracle = Oracle(BASE)
    report = _converse(oracle)
    (outcome,) = report.outcomes
    assert {c: v.valid for c, v in outcome.verdicts.items()} == {
        "alone": True,
        "sent": True,
        "recovered": True,
    }
    streamed = [r for r in oracle.requests if r.get("stream")]
    asked = [r for r in oracle.requests if not r.get("stream")]
    # 4 turns of two replies each; as sent and recovered read the same replies
    assert len(asked) == 8 and len(streamed) == 8
    last = streamed[-1]["messages"]
    # the whole round trip: every turn's user message, each call answered by its result
    assert [m["content"] for m in last if m["role"] == "user"] == [
        q[0]["content"] for q in BASE.question
    ]
    results = [m["content"] for m in last if m["role"] == "tool"]
    assert len(results) == sum(len(t) for t in BASE.multi.ground_truth)
    assert '"current_working_directory": "document"' in results[0]
    assert outcome.calls["recovered"][0][0][0] == ["cd", {"folder": "document"}]
    assert "multi_turn_base (1)" in summary(report) and "multi turn" in summary(report)


def test_calls_written_as_text_are_lost_alone_and_recovered_through_the_loop() -> None:
    report = _converse(Oracle(BASE, as_text=True))
    (outcome,) = report.outcomes
    assert outcome.verdicts["alone"].error_type == "multi_turn:empty_turn_model_response"
    assert outcome.verdicts["sent"].error_type == "multi_turn:empty_turn_model_response"
    assert outcome.verdicts["recovered"].valid
    assert "recovered-tagged" in outcome.changed_by["recovered"]
    assert report.changed("recovered", "alone") == [(outcome, True)]


def test_functions_held_out_join_the_tools_at_their_turn() -> None:
    oracle = Oracle(MISS_FUNC)
    report = _converse(oracle, alone=False)
    (outcome,) = report.outcomes
    assert outcome.verdicts["recovered"].valid, outcome.verdicts["recovered"]
    offered = [{t["function"]["name"] for t in r["tools"]} for r in oracle.requests]
    assert "sort" not in offered[0] and "sort" in offered[-1]
    users = [m["content"] for m in oracle.requests[-1]["messages"] if m["role"] == "user"]
    assert users[3] == "I have updated some more functions you can choose from. What about now?"


def test_a_model_that_never_stops_calling_is_cut_off_as_bfcl_cuts_it() -> None:
    """Alone and strict, a model that calls again after every result is cut off after
    BFCL's step limit; through toolwire the call just answered, written again, is dropped and
    the model asked once more without tools, so each turn ends after one step."""
    oracle = Oracle(BASE, always=True)
    report = _converse(oracle, alone=True)
    (outcome,) = report.outcomes
    for column in ("alone", "sent"):
        assert outcome.verdicts[column].error_type == "multi_turn:force_terminated", column
    asked = [r for r in oracle.requests if not r.get("stream")]
    assert len(asked) == MAX_STEPS + 1  # BFCL's loop quits after its 21st reply with calls
    assert [len(steps) for steps in outcome.calls["sent"]] == [MAX_STEPS + 1]
    assert [len(steps) for steps in outcome.calls["recovered"]] == [1, 1, 1, 1]
    assert "repeated-call" in outcome.notices


def test_an_engine_that_fails_mid_conversation_fails_the_case() -> None:
    """As BFCL fails a case whose inference raised: the turns that went before do not pass it."""
    oracle = Oracle(BASE)
    chat = oracle.chat

    async def failing(request: HttpRequest) -> Response:
        messages = (await request.json())["messages"]
        if sum(m["role"] == "user" for m in messages) == 2 and messages[-1]["role"] == "tool":
            # the reply that would close turn 1, in every reading
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=500)
        return await chat(request)

    oracle.chat = failing  # type: ignore[method-assign]
    report = _converse(oracle, alone=True)
    (outcome,) = report.outcomes
    for column in ("alone", "sent", "recovered"):
        assert outcome.verdicts[column].error_type == "multi_turn:inference_error", column
        assert column in outcome.errors
    # the summary says why each failed, not only how many
    assert "! multi_turn_base_0 (as sent): " in summary(report)


def test_a_model_still_calling_in_the_last_turn_is_judged_on_its_calls() -> None:
    """BFCL forces the conversation to quit in its last turn and still judges it (the turns
    are all there): the ground truth's calls, then calls that change nothing, pass."""
    truth = _truth(BASE)
    busy = [*truth[:-1], [*truth[-1], *[[("pwd", (), {})]] * (MAX_STEPS + 1)]]
    assert check_turns(BASE.multi, busy).valid


def test_the_multi_turn_sample_is_stratified() -> None:
    cases = sample(["multi_turn"], 2, seed=0)
    assert [c.category for c in cases] == [c for c in MULTI_TURN for _ in range(2)]
    assert all(c.multi is not None and len(c.question) == len(c.multi.ground_truth) for c in cases)
