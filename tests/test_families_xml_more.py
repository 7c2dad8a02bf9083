"""Seed-OSS, MiniCPM5 and MiniMax M3: each reads exactly its own grammar.

The llama.cpp cases are that project's parser tests for the same templates: the model's
output and the message it must give, written here as data.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire import LimitError, detect_format, get_family, load_template
from toolwire.formats.detect import assistant_text
from toolwire.messages import ToolCall

from .family_cases import text_kept
from .prepared import prepared, typed
from .replies import CODE, FLAGS, NEAR_MISSES, ONE_CALL, TOOLS, VALID, WEATHER, WRITE
from .test_formats import check_stream, parse

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"
MINE = ("seed-oss", "minicpm5", "minimax-m3")
NS = "]<]minimax[>["


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def seed(name: str, args: dict[str, Any]) -> str:
    params = "".join(f"<parameter={k}>{_text(v)}</parameter>\n" for k, v in args.items())
    return f"<seed:tool_call>\n<function={name}>\n{params}</function>\n</seed:tool_call>"


def minicpm(name: str, args: dict[str, Any]) -> str:
    out = f'<function name="{name}">'
    for key, value in args.items():
        text = _text(value)
        if any(c in text for c in "<&\n"):
            text = f"<![CDATA[{text}]]>"
        out += f'<param name="{key}">{text}</param>'
    return out + "</function>"


def _xml(value: Any) -> str:
    """A value as MiniMax M3's template writes it: objects and lists as nested elements."""
    if isinstance(value, dict):
        return "".join(f"{NS}<{k}>{_xml(v)}{NS}</{k}>" for k, v in value.items())
    if isinstance(value, list):
        return "".join(f"{NS}<item>{_xml(v)}{NS}</item>" for v in value)
    return _text(value)


def m3(*calls: tuple[str, dict[str, Any]]) -> str:
    out = f"{NS}<tool_call>\n"
    for name, args in calls:
        out += f'{NS}<invoke name="{name}">{_xml(args)}{NS}</invoke>\n'
    return out + f"{NS}</tool_call>"


MY_VALID: dict[str, list[tuple[str, str, list[tuple[str, dict[str, Any]]]]]] = {
    "seed-oss": [
        (seed(*WEATHER), "", [WEATHER]),
        ("Sure.\n" + seed(*WRITE) + "\n" + seed(*FLAGS), "Sure.\n\n", [WRITE, FLAGS]),
        ("<seed:think>plan</seed:think>\n" + seed(*WEATHER), "", [WEATHER]),
        (
            "<seed:tool_call><function=set_flags></function></seed:tool_call>",
            "",
            [("set_flags", {})],
        ),
    ],
    "minicpm5": [
        (minicpm(*WEATHER), "", [WEATHER]),
        ("Both:\n" + minicpm(*WRITE) + "\n" + minicpm(*FLAGS), "Both:\n\n", [WRITE, FLAGS]),
        ("<think>\nplan\n</think>\n\n" + minicpm(*WEATHER), "", [WEATHER]),
        ('<function name="set_flags"></function>', "", [("set_flags", {})]),
        (
            '<function name="get_weather">\n<param name="city">Paris</param>\n</function>',
            "",
            [("get_weather", {"city": "Paris"})],
        ),
    ],
    "minimax-m3": [
        ("</mm:think>" + m3(WEATHER), "", [WEATHER]),
        ("<mm:think>plan</mm:think>Both:" + m3(WRITE, FLAGS), "Both:", [WRITE, FLAGS]),
        (m3(WEATHER), "", [WEATHER]),
        (
            f'{NS}<tool_call>{NS}<invoke name="set_flags">{NS}</invoke>{NS}</tool_call>',
            "",
            [("set_flags", {})],
        ),
    ],
}

MY_ONE_CALL: dict[str, list[str]] = {
    "seed-oss": [seed(*WEATHER)],
    "minicpm5": [minicpm(*WEATHER)],
    "minimax-m3": [m3(WEATHER)],
}

_M3_HEAD = f'{NS}<tool_call>\n{NS}<invoke name="get_weather">'
#: (A block the reply ended in after a whole call is read by the engine for every declared
#: syntax: tests/test_engine_behaviours.py.)
MY_NEAR_MISSES: dict[str, list[str]] = {
    "seed-oss": [
        "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Par",
        "<seed:tool_call>\n<function=get_weather>\n</function>\n</tool_call>",
        "<seed:tool_call>\n<function=get weather>\n</function>\n</seed:tool_call>",
        '<seed:tool_call>\n{"name": "get_weather", "arguments": {}}\n</seed:tool_call>',
        "<seed:tool_call>\n<function=" + "f" * 300 + ">\n</function>\n</seed:tool_call>",
        "<seed:tool_call>",
        "<seed:tool_",
    ],
    "minicpm5": [
        '<function name="get_weather"><param name="city">Par',
        '<function name="get_weather"><param name="city"><![CDATA[Paris</param></function>',
        '<function name="get_weather"><param name="city"><![CDATA[Paris]]>x</param></function>',
        '<function name="get weather"></function>',
        '<function name=""></function>',
        '<function name="f"><param name="a">1</param><param name="a">2</param></function>',
        '<function name="get_weather">Paris</function>',
        '<function name="get_weather"><parameter name="city">Paris</parameter></function>',
        '<function name="' + "f" * 300 + '"></function>',
        '<function name="',
        "<function na",
    ],
    "minimax-m3": [
        f"{NS}<tool_call>\n{NS}</tool_call>",
        # (the block's closer left out where the reply ends: read, as for every syntax,
        # tests/test_engine_behaviours.py)
        _M3_HEAD + f"{NS}<city>Par",
        _M3_HEAD + f"{NS}<city>Paris{NS}</town>{NS}</invoke>\n{NS}</tool_call>",
        _M3_HEAD + f"{NS}<city>Paris{NS}</city>{NS}</tool_call>",
        _M3_HEAD + f"{NS}<city>Paris{NS}<x>1{NS}</x>{NS}</city>{NS}</invoke>\n{NS}</tool_call>",
        _M3_HEAD + f"{NS}<o>{NS}<x>1{NS}</x>junk{NS}</o>{NS}</invoke>\n{NS}</tool_call>",
        _M3_HEAD + f"{NS}<o>{NS}<x>1{NS}</x>{NS}<x>2{NS}</x>{NS}</o>{NS}</invoke>{NS}</tool_call>",
        _M3_HEAD + f"{NS}<a>1{NS}</a>{NS}<a>2{NS}</a>{NS}</invoke>\n{NS}</tool_call>",
        _M3_HEAD + f"{NS}<city name>Paris{NS}</city name>{NS}</invoke>\n{NS}</tool_call>",
        _M3_HEAD + f"Paris{NS}</invoke>\n{NS}</tool_call>",
        f'{NS}<tool_call>\n{NS}<invoke name="get weather">{NS}</invoke>{NS}</tool_call>',
        f'{NS}<tool_call>\n<invoke name="get_weather"></invoke>\n</tool_call>',
        f"{NS}<tool_call>\n" + '{"name": "get_weather", "arguments": {}}' + f"\n{NS}</tool_call>",
        f"{NS}<tool_call>",
        f"{NS}<tool",
    ],
}


@pytest.mark.parametrize(
    ("family", "reply", "content", "calls"),
    [(f, *case) for f, cases in MY_VALID.items() for case in cases],
)
def test_valid_replies(family: str, reply: str, content: str, calls: list[Any]) -> None:
    result = parse(family, reply)
    assert result.content == content
    assert [(c.name, typed(c)) for c in result.calls] == calls
    for call in result.calls:
        assert json.loads(call.arguments_text) == call.arguments
        assert call.text_values
    assert not result.notices
    assert len({c.id for c in result.calls}) == len(result.calls)


@pytest.mark.parametrize("family", MINE)
def test_a_text_value_is_verbatim(family: str) -> None:
    writer = {"seed-oss": seed, "minicpm5": minicpm, "minimax-m3": lambda *c: m3(c)}[family]
    for value in (CODE, "\nleading and trailing\n", " spaced ", "x"):
        (call,) = parse(family, writer("write_file", {"path": "a.py", "content": value})).calls
        assert call.arguments["content"] == value


def test_m3_nested_values_are_the_json_they_spell() -> None:
    args = {"o": {"n": [1, -2.5, "x"], "b": False, "s": "1.5 m", "e": ""}, "l": [[1], {"k": 2}]}
    (call,) = parse("minimax-m3", m3(("set_flags", args))).calls
    assert {k: json.loads(v) for k, v in call.arguments.items()} == args
    assert call.text_values


def test_m3_a_string_that_spells_json_stays_text() -> None:
    # a scalar at the top is text: the tool's schema decides what it is
    (call,) = parse("minimax-m3", m3(("get_weather", {"city": "3", "days": 3}))).calls
    assert call.arguments == {"city": "3", "days": "3"}
    assert typed(call) == {"city": "3", "days": 3}


def test_m3_nesting_is_bounded() -> None:
    deep = "".join(f"{NS}<a>" for _ in range(120)) + "1" + "".join(f"{NS}</a>" for _ in range(120))
    reply = _M3_HEAD + f"{NS}<o>{deep}{NS}</o>{NS}</invoke>\n{NS}</tool_call>"
    result = parse("minimax-m3", reply)
    assert result.calls == [] and result.content == reply
    assert any("nested deeper" in n for n in result.notices)


@pytest.mark.parametrize(
    ("family", "reply"), [(f, r) for f, rs in MY_NEAR_MISSES.items() for r in rs]
)
def test_near_misses_are_text_with_a_notice(family: str, reply: str) -> None:
    result = parse(family, reply)
    assert result.calls == []
    assert result.content == reply
    if not get_family(family).markers[0].startswith(reply):  # more than a cut-off marker
        assert [n for n in result.notices if "is not a call" in n]


def _tool(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    params = {"type": "object", "properties": properties}
    return {"type": "function", "function": {"name": name, "parameters": params}}


_INT, _NUM, _STR = {"type": "integer"}, {"type": "number"}, {"type": "string"}


# ----------------------------------------------------------------------- thinking


def test_seed_thinking_and_its_budget_reflection_are_reasoning() -> None:
    thought = (
        "Plan.<seed:cot_budget_reflect>I have used 129 tokens, and there are 383 tokens "
        "remaining for use.</seed:cot_budget_reflect>Go."
    )
    result = parse("seed-oss", f"<seed:think>{thought}</seed:think>\n" + seed(*WEATHER))
    assert result.reasoning == thought
    assert [c.name for c in result.calls] == ["get_weather"] and result.content == ""


def test_seed_budget_zero_prompt_closes_the_thinking_itself() -> None:
    tpl = load_template(FIXTURES / "ByteDance-Seed-OSS.jinja")
    user = {"role": "user", "content": "Hi"}
    prompt = tpl.render([user], TOOLS, add_generation_prompt=True, thinking_budget=0)
    assert prompt.rstrip().endswith("</seed:cot_budget_reflect>\n</seed:think>")
    result = parse("seed-oss", "Hello." + seed(*WEATHER))
    assert result.content == "Hello." and result.reasoning == ""


@pytest.mark.parametrize(
    ("reply", "opened", "reasoning", "content"),
    [
        ("</mm:think>Hello", False, "", "Hello"),
        ("\n</mm:think>\nHello", False, "", "Hello"),
        ("<mm:think>a\nb</mm:think>Hello", False, "a\nb", "Hello"),
        ("<mm:think></mm:think>", False, "", ""),
        ("Hello </mm:think> there", False, "", "Hello </mm:think> there"),
        ("  Hello", False, "", "  Hello"),
        ("</mm:th", False, "", "</mm:th"),
        ("<mm:think>unfinished", False, "unfinished", ""),
        ("plan</mm:think>Hello", True, "plan", "Hello"),
        # every family's thinking tags are every stream's (formats/reasoning.py)
        ("<think>x</think>Hello", False, "x", "Hello"),
    ],
)
def test_m3_thinking(reply: str, opened: bool, reasoning: str, content: str) -> None:
    result = parse("minimax-m3", reply, reasoning_open=opened)
    assert (result.reasoning, result.content) == (reasoning, content)
    for k in range(len(reply) + 1):
        check_stream("minimax-m3", reply, [reply[:k], reply[k:]], reasoning_open=opened)


# ----------------------------------------------------------------------- cross-family

ALL_ONE_CALL = {**ONE_CALL, **MY_ONE_CALL}


@pytest.mark.parametrize("family", MINE)
@pytest.mark.parametrize("other", sorted(ALL_ONE_CALL))
def test_cross_family_matrix(family: str, other: str) -> None:
    for reply in ALL_ONE_CALL[other]:
        result = parse(family, reply)
        if family == other:
            assert [c.name for c in result.calls] == ["get_weather"], reply
            assert typed(result.calls[0]) == {"city": "Paris", "days": 3}
        else:
            assert result.calls == [], (family, reply)


@pytest.mark.parametrize("family", MINE)
def test_other_families_replies_are_no_calls(family: str) -> None:
    others = [r for f, cases in VALID.items() for r, _, _ in cases]
    others += [r for rs in NEAR_MISSES.values() for r in rs]
    for reply in others:
        assert parse(family, reply).calls == [], reply


# ----------------------------------------------------------------------- streaming

MY_REPLIES = [(f, r) for f, cases in MY_VALID.items() for r, _, _ in cases] + [
    (f, r) for f, rs in MY_NEAR_MISSES.items() for r in rs
]


@pytest.mark.parametrize("family", MINE)
def test_reply_size(family: str) -> None:
    s = get_family(family).stream(max_chars=100)
    s.feed(MY_ONE_CALL[family][0][:50] + "x" * 50)
    with pytest.raises(LimitError):
        s.feed("y")


@pytest.mark.parametrize("family", MINE)
def test_a_huge_value_streams_in_bounded_steps(family: str) -> None:
    value = "v" * 200_000
    reply = {"seed-oss": seed, "minicpm5": minicpm, "minimax-m3": lambda *c: m3(c)}[family](
        "write_file", {"path": "a.py", "content": value}
    )
    s = get_family(family).stream(TOOLS)
    events = []
    for k in range(0, len(reply), 4096):
        events += s.feed(reply[k : k + 4096])
    events += s.finish()
    calls = [e.call for e in events if hasattr(e, "call")]
    assert [c.arguments["content"] for c in calls] == [value]


# ----------------------------------------------------------------------- round trips

TEMPLATES = {
    "ByteDance-Seed-OSS.jinja": "seed-oss",
    "openbmb-MiniCPM5-1B.jinja": "minicpm5",
    "MiniMax-M3.jinja": "minimax-m3",
}
ALARM_TOOLS = [
    *TOOLS,
    _tool("set_alarm", {"label": _STR, "loud": {"type": "boolean"}, "minutes": _INT}),
]
TWO_CALLS = [
    ToolCall("call_1", "get_weather", {"city": "Paris", "days": 3}),
    ToolCall("call_2", "set_alarm", {"label": "wake up <now> & then", "loud": True, "minutes": 30}),
]


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_template_round_trip(name: str) -> None:
    tpl = load_template(FIXTURES / name)
    found = detect_format(tpl)
    assert found.format == TEMPLATES[name]
    family = get_family(found.format)
    turn = {"role": "assistant", "content": "", "tool_calls": [c.to_openai() for c in TWO_CALLS]}
    user = {"role": "user", "content": "Weather in Paris, and an alarm please."}
    text, opened = assistant_text(tpl, [user], [turn], ALARM_TOOLS, call_ids=family.call_ids)
    result = family.parse(text, ALARM_TOOLS, reasoning_open=opened)
    assert [(c.name, typed(c, ALARM_TOOLS)) for c in result.calls] == [
        (c.name, c.arguments) for c in TWO_CALLS
    ]
    assert result.content.strip() == "" and not result.notices
    check_stream(family.name, text, list(text), tools=ALARM_TOOLS, reasoning_open=opened)


def test_m3_template_nested_values_round_trip() -> None:
    tpl = load_template(FIXTURES / "MiniMax-M3.jinja")
    args = {
        "tags": ["x", "y z"],
        "entries": [{"id": 1, "label": "one", "ok": True}, {"id": 2, "label": "two"}],
        "deep": {"a": {"b": [[1, 2], [3.5]]}},
    }
    tools = [_tool("nest", {k: {"type": "array" if k != "deep" else "object"} for k in args})]
    turn = {
        "role": "assistant",
        "content": "",
        "tool_calls": [ToolCall("c", "nest", args).to_openai()],
    }
    user = {"role": "user", "content": "Go."}
    text, opened = assistant_text(tpl, [user], [turn], tools)
    (call,) = parse("minimax-m3", text, tools, reasoning_open=opened).calls
    assert prepared(call, tools, strict=True).arguments == args


_PIECES = [
    "<seed:tool_call>",
    "</seed:tool_call>",
    "<function=",
    "</function>",
    "<parameter=",
    "</parameter>",
    '<function name="',
    '<param name="',
    "</param>",
    "<![CDATA[",
    "]]>",
    NS,
    "<tool_call>",
    "</tool_call>",
    '<invoke name="',
    "</invoke>",
    "<item>",
    "</item>",
    "<city>",
    "</city>",
    '">',
    ">",
    "<seed:think>",
    "</seed:think>",
    "<mm:think>",
    "</mm:think>",
    "<think>",
    "</think>",
    "\n",
    " ",
    "get_weather",
    "x",
]


@settings(max_examples=300, deadline=None)
@given(
    family=st.sampled_from(MINE),
    pieces=st.lists(st.sampled_from(_PIECES) | st.text(max_size=4), max_size=40),
    data=st.data(),
)
def test_any_text_reads_the_same_however_it_is_cut(
    family: str, pieces: list[str], data: st.DataObject
) -> None:
    reply = "".join(pieces)
    result = parse(family, reply)
    if not result.calls and "think>" not in reply:
        assert result.content == text_kept(family, reply)  # nothing is lost but markup
    cuts = sorted(data.draw(st.lists(st.integers(0, len(reply)), max_size=8)))
    chunks = [reply[a:b] for a, b in zip([0, *cuts], [*cuts, len(reply)], strict=True)]
    check_stream(family, reply, chunks)
