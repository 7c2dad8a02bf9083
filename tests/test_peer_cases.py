"""The peers' reply-parser cases, read by toolwire's families.

The cases are data in ``tests/fixtures/peer/``: llama.cpp's ``tests/test-chat.cpp``
(extracted by ``scripts/peer_cases.py``) and vLLM's tool-parser tests (transcribed). The
runner is ``benchmarks/peer_cases.py`` (which also prints the per-family table). Every case
that fails today is listed, with why, in ``KNOWN_FAILURES`` and marked strict xfail: a case
that starts passing fails the run until it is taken off the list, so the list only shrinks.
A family that is not registered fails its cases (it is listed here, not an error).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from toolwire import family_names
from toolwire.formats.base import ParseResult

ROOT = Path(__file__).resolve().parent.parent


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


bench = _load(ROOT / "benchmarks" / "peer_cases.py", "peer_cases_bench")
LLAMA = bench.load("llama_cpp_cases.json")
VLLM = bench.load("vllm_cases.json")
LLAMA_OUT = bench.run_all(LLAMA)
VLLM_OUT = bench.run_all(VLLM)

#: Families other work adds; the table may name them before they are registered here.
FAMILIES_BEING_WRITTEN = (
    "lfm2",
    "pythonic",
    "gemma4",
    "gpt-oss",
    "glimmer",
    "kimi-k3",
    "seed-oss",
    "minicpm5",
    "minimax-m3",
    "functionary-v3.1",
    "functionary-v3.2",
    "gigachat",
    "command-r-plus",
    "minimax-m1",
    "solar-open",
)

NOT_REGISTERED = "the family is not registered on this branch"
OPEN_THINK = "a call written while the prompt's <think> is still open is read as reasoning"
COHERE_WRAPPERS = "<|START_THINKING|>/<|END_THINKING|> and the response/text wrappers stay text"
MODEL_ID = "the id the model wrote in the call is replaced by a fresh one"
NO_OPENER = "tolerance: a call missing its opening <tool_call> is not read"
APRIEL_THINKING = "the prompt's reasoning opener and [BEGIN FINAL RESPONSE] are not read"
TEXT_AROUND_JSON = "text around a bare JSON call: toolwire reads a whole-reply call only"
UNCLOSED = "tolerance: a call whose closing tag never came is not read"
BROKEN_CALL = "a call with broken JSON stays text; the peer returns it as a call"
EOS_TOKEN = "the end-of-sentence token after the calls stays in the family's content"
MISTRAL_NO_ARGS = "[TOOL_CALLS]name{...} without [ARGS] (the peer's tokenizer drops the token)"
GRANITE_STRING_PREFIX = "Granite 3.1's plain-text <tool_call> [...] prefix is not read"
K3_THINK_OPENER = (
    "the prompt opens <|open|>think<|sep|>, which reasoning.opens_reasoning does not know: "
    "the reply is read as starting in the response section"
)
GIGACHAT_NO_TOKENS = (
    "function call{...} with the special tokens stripped (no <|role_sep|>) is prose here; "
    "vLLM's parser now also needs function call<|role_sep|>\\n or <|function_call|>"
)
TRUNCATED_CALL = "a call the reply cuts short stays reply text with a notice; the peer drops it"
NO_SCHEMA = (
    "values are typed by the tool's schema and the case declares none (the peer decodes "
    "JSON-looking text without one)"
)
STRING_ARGUMENTS = "a call whose arguments are a JSON string, not an object, stays text"

KNOWN_FAILURES: dict[str, str] = {
    "Qwen3.5-4B:2282": OPEN_THINK,
    "Qwen3.5-4B:2299": OPEN_THINK,
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use:2787": COHERE_WRAPPERS,
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use:2789": COHERE_WRAPPERS,
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use:2796": COHERE_WRAPPERS,
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use:2802": MODEL_ID,
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use:2822": MODEL_ID,
    "Cohere2MoE:2842": COHERE_WRAPPERS,
    "Cohere2MoE:2848": COHERE_WRAPPERS,
    "Cohere2MoE:2853": COHERE_WRAPPERS,
    "Cohere2MoE:2870": MODEL_ID,
    "Cohere2MoE:2881": MODEL_ID,
    "Cohere2MoE:2892": MODEL_ID,
    "Cohere2MoE:2903": MODEL_ID,
    "Cohere2MoE:2920": COHERE_WRAPPERS,
    "google-gemma-4-31B-it:2959": NOT_REGISTERED,
    "google-gemma-4-31B-it:2962": NOT_REGISTERED,
    "google-gemma-4-31B-it:2969": NOT_REGISTERED,
    "google-gemma-4-31B-it:2976": NOT_REGISTERED,
    "google-gemma-4-31B-it:2983": NOT_REGISTERED,
    "google-gemma-4-31B-it:2990": NOT_REGISTERED,
    "google-gemma-4-31B-it:2997": NOT_REGISTERED,
    "google-gemma-4-31B-it:3004": NOT_REGISTERED,
    "google-gemma-4-31B-it:3011": NOT_REGISTERED,
    "google-gemma-4-31B-it:3023": NOT_REGISTERED,
    "google-gemma-4-31B-it:3030": NOT_REGISTERED,
    "google-gemma-4-31B-it:3037": NOT_REGISTERED,
    "google-gemma-4-31B-it:3044": NOT_REGISTERED,
    "google-gemma-4-31B-it:3051": NOT_REGISTERED,
    "google-gemma-4-31B-it:3058": NOT_REGISTERED,
    "google-gemma-4-31B-it:3065": NOT_REGISTERED,
    "google-gemma-4-31B-it:3072": NOT_REGISTERED,
    "google-gemma-4-31B-it:3079": NOT_REGISTERED,
    "google-gemma-4-31B-it:3086": NOT_REGISTERED,
    "google-gemma-4-31B-it:3093": NOT_REGISTERED,
    "google-gemma-4-31B-it:3100": NOT_REGISTERED,
    "google-gemma-4-31B-it:3106": NOT_REGISTERED,
    "google-gemma-4-31B-it:3112": NOT_REGISTERED,
    "google-gemma-4-31B-it:3118": NOT_REGISTERED,
    "ByteDance-Seed-OSS:3392": NOT_REGISTERED,
    "ByteDance-Seed-OSS:3394": NOT_REGISTERED,
    "ByteDance-Seed-OSS:3399": NOT_REGISTERED,
    "ByteDance-Seed-OSS:3409": NOT_REGISTERED,
    "ByteDance-Seed-OSS:3431": NOT_REGISTERED,
    "ByteDance-Seed-OSS:3446": NOT_REGISTERED,
    "Qwen3-Coder:3515": NO_OPENER,
    "Qwen3-Coder:3526": NO_OPENER,
    "Qwen3-Coder:3542": NO_OPENER,
    "deepseek-ai-DeepSeek-V4:4258": OPEN_THINK,
    "Kimi-K3:4478": K3_THINK_OPENER,
    "Kimi-K3:4492": K3_THINK_OPENER,
    "Kimi-K3:4510": K3_THINK_OPENER,
    "LFM2-8B-A1B:1984": NOT_REGISTERED,
    "LFM2-8B-A1B:1987": NOT_REGISTERED,
    "LFM2-8B-A1B:1993": NOT_REGISTERED,
    "LFM2-8B-A1B:1999": NOT_REGISTERED,
    "LFM2-8B-A1B:2004": NOT_REGISTERED,
    "LFM2-8B-A1B:2010": NOT_REGISTERED,
    "LFM2-8B-A1B:2016": NOT_REGISTERED,
    "LFM2-8B-A1B:2022": NOT_REGISTERED,
    "LFM2-8B-A1B:2031": NOT_REGISTERED,
    "LFM2-8B-A1B:2038": NOT_REGISTERED,
    "LFM2-8B-A1B:2047": NOT_REGISTERED,
    "LFM2-8B-A1B:2055": NOT_REGISTERED,
    "LFM2-8B-A1B:2063": NOT_REGISTERED,
    "LFM2-8B-A1B:2071": NOT_REGISTERED,
    "LFM2-8B-A1B:2088": NOT_REGISTERED,
    "LFM2.5-Instruct:1984": NOT_REGISTERED,
    "LFM2.5-Instruct:1987": NOT_REGISTERED,
    "LFM2.5-Instruct:1993": NOT_REGISTERED,
    "LFM2.5-Instruct:1999": NOT_REGISTERED,
    "LFM2.5-Instruct:2004": NOT_REGISTERED,
    "LFM2.5-Instruct:2010": NOT_REGISTERED,
    "LFM2.5-Instruct:2016": NOT_REGISTERED,
    "LFM2.5-Instruct:2022": NOT_REGISTERED,
    "LFM2.5-Instruct:2031": NOT_REGISTERED,
    "LFM2.5-Instruct:2038": NOT_REGISTERED,
    "LFM2.5-Instruct:2047": NOT_REGISTERED,
    "LFM2.5-Instruct:2055": NOT_REGISTERED,
    "LFM2.5-Instruct:2063": NOT_REGISTERED,
    "LFM2.5-Instruct:2071": NOT_REGISTERED,
    "LFM2.5-Instruct:2088": NOT_REGISTERED,
    "LFM2.5-8B-A1B:1984": NOT_REGISTERED,
    "LFM2.5-8B-A1B:1987": NOT_REGISTERED,
    "LFM2.5-8B-A1B:1993": NOT_REGISTERED,
    "LFM2.5-8B-A1B:1999": NOT_REGISTERED,
    "LFM2.5-8B-A1B:2004": NOT_REGISTERED,
    "LFM2.5-8B-A1B:2010": NOT_REGISTERED,
    "LFM2.5-8B-A1B:2016": NOT_REGISTERED,
    "LFM2.5-8B-A1B:2022": NOT_REGISTERED,
    "LFM2.5-8B-A1B:2031": NOT_REGISTERED,
    "LFM2.5-8B-A1B:2038": NOT_REGISTERED,
    "LFM2.5-8B-A1B:2047": NOT_REGISTERED,
    "LFM2.5-8B-A1B:2055": NOT_REGISTERED,
    "LFM2.5-8B-A1B:2063": NOT_REGISTERED,
    "LFM2.5-8B-A1B:2071": NOT_REGISTERED,
    "LFM2.5-8B-A1B:2088": NOT_REGISTERED,
    "LFM2.5-8B-A1B:4845": NOT_REGISTERED,
    "LFM2.5-8B-A1B:4852": NOT_REGISTERED,
    "LFM2.5-8B-A1B:4862": NOT_REGISTERED,
    "LFM2.5-8B-A1B:4873": NOT_REGISTERED,
    "LFM2.5-8B-A1B:4879": NOT_REGISTERED,
    "MiniMax-M3:5091": NOT_REGISTERED,
    "MiniMax-M3:5099": NOT_REGISTERED,
    "MiniMax-M3:5107": NOT_REGISTERED,
    "MiniMax-M3:5122": NOT_REGISTERED,
    "MiniMax-M3:5137": NOT_REGISTERED,
    "MiniMax-M3:5151": NOT_REGISTERED,
    "MiniMax-M3:5172": NOT_REGISTERED,
    "MiniMax-M3:5192": NOT_REGISTERED,
    "MiniMax-M3:5210": NOT_REGISTERED,
    "MiniMax-M3:5228": NOT_REGISTERED,
    "MiniMax-M3:5246": NOT_REGISTERED,
    "MiniMax-M3:5265": NOT_REGISTERED,
    "MiniMax-M3:5286": NOT_REGISTERED,
    "MiniMax-M3:5313": NOT_REGISTERED,
    "MiniMax-M3:5334": NOT_REGISTERED,
    "MiniMax-M3:5351": NOT_REGISTERED,
    "MiniMax-M3:5371": NOT_REGISTERED,
    "MiniMax-M3:5389": NOT_REGISTERED,
    "MiniMax-M3:5409": NOT_REGISTERED,
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use:5475": COHERE_WRAPPERS,
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use:5476": MODEL_ID,
    "CohereForAI-c4ai-command-r-plus-tool_use:5489": NOT_REGISTERED,
    "CohereForAI-c4ai-command-r-plus-tool_use:5491": NOT_REGISTERED,
    "mistralai-Mistral-Nemo-Instruct-2407:5513": MODEL_ID,
    "meetkai-functionary-medium-v3.1:5529": NOT_REGISTERED,
    "meetkai-functionary-medium-v3.1:5530": NOT_REGISTERED,
    "meetkai-functionary-medium-v3.2:5547": NOT_REGISTERED,
    "meetkai-functionary-medium-v3.2:5548": NOT_REGISTERED,
    "Apriel-1.6-15b-Thinker-fixed:5807": APRIEL_THINKING,
    "Apriel-1.6-15b-Thinker-fixed:5815": APRIEL_THINKING,
    "openai-gpt-oss-120b:6000": NOT_REGISTERED,
    "openai-gpt-oss-120b:6003": NOT_REGISTERED,
    "openai-gpt-oss-120b:6006": NOT_REGISTERED,
    "openai-gpt-oss-120b:6014": NOT_REGISTERED,
    "openai-gpt-oss-120b:6029": NOT_REGISTERED,
    "openai-gpt-oss-120b:6036": NOT_REGISTERED,
    "openai-gpt-oss-120b:6043": NOT_REGISTERED,
    "openai-gpt-oss-120b:6050": NOT_REGISTERED,
    "openai-gpt-oss-120b:6057": NOT_REGISTERED,
    "openai-gpt-oss-120b:6066": NOT_REGISTERED,
    "openai-gpt-oss-120b:6119": NOT_REGISTERED,
    "openai-gpt-oss-120b:6128": NOT_REGISTERED,
    "openai-gpt-oss-120b:6139": NOT_REGISTERED,
    "openai-gpt-oss-120b:6147": NOT_REGISTERED,
    "openbmb-MiniCPM5-1B:6446": NOT_REGISTERED,
    "openbmb-MiniCPM5-1B:6452": NOT_REGISTERED,
    "openbmb-MiniCPM5-1B:6459": NOT_REGISTERED,
    "openbmb-MiniCPM5-1B:6466": NOT_REGISTERED,
    "openbmb-MiniCPM5-1B:6475": NOT_REGISTERED,
    "openbmb-MiniCPM5-1B:6482": NOT_REGISTERED,
    "openbmb-MiniCPM5-1B:6490": NOT_REGISTERED,
}

KNOWN_FAILURES_VLLM: dict[str, str] = {
    "llama3_json:simple": TEXT_AROUND_JSON,
    "llama3_json:multiple_json_surrounding_text": TEXT_AROUND_JSON,
    "hermes:non_streaming_tool_call_until_eos": UNCLOSED,
    "kimi_k2:invalid_json": BROKEN_CALL,
    "seed_oss:no_tools": NOT_REGISTERED,
    "seed_oss:tool_call_0_thinking_budget": NOT_REGISTERED,
    "seed_oss:tool_call_512_thinkg_budget": NOT_REGISTERED,
    "seed_oss:tool_call_unlimited_thinking_budget": NOT_REGISTERED,
    "pythonic:no_tool_call": NOT_REGISTERED,
    "pythonic:simple": NOT_REGISTERED,
    "pythonic:more_types": NOT_REGISTERED,
    "pythonic:parameterless": NOT_REGISTERED,
    "pythonic:empty_dict": NOT_REGISTERED,
    "pythonic:empty_list": NOT_REGISTERED,
    "pythonic:escaped_string": NOT_REGISTERED,
    "pythonic:parallel_calls": NOT_REGISTERED,
    "pythonic:streaming_tool_call_with_large_steps": NOT_REGISTERED,
    "llama4_pythonic:no_tool_call": NOT_REGISTERED,
    "llama4_pythonic:simple": NOT_REGISTERED,
    "llama4_pythonic:more_types": NOT_REGISTERED,
    "llama4_pythonic:parameterless": NOT_REGISTERED,
    "llama4_pythonic:empty_dict": NOT_REGISTERED,
    "llama4_pythonic:empty_list": NOT_REGISTERED,
    "llama4_pythonic:escaped_string": NOT_REGISTERED,
    "llama4_pythonic:parallel_calls": NOT_REGISTERED,
    "llama4_pythonic:python_tag": NOT_REGISTERED,
    "llama4_pythonic:parallel_calls_python_start": NOT_REGISTERED,
    "llama4_pythonic:parallel_calls_python_start_spaced": NOT_REGISTERED,
    "llama4_pythonic:streaming_tool_call_with_large_steps": NOT_REGISTERED,
    "deepseek_v32:with_end_of_sentence_token": EOS_TOKEN,
    "mistral:v11_single_tool_add": MISTRAL_NO_ARGS,
    "mistral:v11_single_tool_weather": MISTRAL_NO_ARGS,
    "mistral:streaming_multiple_tools": BROKEN_CALL,
    "qwen3coder:fallback_no_tags": NO_OPENER,
    "granite:various_data_types": GRANITE_STRING_PREFIX,
    "granite:escaped_strings": GRANITE_STRING_PREFIX,
    "granite:granite_string_prefix_format": GRANITE_STRING_PREFIX,
    "granite4:tool_call_parser_complex": STRING_ARGUMENTS,
    "gigachat3:simple": GIGACHAT_NO_TOKENS,
    "gigachat3:parameterless": GIGACHAT_NO_TOKENS,
    "gigachat3:complex": GIGACHAT_NO_TOKENS,
    "kimi_k3:delegating_parser_truncated_tools_do_not_leak_xtml": TRUNCATED_CALL,
    "muse_glimmer:parallel_calls": NO_SCHEMA,
    "muse_glimmer:json_object_array_bool_params": NO_SCHEMA,
}


MIN_PASS_RATE = 0.95


def _cases(doc: dict[str, Any], known: dict[str, str]) -> list[Any]:
    return [
        pytest.param(
            c["id"],
            id=c["id"],
            marks=[pytest.mark.xfail(reason=known[c["id"]], strict=True)]
            if c["id"] in known
            else [],
        )
        for c in doc["cases"]
    ]


def test_llama_cpp_pass_rate() -> None:
    passed = sum(o.passed for o in LLAMA_OUT.values())
    rate = passed / len(LLAMA_OUT)
    assert rate >= MIN_PASS_RATE, f"{passed}/{len(LLAMA_OUT)} llama.cpp cases pass ({rate:.1%})"


@pytest.mark.parametrize("case_id", _cases(LLAMA, KNOWN_FAILURES))
def test_llama_cpp_case(case_id: str) -> None:
    outcome = LLAMA_OUT[case_id]
    assert outcome.passed, outcome.why


@pytest.mark.parametrize("case_id", _cases(VLLM, KNOWN_FAILURES_VLLM))
def test_vllm_case(case_id: str) -> None:
    outcome = VLLM_OUT[case_id]
    assert outcome.passed, outcome.why


def test_known_failures_name_real_cases() -> None:
    assert set(KNOWN_FAILURES) <= set(LLAMA_OUT)
    assert set(KNOWN_FAILURES_VLLM) <= set(VLLM_OUT)


def test_case_ids_are_unique() -> None:
    for doc in (LLAMA, VLLM):
        ids = [c["id"] for c in doc["cases"]]
        assert len(ids) == len(set(ids))


def test_every_template_has_a_family_and_every_family_is_known() -> None:
    templates = {c["template"] for c in LLAMA["cases"]}
    assert templates <= set(bench.LLAMA_CPP_FAMILY)
    known = {*family_names(), *FAMILIES_BEING_WRITTEN, *bench.NEW_GRAMMARS, "none"}
    named = {*bench.LLAMA_CPP_FAMILY.values(), *(c["family"] for c in VLLM["cases"])}
    assert named <= known, named - known


def test_every_declared_tool_has_a_schema() -> None:
    for case in LLAMA["cases"]:
        for key in case["tools"]:
            assert LLAMA["tools"][key]["parameters"]["type"] == "object", key


def test_the_fixture_is_what_the_extractor_writes() -> None:
    """Inputs and expectations re-read from the C++ source match the checked-in data (the
    thinking opener is left out: finding it renders every template, which is slow)."""
    extractor = _load(ROOT / "scripts" / "peer_cases.py", "peer_cases_extractor")
    if not extractor.SOURCE.exists():
        pytest.skip("llama.cpp's test-chat.cpp is not on this machine")
    cases, skipped, _tools = extractor.extract(extractor.SOURCE, probe=lambda *_: "")
    assert dict(skipped) == LLAMA["skipped"]
    ignore = ("thinking_open", "thinking_opener", "thinking_open_from")

    def strip(c: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in c.items() if k not in ignore}

    assert [strip(c) for c in cases] == [strip(c) for c in LLAMA["cases"]]


# -- the runner itself: each check can fail


def _passing_call_case() -> dict[str, Any]:
    for case in LLAMA["cases"]:
        if LLAMA_OUT[case["id"]].passed and case["expect"]["calls"] and case["tools"]:
            return copy.deepcopy(case)
    raise AssertionError("no passing case with a call")


def test_a_wrong_argument_fails() -> None:
    case = _passing_call_case()
    assert bench.run_case(case, LLAMA["tools"]).passed
    call = case["expect"]["calls"][0]
    call["arguments"] = {**call["arguments"], "not_written": 1}
    outcome = bench.run_case(case, LLAMA["tools"])
    assert not outcome.passed and "arguments" in outcome.why


def test_a_wrong_name_or_id_fails() -> None:
    case = _passing_call_case()
    case["expect"]["calls"][0]["name"] += "_other"
    assert not bench.run_case(case, LLAMA["tools"]).passed
    case = _passing_call_case()
    case["expect"]["calls"][0]["id"] = "an id nobody wrote"
    assert "id" in bench.run_case(case, LLAMA["tools"]).why


def test_wrong_content_fails() -> None:
    case = _passing_call_case()
    case["expect"]["content"] = "something else entirely"
    assert "content" in bench.run_case(case, LLAMA["tools"]).why


def test_an_unregistered_family_fails_and_does_not_raise() -> None:
    case = {**_passing_call_case(), "family": "no-such-family"}
    outcome = bench.run_case(case, LLAMA["tools"])
    assert not outcome.passed and "not registered" in outcome.why


def test_arguments_are_typed_by_the_tool_schema() -> None:
    """An XML family writes ``1`` as text; the schema says integer, so it compares as 1."""
    case = {
        "id": "typed",
        "family": "qwen-xml",
        "input": "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n"
        "</parameter>\n</function>\n</tool_call>",
        "tools": ["special_function"],
        "expect": {
            "content": "",
            "reasoning": "",
            "calls": [{"name": "special_function", "arguments": {"arg1": 1}}],
        },
    }
    assert bench.run_case(case, LLAMA["tools"]).passed
    case["expect"]["calls"][0]["arguments"] = {"arg1": "1"}
    assert not bench.run_case(case, LLAMA["tools"]).passed


def test_raw_thinking_in_content_is_the_reply_cut_in_two() -> None:
    raw = "<think>\nI'm\nthinking\n</think>\n\nHello"
    assert bench._raw_split(raw, ParseResult("Hello", reasoning="I'm\nthinking"))
    assert not bench._raw_split(raw, ParseResult("Hello", reasoning="other thoughts"))
    assert not bench._raw_split(raw, ParseResult("Bye", reasoning="I'm\nthinking"))
    assert not bench._raw_split(raw, ParseResult("Hello", reasoning=""))


def test_the_table_counts_every_case_once() -> None:
    rows = bench.table(LLAMA_OUT)
    assert sum(total for _, _, total in rows) == len(LLAMA["cases"])
    assert sum(p for _, p, _ in rows) == sum(o.passed for o in LLAMA_OUT.values())


def test_vllm_cases_name_their_source() -> None:
    for case in VLLM["cases"]:
        assert case["source"].startswith("tests/") and len(case["commit"]) == 40
    assert json.dumps(VLLM)  # plain data
