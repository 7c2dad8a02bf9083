"""Families declared from the peers' readers (vLLM's and SGLang's tool parsers): dots,
IQuest, TeleChat4, PLaMo 3, Solar Open2, Granite-20B-FunctionCalling, Qwen2.5-Coder as vLLM
serves it, Step-Audio 2, openPangu and RWKV; and Step-DeepResearch's form of Step3, and
DeepSeek V4.1's of DSML.

The replies are written here by hand from the peers' readers (each family's grammar as its
reader's source states it), not by the engine's writer, so a declaration that drifts from
the grammar fails; each reply is read whole and at every split point, and every engine
behaviour each family gets for free is checked by the engine's own tests, which find these
families in the registry.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolwire import get_family

from .family_checks import check_near_miss, check_valid
from .replies import FLAGS, WEATHER, WRITE


def _json(name: str, args: dict[str, Any], key: str = "arguments") -> str:
    return json.dumps({"name": name, key: args})


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def dots(*calls: tuple[str, dict[str, Any]]) -> str:
    invokes = "".join(
        f'<invoke name="{n}">\n'
        + "".join(f'<parameter name="{k}">{_text(v)}</parameter>\n' for k, v in a.items())
        + "</invoke>\n"
        for n, a in calls
    )
    return f"<dots_function_call>\n{invokes}</dots_function_call>"


def _glm(tag: str, key: str, value: str, calls: tuple[tuple[str, dict[str, Any]], ...]) -> str:
    return "".join(
        f"<{tag}>{n}"
        + "".join(f"<{key}>{k}</{key}><{value}>{_text(v)}</{value}>" for k, v in a.items())
        + f"</{tag}>"
        for n, a in calls
    )


def iquest(*calls: tuple[str, dict[str, Any]]) -> str:
    return _glm("iquest_tool_call", "arg_key", "arg_value", calls)


def telechat4(*calls: tuple[str, dict[str, Any]]) -> str:
    return _glm("tool_call", "param_key", "param_value", calls)


_P = "<|plamo:{}:plamo|>"


def plamo3(*calls: tuple[str, dict[str, Any]]) -> str:
    each = "".join(
        _P.format("begin_tool_request")
        + _P.format("begin_tool_name")
        + n
        + _P.format("end_tool_name")
        + _P.format("begin_tool_arguments")
        + "<|plamo:constrain|>json<|plamo:msg|>"
        + json.dumps(a)
        + _P.format("end_tool_arguments")
        + _P.format("end_tool_request")
        for n, a in calls
    )
    return _P.format("begin_tool_requests") + each + _P.format("end_tool_requests")


def solar_open2(*calls: tuple[str, dict[str, Any]]) -> str:
    return "".join(
        f"<|tool_call:start|>{n}\n"
        + "".join(
            f"<|tool_arg:start|>{k}<|tool_arg:value|>{_text(v)}<|tool_arg:end|>\n"
            for k, v in a.items()
        )
        + "<|tool_call:end|>"
        for n, a in calls
    )


def granite_20b(*calls: tuple[str, dict[str, Any]]) -> str:
    return "".join(f"<function_call> {_json(n, a)}" for n, a in calls)


def qwen25_coder(*calls: tuple[str, dict[str, Any]]) -> str:
    return "".join(f"<tools>\n{_json(n, a)}\n</tools>" for n, a in calls)


def step_audio2(*calls: tuple[str, dict[str, Any]]) -> str:
    return "".join(f"<tool_call>function\n{n}\n{json.dumps(a)}</tool_call>" for n, a in calls)


def openpangu(*calls: tuple[str, dict[str, Any]]) -> str:
    return "[unused11][" + ", ".join(_json(n, a) for n, a in calls) + "][unused12]"


def rwkv(*calls: tuple[str, dict[str, Any]]) -> str:
    return "".join(f"**Tool Call:**\n```json\n{_json(n, a)}\n```" for n, a in calls)


WRITERS = {
    "dots": dots,
    "iquest": iquest,
    "telechat4": telechat4,
    "plamo3": plamo3,
    "solar-open2": solar_open2,
    "granite-20b-fc": granite_20b,
    "qwen25-coder": qwen25_coder,
    "step-audio2": step_audio2,
    "openpangu": openpangu,
    "rwkv": rwkv,
}
THINKING = {
    "dots": "",
    "iquest": "<think>plan</think>",
    "telechat4": "<think>plan</think>",
    "plamo3": _P.format("begin_think") + "plan" + _P.format("end_think"),
    "solar-open2": "<|think:start|>plan<|think:end|>",
    "granite-20b-fc": "",
    "qwen25-coder": "",
    "step-audio2": "<think>plan</think>",
    "openpangu": "[unused16]plan[unused17]",
    "rwkv": "<think>plan</think>",
}

MY_VALID: dict[str, list[tuple[str, str, list[tuple[str, dict[str, Any]]]]]] = {
    name: [
        (writer(WEATHER), "", [WEATHER]),
        ("Sure. " + writer(WRITE, FLAGS), "Sure. ", [WRITE, FLAGS]),
        *([(THINKING[name] + writer(WEATHER), "", [WEATHER])] if THINKING[name] else []),
    ]
    for name, writer in WRITERS.items()
}
MY_VALID["dots"] += [
    # a call object in the block instead of invokes, and two blocks of one invoke each
    (
        f"<dots_function_call>{_json('get_weather', {'city': 'Paris', 'days': 3})}"
        "</dots_function_call>",
        "",
        [WEATHER],
    ),
    (dots(WEATHER) + "\n" + dots(WRITE), "\n", [WEATHER, WRITE]),  # (the text between)
]
MY_VALID["iquest"].append(  # IQuest-Coder V2's tag (vLLM's iquest_coder_v2)
    (
        _glm("iquestcoder_tool_call", "arg_key", "arg_value", (WEATHER,)),
        "",
        [WEATHER],
    )
)
MY_VALID["qwen25-coder"] += [
    # the arguments under "parameters", as vLLM reads them
    ("<tools>\n" + _json(*WEATHER, key="parameters") + "\n</tools>", "", [WEATHER]),
    # two blocks a line apart, as its template writes them: the line is the reply's text
    (qwen25_coder(WEATHER) + "\n" + qwen25_coder(WRITE), "\n", [WEATHER, WRITE]),
]

MY_VALID["rwkv"].append((rwkv(WEATHER) + "\n\n" + rwkv(WRITE), "\n\n", [WEATHER, WRITE]))
MY_VALID["step3"] = [  # Step-DeepResearch's invokes in <steptml:toolcall> (vLLM's reader)
    (
        '<steptml:toolcall>\n<steptml:invoke name="get_weather">\n'
        '<steptml:parameter name="city">Paris</steptml:parameter>\n'
        '<steptml:parameter name="days">3</steptml:parameter>\n'
        "</steptml:invoke>\n</steptml:toolcall>",
        "",
        [WEATHER],
    )
]

MY_NEAR_MISSES: dict[str, list[str]] = {
    "dots": [
        '<dots_function_call><invoke name="get_weather"><parameter name="city">Par',
        "<dots_function_call>not a call</dots_function_call>",
    ],
    "iquest": ["<iquest_tool_call>get_weather<arg_key>city</arg_key><arg_value>Par"],
    "telechat4": ["<tool_call>get_weather<param_key>city</param_key><param_value>Par"],
    "plamo3": [
        _P.format("begin_tool_requests")
        + _P.format("begin_tool_request")
        + _P.format("begin_tool_name")
        + "get_weather"
        + _P.format("end_tool_name")
        + "no arguments"
    ],
    "solar-open2": ["<|tool_call:start|>get_weather\n<|tool_arg:start|>city<|tool_arg:value|>Par"],
    "granite-20b-fc": ['<function_call> {"name": "get_weather", "arguments": {"city": "Par'],
    "qwen25-coder": ["<tools>\nnot json\n</tools>", '<tools>\n{"name": "get_weather"'],
    "step-audio2": ['<tool_call>get_weather\n{"city": "Paris"}</tool_call>'],
    "openpangu": ['[unused11][{"name": "get_weather", "arguments": {"city": "Par'],
    "rwkv": ['**Tool Call:**\n```json\n{"name": "get_weather", "arguments": {"city": "Par'],
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


def test_telechat4_reads_a_call_object_in_its_tag_as_a_named_repair() -> None:
    """SGLang's TeleChat4 reader takes Hermes' body in its ``<tool_call>``: read, named, as the
    engine reads one in every tagged syntax's tag; strict refuses it."""
    reply = "<tool_call>" + _json("get_weather", {"city": "Paris"}) + "</tool_call>"
    family = get_family("telechat4")
    result = family.parse(reply)
    assert [(c.name, c.arguments) for c in result.calls] == [("get_weather", {"city": "Paris"})]
    assert result.notices
    assert family.parse(reply, strict=True).calls == []


def test_the_families_are_registered_with_their_models() -> None:
    for name in WRITERS:
        family = get_family(name)
        assert family.models and family.markers


@pytest.mark.parametrize(
    ("name", "template"),
    [
        ("granite-20b-fc", "vllm-tool_chat_template_granite_20b_fc.jinja"),
        ("qwen25-coder", "vllm-tool_chat_template_qwen2_5_coder.jinja"),
    ],
)
def test_the_published_template_is_read_as_its_family(name: str, template: str) -> None:
    """vLLM's published templates (tests/fixtures/unseen_templates/, verbatim): detection
    names the family (both were learned as unnamed shapes before), and the family reads the
    template's own rendering of its calls."""
    from pathlib import Path

    from toolwire import detect_format, load_template

    path = Path(__file__).parent / "fixtures" / "unseen_templates" / template
    found = detect_format(load_template(path))
    assert found.format == name
    result = get_family(name).parse(found.call_text)
    assert [c.name for c in result.calls] and not result.notices


_DSML = "｜DSML｜"
#: DeepSeek V4.1's calls as its template (in llama.cpp's forks) writes them: the block
#: ``calls``, a space after the prefix of every tag, each value typed by its ``string``.
V41 = (
    f'\n\n<{_DSML} calls>\n<{_DSML} invoke name="get_weather">\n'
    f'<{_DSML} parameter name="city" string="true">Paris</{_DSML} parameter>\n'
    f'<{_DSML} parameter name="days" string="false">3</{_DSML} parameter>\n'
    f'</{_DSML} invoke>\n<{_DSML} invoke name="set_flags">\n\n</{_DSML} invoke>\n'
    f"</{_DSML} calls>"
)


@pytest.mark.parametrize("thinking", ["", "<think>plan</think>"])
def test_deepseek_v4_1_s_spaced_dsml_is_deepseek_dsml_s_own(thinking: str) -> None:
    from toolwire import assemble

    from .test_engine_behaviours import _every_split

    family = get_family("deepseek-dsml")
    result = assemble(_every_split(family, None, thinking + "Sure." + V41, False))
    assert [(c.name, c.arguments) for c in result.calls] == [
        ("get_weather", {"city": "Paris", "days": 3}),
        ("set_flags", {}),
    ]
    assert result.content == "Sure.\n\n" and result.reasoning == thinking[7:-8]
    assert not family.parse(V41).notices
    assert len(family.parse(V41, strict=True).calls) == 2


def test_deepseek_v4_1_s_calls_are_in_the_family_s_grammar() -> None:
    from toolwire.formats.gbnf import constraint_for

    from .replies import TOOLS
    from .test_grammars import matches

    tools = [*TOOLS, {"type": "function", "function": {"name": "set_flags", "parameters": {}}}]
    constraint = constraint_for("deepseek-dsml", tools)
    assert constraint is not None
    assert matches(constraint.grammar("family"), V41.strip())
