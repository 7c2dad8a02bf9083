"""Families declared as syntax from the start (no hand-written reader before them): InternLM2
and Intern-S1, LongCat Flash, Step3, FunctionGemma and Olmo 3.

Each reads its own published grammar: the replies below are the ones the peers' parser tests
write (vLLM's and SGLang's, ``tests/fixtures/peer/new_family_cases.json``, run here under a
floor with each failing case named and why), the template's own rendering where a template is
published (InternLM2's, in ``tests/fixtures/unseen_templates/``), and every engine behaviour
each gets for free.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolwire import detect_format, get_family, load_template

from .declared_reading import bench
from .family_checks import check_near_miss, check_valid
from .replies import FLAGS, WEATHER, WRITE
from .test_formats import parse

ROOT = Path(__file__).resolve().parent.parent
MINE = ("internlm2", "longcat", "step3", "functiongemma", "olmo3")


def _json(name: str, args: dict[str, Any], key: str = "arguments") -> str:
    import json

    return json.dumps({"name": name, key: args})


def internlm(*calls: tuple[str, dict[str, Any]]) -> str:
    return "".join(
        f"<|action_start|><|plugin|>\n{_json(n, a, 'parameters')}<|action_end|>" for n, a in calls
    )


def longcat(*calls: tuple[str, dict[str, Any]]) -> str:
    return "".join(f"<longcat_tool_call>{_json(n, a)}</longcat_tool_call>" for n, a in calls)


def _text(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value)


def step3(*calls: tuple[str, dict[str, Any]]) -> str:
    out = "<｜tool_calls_begin｜>"
    for name, args in calls:
        params = "".join(
            f'<steptml:parameter name="{k}">{_text(v)}</steptml:parameter>' for k, v in args.items()
        )
        out += (
            f'<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="{name}">{params}'
            "</steptml:invoke><｜tool_call_end｜>"
        )
    return out + "<｜tool_calls_end｜>"


def _gemma(value: Any) -> str:
    if isinstance(value, str):
        return f"<escape>{value}<escape>"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_gemma(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_gemma(v) for v in value) + "]"
    return _text(value).lower() if isinstance(value, bool) else _text(value)


def functiongemma(*calls: tuple[str, dict[str, Any]]) -> str:
    return "".join(f"<start_function_call>call:{n}{_gemma(a)}<end_function_call>" for n, a in calls)


def olmo3(*calls: tuple[str, dict[str, Any]]) -> str:
    lines = [f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls]
    return "<function_calls>\n" + "\n".join(lines) + "\n</function_calls>"


WRITERS = {
    "internlm2": internlm,
    "longcat": longcat,
    "step3": step3,
    "functiongemma": functiongemma,
    "olmo3": olmo3,
}

MY_VALID: dict[str, list[tuple[str, str, list[tuple[str, dict[str, Any]]]]]] = {
    name: [
        (writer(WEATHER), "", [WEATHER]),
        ("Sure. " + writer(WRITE, FLAGS), "Sure. ", [WRITE, FLAGS]),
        ("<think>plan</think>" + writer(WEATHER), "", [WEATHER]),
    ]
    for name, writer in WRITERS.items()
}
MY_VALID["internlm2"].append(  # vLLM's template writes "arguments"
    (
        '<|action_start|><|plugin|>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
        "<|action_end|>",
        "",
        [("get_weather", {"city": "Paris"})],
    )
)
MY_VALID["internlm2"].append(  # SGLang's detector: a space between the tokens
    (
        '<|action_start|> <|plugin|>{"name": "get_weather", "parameters": {"city": "Paris"}}'
        "<|action_end|>",
        "",
        [("get_weather", {"city": "Paris"})],
    )
)
MY_VALID["longcat"].append(  # GLM's tags in LongCat's words, as mlx-lm's LongCat reader takes
    (
        "<longcat_tool_call>get_weather\n<longcat_arg_key>city</longcat_arg_key>\n"
        "<longcat_arg_value>Paris</longcat_arg_value>\n</longcat_tool_call>",
        "",
        [("get_weather", {"city": "Paris"})],
    )
)

MY_NEAR_MISSES: dict[str, list[str]] = {
    "internlm2": [
        '<|action_start|><|plugin|>{"name": "get_weather", "parameters": {"city": "Par',
        '<|action_start|><|plugin|>{"name": "get_weather", "parameters": [1]}<|action_end|>',
        '<|action_start|><|plugin|>{"name": "get_weather", "parameters": {}, "arguments": {}}'
        "<|action_end|>",
        "<|action_start|><|interpreter|>print(1)<|action_end|>",
    ],
    "longcat": [
        '<longcat_tool_call>{"name": "get_weather", "arguments": {"city": "Par',
        "<longcat_tool_call>not json</longcat_tool_call>",
        "<longcat_tool_call>get_weather<longcat_arg_key>city</longcat_arg_key>"
        "<longcat_arg_value>Par",
    ],
    "step3": [
        "<｜tool_calls_begin｜><｜tool_call_begin｜>action<｜tool_sep｜>"
        '<steptml:invoke name="get_weather"></steptml:invoke>'
        "<｜tool_call_end｜><｜tool_calls_end｜>",
        "<｜tool_calls_begin｜><｜tool_call_begin｜>"
        '<steptml:invoke name="get_weather"></steptml:invoke>'
        "<｜tool_call_end｜><｜tool_calls_end｜>",
        "<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜>"
        '<steptml:invoke name="get_weather"><steptml:parameter name="city">Par',
    ],
    "olmo3": [
        "<function_calls>\nget_weather('Paris')\n</function_calls>",  # positional
        "<function_calls>\nget_weather(city='Par",
        "<function_calls>\nget_weather(city='Paris', city='Rome')\n</function_calls>",
        "<function_calls>\nget_weather city='Paris'\n</function_calls>",
    ],
    "functiongemma": [
        "<start_function_call>call:get_weather{city:<escape>Par",
        "<start_function_call>call:get_weather{city:Paris}<end_function_call>",
        "<start_function_call>call:get_weather[1]<end_function_call>",
        "<start_function_call>get_weather{}<end_function_call>",
    ],
}


#: Every reply above, for the streaming and "nothing is lost" properties every family has.
MY_REPLIES = [(f, r) for f, cases in MY_VALID.items() for r, _, _ in cases] + [
    (f, r) for f, rs in MY_NEAR_MISSES.items() for r in rs
]


@pytest.mark.parametrize(
    ("family", "reply", "content", "calls"),
    [(f, *case) for f, cases in MY_VALID.items() for case in cases],
)
def test_valid_replies(family: str, reply: str, content: str, calls: list[Any]) -> None:
    check_valid(family, reply, content, calls)


@pytest.mark.parametrize(
    ("family", "reply"), [(f, r) for f, rs in MY_NEAR_MISSES.items() for r in rs]
)
def test_near_misses_are_text_with_a_notice(family: str, reply: str) -> None:
    check_near_miss(family, reply)


def test_olmo3_values_are_never_evaluated() -> None:
    """Unquoted text is a string (named, as every Python-call family reads it); strict
    reading refuses it."""
    reply = "<function_calls>\nget_weather(city=__import__('os'))\n</function_calls>"
    (call,) = parse("olmo3", reply).calls
    assert call.arguments == {"city": "__import__('os')"}
    assert get_family("olmo3").parse(reply, strict=True).calls == []


def test_the_published_internlm2_template_is_read_as_internlm2() -> None:
    """vLLM's InternLM2 template: detection names the family (it was learned as an unnamed
    shape before the family was declared) and the family reads the template's own calls."""
    path = ROOT / "tests" / "fixtures" / "unseen_templates"
    found = detect_format(load_template(path / "vllm-tool_chat_template_internlm2_tool.jinja"))
    assert found.format == "internlm2"
    result = get_family("internlm2").parse(found.call_text)
    assert [c.name for c in result.calls] == ["get_weather"]


NEW = bench.load("new_family_cases.json")
NEW_OUT = bench.run_all(NEW)

#: The development cases of these families that fail, and why: each a decision that holds
#: for every family, or a peer's own disagreement with another.
KNOWN_FAILURES = {
    "internlm2:test_extract_unknown_tool_name_not_emitted": (
        "a call to an undeclared tool is held back by the reply pipeline, not by the family"
    ),
    "functiongemma:TestExtractToolCallsStreaming.test_streamed_arguments_form_valid_json_with"
    "_three_keys": "<escape>10<escape> is the text 10 (a string between the delimiters, as the "
    "llama.cpp reading of FunctionGemma has it), typed only by a schema, and the case declares "
    "none; vLLM decodes it as JSON",
    **dict.fromkeys(
        (
            "step3:TestStep3ToolParser.test_single_tool_call_simple_args",
            "step3:TestStep3ToolParser.test_empty_arguments",
        ),
        "no function<｜tool_sep｜> before the invoke: SGLang's Step3 tests want no call there, "
        "and vLLM marks its own non-streaming cases xfail",
    ),
    **dict.fromkeys(
        (
            f"step3:TestStep3ParameterWhitespace.test_string_value_preserved[{i}]"
            for i in (0, 1, 4, 5)
        ),
        "the tool's name written again between function<｜tool_sep｜> and the invoke: text in the "
        "framing breaks the call, as SGLang reads it",
    ),
    "sglang.step3:TestStep3Detector.test_detect_and_parse_incomplete_block_as_normal_text": (
        "a block the reply ended in after a whole call is read, for every syntax "
        "(recovered-unclosed-tag)"
    ),
    "sglang.step3:TestStep3Detector.test_detect_and_parse_non_function_call_ignored": (
        "markup that is no call stays text with a call-not-read notice, for every family; "
        "SGLang drops it"
    ),
}


def test_the_peers_cases_of_these_families_pass_but_the_named_ones() -> None:
    mine = {k: o for k, o in NEW_OUT.items() if o.family in MINE}
    assert len(mine) >= 40
    failing = {k for k, o in mine.items() if not o.passed}
    assert failing == set(KNOWN_FAILURES), sorted(failing ^ set(KNOWN_FAILURES))


def test_the_cases_read_as_another_family_pass() -> None:
    """ERNIE 4.5 (Hermes's grammar), Jamba (Apriel's), Ling 3 (GLM's): read by the family
    whose grammar they write."""
    others = {k: o for k, o in NEW_OUT.items() if o.family in ("hermes", "apriel", "glm")}
    assert len(others) >= 8 and all(o.passed for o in others.values()), others


def test_the_new_cases_name_their_source_and_a_known_family() -> None:
    from toolwire import family_names

    known = {*family_names(), *bench.NEW_GRAMMARS, *bench.READ_AS}
    ids = [c["id"] for c in NEW["cases"]]
    assert len(ids) == len(set(ids))
    for case in NEW["cases"]:
        assert ":" in case["source"] and len(case["commit"]) == 40
        assert case["family"] in known, case["family"]
        assert set(case["tools"]) <= set(NEW["tools"]), case["id"]
