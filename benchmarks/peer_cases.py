"""How many of the peers' reply-parser cases toolwire reads as they expect, per family.

The cases are data (``tests/fixtures/peer/*.json``): llama.cpp's ``tests/test-chat.cpp``
(extracted by ``scripts/peer_cases.py``), vLLM's tool-parser tests and SGLang's function-call
parser tests (transcribed), and the peers' cases of grammars added later
(``new_family_cases.json``: InternLM2, Olmo 3, FunctionGemma, xLAM, Step3, LongCat, ...), and
the parser tests of Ollama, LMDeploy and TensorRT-LLM collected later (``ollama_cases.json``,
``engines_cases.json``), and those of mlx-lm, mistral.rs and transformers
(``more_cases.json``), and Dynamo's tool-calling conformance fixtures and vllm-mlx's parser
tests (``dynamo_cases.json``). Each
names a template (llama.cpp) or a parser (vLLM, SGLang); the tables below say which toolwire
family reads it. The SGLang and the later cases are split by a fixed rule into development
(``tests/fixtures/peer/``) and held out (``tests/fixtures/held_out/``, read here and by no
test): the two are printed apart, so the held-out figure says how toolwire does on cases
nobody fitted it to.

A case passes when that family's one-shot parse gives the expected calls (name; arguments
after typing by the tool's schema, only the keys named when the case marks them ``partial``;
id when the case asserts one) and the expected content and reasoning, whitespace-trimmed. A
family that is not registered fails its cases.

    python benchmarks/peer_cases.py [--failures]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolwire import family_names, get_family
from toolwire.arguments import prepare_arguments
from toolwire.errors import FormatError, ToolwireError
from toolwire.formats.base import ParseResult
from toolwire.formats.reasoning import opens_reasoning

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "peer"
HELD_OUT = FIXTURES.parent / "held_out"

#: Which family reads each llama.cpp template: the grammar its cases write. ``none`` is a
#: template with no call grammar (its cases are plain replies).
LLAMA_CPP_FAMILY: dict[str, str] = {
    "Apertus-8B-Instruct.jinja": "apertus",
    "Apriel-1.6-15b-Thinker-fixed.jinja": "apriel",
    "ByteDance-Seed-OSS.jinja": "seed-oss",
    "Cohere2MoE.jinja": "command-r7b",
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": "command-r-plus",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": "command-r7b",
    "GLM-4.6.jinja": "glm",
    "GLM-4.7-Flash.jinja": "glm",  # not in the corpus: GLM's arg_key/arg_value, no newlines
    "GigaChat3-10B-A1.8B.jinja": "gigachat",
    # not in the corpus: ``<|function_call|>{"name", "arguments"}``, unlike GigaChat3's turn
    "GigaChat3.1-10B-A1.8B.jinja": "gigachat",
    "Kimi-K2-Instruct.jinja": "kimi-k2",
    "Kimi-K2-Thinking.jinja": "kimi-k2",  # not in the corpus: Kimi-K2's sections, <think>
    "Kimi-K3.jinja": "kimi-k3",
    "LFM2-8B-A1B.jinja": "lfm2",
    "LFM2.5-8B-A1B.jinja": "lfm2",
    "LFM2.5-Instruct.jinja": "lfm2",  # not in the corpus: the same Python-call list
    "MiMo-VL.jinja": "hermes",
    "MiniMax-M2.jinja": "minimax",
    "MiniMax-M3.jinja": "minimax-m3",
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": "mistral",  # not in the corpus: [CALL_ID]
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja": "qwen-xml",
    "NVIDIA-Nemotron-Nano-v2.jinja": "nemotron-v2",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": "hermes",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": "hermes",  # not in the corpus
    "Qwen-QwQ-32B.jinja": "hermes",  # not in the corpus: <tool_call> JSON, <think>
    "Qwen-Qwen2.5-7B-Instruct.jinja": "hermes",
    "Qwen3-Coder.jinja": "qwen-xml",
    "Qwen3.5-4B.jinja": "qwen-xml",
    "Reka-Edge.jinja": "hermes",
    "StepFun3.5-Flash.jinja": "qwen-xml",  # not in the corpus: <function=...><parameter=...>
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": "deepseek-r1",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "deepseek-r1",
    "deepseek-ai-DeepSeek-V3.1.jinja": "deepseek-v3.1",
    "deepseek-ai-DeepSeek-V3.2.jinja": "deepseek-dsml",
    "deepseek-ai-DeepSeek-V4-Flash-0731.jinja": "deepseek-dsml",  # not in the corpus
    "deepseek-ai-DeepSeek-V4.jinja": "deepseek-dsml",
    "fireworks-ai-llama-3-firefunction-v2.jinja": "firefunction",
    "google-gemma-2-2b-it.jinja": "none",
    "google-gemma-4-31B-it.jinja": "gemma4",
    "ibm-granite-granite-3.3-2B-Instruct.jinja": "granite",
    "ibm-granite-granite-4.0.jinja": "hermes",
    "ibm-granite-granite-4.1.jinja": "hermes",  # not in the corpus: <tool_call> JSON
    "llama-cpp-deepseek-r1.jinja": "deepseek-r1",
    "meetkai-functionary-medium-v3.1.jinja": "functionary-v3.1",
    "meetkai-functionary-medium-v3.2.jinja": "functionary-v3.2",
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.3-70B-Instruct.jinja": "llama3",  # not in the corpus
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja": "mistral",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "mistral",
    "moonshotai-Kimi-K2.jinja": "kimi-k2",
    "muse-glimmer.jinja": "glimmer",
    "openai-gpt-oss-120b.jinja": "gpt-oss",
    "openbmb-MiniCPM5-1B.jinja": "minicpm5",
    "unsloth-Apriel-1.5.jinja": "apriel",
    "unsloth-mistral-Devstral-Small-2507.jinja": "mistral",
}

#: Grammars no toolwire family (written or being written) reads, one line each.
NEW_GRAMMARS: dict[str, str] = {
    # SGLang's K2V3Detector (vLLM's K2V3ToolParser): <ifm|tool_call>NAME<ifm|arg_key>k
    # </ifm|arg_key><ifm|arg_value>v</ifm|arg_value></ifm|tool_call>, or JSON inside the tags
    "k2v3-ifm": "the IFM <ifm|tool_call> calls (K2 V3)",
    # SGLang's MultiFormatDetector dialects (ported from vLLM's multi-format parser) that no
    # family reads: its minimax and dsv32 dialects, <tool_calls><invoke name="f"><parameter
    # name="k">v</parameter></invoke></tool_calls> (no minimax: or DSML prefix); its gptoss
    # dialect, <tool_call>assistant to=functions.f json\n{...}\n</tool_call>; its python
    # dialect, <tool_call>f(k="v")</tool_call>
    "invoke-xml": "<tool_calls><invoke name=...><parameter name=...> without a namespace",
    "tagged-harmony": "a harmony-style 'to=functions.NAME json' header inside <tool_call>",
    "tagged-pythonic": "one Python call inside <tool_call>...</tool_call>",
    # vLLM's xLAMToolParser: a JSON list bare, fenced, after [TOOL_CALLS] or in <tool_call>
    "xlam": "xLAM's JSON list of calls, bare or fenced",
}


#: Stands for an argument the call lacks, when only some keys are compared.
_MISSING = "<missing>"


@dataclass(frozen=True)
class Outcome:
    """One case read: passed, or why not."""

    family: str
    passed: bool
    why: str = ""


def load(name: str, directory: Path = FIXTURES) -> dict[str, Any]:
    """One fixture file: ``llama_cpp_cases.json``, ``vllm_cases.json``, ``sglang_cases.json``
    (``directory`` is :data:`HELD_OUT` for the held-out SGLang cases)."""
    doc: dict[str, Any] = json.loads((directory / name).read_text(encoding="utf-8"))
    return doc


#: Grammars a case names that a family under another name reads: the same grammar.
READ_AS: dict[str, str] = {
    # SGLang's MiniCPM4XmlFormatDetector: <function name="f"><param name="k">v</param></function>,
    # values as text or CDATA, typed by the schema: MiniCPM5's grammar
    "minicpm4-xml": "minicpm5",
    # vLLM's ERNIE 4.5 parser: <tool_call>{"name", "arguments"}</tool_call>, Hermes's grammar
    "ernie45": "hermes",
    # vLLM's Jamba parser: <tool_calls>[{"name", "arguments"}, ...]</tool_calls>, Apriel's
    "jamba": "apriel",
    # vLLM's phi4_mini_json parser: functools[{...}, ...], Firefunction's
    "phi4mini": "firefunction",
    # Ling 3 (SGLang's Ling3Detector, a Glm4MoeDetector): GLM's tags
    "ling": "glm",
}


#: The collections split into development and held out by the hash rule
#: (``tests/fixtures/held_out/README.md``); the later ones were collected after the engine was
#: built: Ollama's parser tests, LMDeploy's and TensorRT-LLM's, mlx-lm's, mistral.rs's and
#: transformers', and Dynamo's conformance fixtures with vllm-mlx's tests.
SPLIT = (
    "sglang_cases.json",
    "new_family_cases.json",
    "ollama_cases.json",
    "engines_cases.json",
    "more_cases.json",
    "dynamo_cases.json",
)


def family_of(case: Mapping[str, Any]) -> str:
    """The toolwire family that reads a case: from its template, or named by the case."""
    if "family" in case:
        return READ_AS.get(str(case["family"]), str(case["family"]))
    return LLAMA_CPP_FAMILY[case["template"]]


def _parse(family: str, case: Mapping[str, Any], tools: list[dict[str, Any]]) -> ParseResult:
    if family == "none":
        return ParseResult(case["input"])
    # What the reply pipeline would pass: whether toolwire knows the prompt's opener.
    opened = opens_reasoning(case.get("thinking_opener") or "")
    return get_family(family).parse(case["input"], tools or None, reasoning_open=opened)


def _raw_split(expected: str, got: ParseResult) -> bool:
    """With llama.cpp's reasoning format NONE the thinking stays in the content, markup and
    all; toolwire always reads it out. Equal when the reply's text is the expected content
    cut in two: the reasoning inside it, the content at its end."""
    want = expected.strip()
    content = got.content.strip()
    reasoning = got.reasoning.strip()
    if not reasoning or not want.endswith(content):
        return False
    return reasoning in want[: len(want) - len(content)]


def _arguments(call: Any, schema: Mapping[str, Any] | None) -> Any:
    if schema is None:
        return dict(call.arguments)
    source = call.arguments if call.arguments or not call.arguments_text else call.arguments_text
    return prepare_arguments(source, schema, text_values=call.text_values).arguments


def run_case(case: Mapping[str, Any], tools: Mapping[str, Any]) -> Outcome:
    """Read one case with its family and compare with what the peer expects."""
    family = family_of(case)
    declared = [tools[key] for key in case.get("tools", [])]
    schemas = {t["name"]: t.get("parameters") for t in declared}
    try:
        got = _parse(family, case, [{"type": "function", "function": t} for t in declared])
    except FormatError as exc:
        return Outcome(family, False, f"family not registered ({exc})".split(";")[0])
    except ToolwireError as exc:
        return Outcome(family, False, f"raised {type(exc).__name__}: {exc}")
    want = case["expect"]
    names = [c.name for c in got.calls]
    if want["calls"] is None:  # the source asserts only the text around the calls
        want = {**want, "calls": [{"name": n, "arguments": None} for n in names]}
    if names != [c["name"] for c in want["calls"]]:
        return Outcome(
            family, False, f"calls {names}, expected {[c['name'] for c in want['calls']]}"
        )
    for call, expected in zip(got.calls, want["calls"], strict=True):
        if expected["arguments"] is None:  # not asserted: the source keeps broken JSON as is
            continue
        try:
            args = _arguments(call, schemas.get(call.name))
        except ToolwireError as exc:
            return Outcome(family, False, f"arguments of {call.name} not typed: {exc}")
        if expected.get("partial"):  # the source asserts only these keys
            args = {k: args.get(k, _MISSING) for k in expected["arguments"]}
        if args != expected["arguments"]:
            return Outcome(family, False, f"arguments {args!r}, expected {expected['arguments']!r}")
        if "id" in expected and call.id != expected["id"]:
            return Outcome(family, False, f"id {call.id!r}, expected {expected['id']!r}")
    # ``None``: the source test does not assert it (vLLM drops text after or between calls).
    content_ok = want["content"] is None or got.content.strip() == want["content"].strip()
    reasoning_ok = want["reasoning"] is None or got.reasoning.strip() == want["reasoning"].strip()
    if not (content_ok and reasoning_ok):
        raw = case.get("reasoning_format") == "none" and not want["reasoning"]
        if raw and want["content"] is not None and _raw_split(want["content"], got):
            return Outcome(family, True)
        return Outcome(
            family,
            False,
            f"content {got.content.strip()!r} reasoning {got.reasoning.strip()!r}, expected "
            f"{want['content']!r} / {want['reasoning']!r}",
        )
    return Outcome(family, True)


def run_all(doc: Mapping[str, Any]) -> dict[str, Outcome]:
    """Every case of one fixture file, by id."""
    return {case["id"]: run_case(case, doc["tools"]) for case in doc["cases"]}


def table(outcomes: Mapping[str, Outcome]) -> list[tuple[str, int, int]]:
    """Per family: (family, passed, total), families in name order."""
    total: Counter[str] = Counter()
    passed: Counter[str] = Counter()
    for o in outcomes.values():
        total[o.family] += 1
        passed[o.family] += o.passed
    return [(f, passed[f], total[f]) for f in sorted(total)]


def _print(title: str, outcomes: Mapping[str, Outcome], failures: bool) -> None:
    rows = table(outcomes)
    ok = sum(p for _, p, _ in rows)
    n = sum(t for _, _, t in rows)
    print(f"\n{title}: {ok}/{n} passed ({ok / max(n, 1):.1%})")
    known = {*family_names(), "none"}
    ok_k = sum(p for f, p, _ in rows if f in known)
    n_k = sum(t for f, _, t in rows if f in known)
    print(f"  families registered here: {ok_k}/{n_k} passed ({ok_k / max(n_k, 1):.1%})")
    for family, p, t in rows:
        print(f"  {family:<18} {p:>4} / {t:<4}")
    if failures:
        for case_id, o in outcomes.items():
            if not o.passed:
                print(f"  FAIL {case_id} [{o.family}]: {o.why[:300]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--failures", action="store_true", help="list every failing case")
    args = parser.parse_args()
    for name in ("llama_cpp_cases.json", "vllm_cases.json"):
        if (FIXTURES / name).exists():
            _print(name, run_all(load(name)), args.failures)
    for name in SPLIT:
        for title, directory in (("development", FIXTURES), ("held out", HELD_OUT)):
            if (directory / name).exists():
                outcomes = run_all(load(name, directory))
                # a held-out failure is printed as a figure only, never listed
                _print(f"{name}, {title}", outcomes, args.failures and directory == FIXTURES)


if __name__ == "__main__":
    main()
