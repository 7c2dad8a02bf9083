"""GLM (and poolside Laguna), Kimi K2 and MiniMax M2: each reads exactly its own grammar."""

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
from .family_checks import check_foreign
from .prepared import typed
from .replies import CODE, FLAGS, NEAR_MISSES, ONE_CALL, TOOLS, VALID, WEATHER, WRITE
from .test_formats import check_stream, parse

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"
MINE = ("glm", "kimi-k2", "minimax")


def _text(value: Any) -> str:
    """A value as these templates write it: strings verbatim, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def glm(name: str, args: dict[str, Any], *, newlines: bool = True) -> str:
    nl = "\n" if newlines else ""
    out = f"<tool_call>{name}{nl}"
    for key, value in args.items():
        out += f"<arg_key>{key}</arg_key>{nl}<arg_value>{_text(value)}</arg_value>{nl}"
    return out + "</tool_call>"


def kimi(*calls: tuple[str, dict[str, Any]]) -> str:
    out = "<|tool_calls_section_begin|>"
    for i, (name, args) in enumerate(calls):
        out += (
            f"<|tool_call_begin|>functions.{name}:{i}<|tool_call_argument_begin|>"
            f"{json.dumps(args, ensure_ascii=False)}<|tool_call_end|>"
        )
    return out + "<|tool_calls_section_end|>"


def minimax(*calls: tuple[str, dict[str, Any]]) -> str:
    out = "<minimax:tool_call>\n"
    for name, args in calls:
        out += f'<invoke name="{name}">\n'
        for key, value in args.items():
            out += f'<parameter name="{key}">{_text(value)}</parameter>\n'
        out += "</invoke>\n"
    return out + "</minimax:tool_call>"


MY_VALID: dict[str, list[tuple[str, str, list[tuple[str, dict[str, Any]]]]]] = {
    "glm": [
        (glm(*WEATHER), "", [WEATHER]),
        (glm(*WEATHER, newlines=False), "", [WEATHER]),
        (
            "Let me check.\n" + glm(*WRITE) + "\n" + glm(*FLAGS, newlines=False),
            "Let me check.\n\n",
            [WRITE, FLAGS],
        ),
        ("<tool_call>set_flags\n</tool_call>", "", [("set_flags", {})]),
        ("<think>plan</think>\n" + glm(*WEATHER), "", [WEATHER]),
    ],
    "kimi-k2": [
        (kimi(WEATHER), "", [WEATHER]),
        (
            "I'll do all three." + kimi(WEATHER, WRITE, FLAGS),
            "I'll do all three.",
            [
                WEATHER,
                WRITE,
                FLAGS,
            ],
        ),
        (
            "<|tool_calls_section_begin|>\n<|tool_call_begin|>functions.get_weather:0"
            '<|tool_call_argument_begin|> {"city": "Paris", "days": 3} <|tool_call_end|>\n'
            "<|tool_calls_section_end|>",
            "",
            [WEATHER],
        ),
    ],
    "minimax": [
        (minimax(WEATHER), "", [WEATHER]),
        ("Both:\n" + minimax(WRITE, FLAGS) + "\nDone.", "Both:\n\nDone.", [WRITE, FLAGS]),
        (
            '<minimax:tool_call><invoke name="set_flags"></invoke></minimax:tool_call>',
            "",
            [("set_flags", {})],
        ),
    ],
}

MY_ONE_CALL: dict[str, list[str]] = {
    "glm": [glm(*WEATHER), glm(*WEATHER, newlines=False)],
    "kimi-k2": [kimi(WEATHER)],
    "minimax": [minimax(WEATHER)],
}

#: (A block the reply ended in after a whole call is read by the engine for every declared
#: syntax: tests/test_engine_behaviours.py.)
MY_NEAR_MISSES: dict[str, list[str]] = {
    "glm": [
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par",
        "<tool_call>get_weather\n<arg_key>city</arg_key>\nParis\n</tool_call>",
        "<tool_call>get_weather\n<arg_value>Paris</arg_value>\n</tool_call>",
        "<tool_call>get weather\n</tool_call>",
        "<tool_call>\n</tool_call>",
        "<tool_call></tool_call>",
        "<tool_call>get_weather\n<arg_key>city</arg_key><arg_value>a</arg_value>"
        "<arg_key>city</arg_key><arg_value>b</arg_value></tool_call>",
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\nx"
        "</tool_call>",
        "<tool_call>",
        "<tool_ca",
    ],
    "kimi-k2": [
        "<|tool_calls_section_begin|><|tool_calls_section_end|>",
        # (get_weather:0 is a named tolerance: see test_families_variants_unseen.py)
        "<|tool_calls_section_begin|><|tool_call_begin|>get_weather.0"
        '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>',
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather"
        '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>',
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"city": "Par',
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>["Paris"]<|tool_call_end|><|tool_calls_section_end|>',
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"a": NaN}<|tool_call_end|><|tool_calls_section_end|>',
        # (a section the reply ended in after a whole call is read, as for every declared
        # syntax; a call id written twice, both calls, the second given a fresh id)
        "<|tool_calls_section_begin|>",
        "<|tool_calls_sec",
    ],
    "minimax": [
        "<minimax:tool_call>\n</minimax:tool_call>",
        '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Par',
        '<minimax:tool_call>\n<invoke name="get weather">\n</invoke>\n</minimax:tool_call>',
        '<minimax:tool_call>\n<invoke name="">\n</invoke>\n</minimax:tool_call>',
        "<minimax:tool_call>\n<invoke name=get_weather>\n</invoke>\n</minimax:tool_call>",
        '<minimax:tool_call>\n<invoke name="get_weather">\nParis\n</invoke>\n</minimax:tool_call>',
        '<minimax:tool_call>\n<invoke name="f">\n<parameter name="a">1</parameter>\n'
        '<parameter name="a">2</parameter>\n</invoke>\n</minimax:tool_call>',
        '<minimax:tool_call>\n{"name": "get_weather", "arguments": {}}\n</minimax:tool_call>',
        "<minimax:tool_call>",
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
        assert call.text_values == (family != "kimi-k2")
    assert not result.notices
    assert len({c.id for c in result.calls}) == len(result.calls)


def test_kimi_keeps_the_models_call_id() -> None:
    result = parse("kimi-k2", kimi(WEATHER, FLAGS))
    assert [c.id for c in result.calls] == ["functions.get_weather:0", "functions.set_flags:1"]


def test_glm_value_is_verbatim() -> None:
    (call,) = parse("glm", glm(*WRITE)).calls
    assert call.arguments["content"] == CODE


@pytest.mark.parametrize(
    ("family", "reply"), [(f, r) for f, rs in MY_NEAR_MISSES.items() for r in rs]
)
def test_near_misses_are_text_with_a_notice(family: str, reply: str) -> None:
    result = parse(family, reply)
    assert result.calls == []
    assert result.content == reply
    if not get_family(family).markers[0].startswith(reply):  # more than a cut-off marker
        assert [n for n in result.notices if "is not a call" in n]


# ----------------------------------------------------------------------- cross-family

ALL_ONE_CALL = {**ONE_CALL, **MY_ONE_CALL}


@pytest.mark.parametrize("family", sorted(ALL_ONE_CALL))
@pytest.mark.parametrize("other", sorted(ALL_ONE_CALL))
def test_cross_family_matrix(family: str, other: str) -> None:
    if family not in MINE and other not in MINE:
        return  # tests/test_formats.py covers those pairs
    for reply in ALL_ONE_CALL[other]:
        result = parse(family, reply)
        if family == other:
            assert [c.name for c in result.calls] == ["get_weather"], reply
            assert typed(result.calls[0]) == {"city": "Paris", "days": 3}
        elif result.calls:  # its body in this family's framing: a named repair only
            check_foreign(family, reply)
        else:
            assert result.content == reply


@pytest.mark.parametrize("family", MINE)
def test_other_families_replies_are_no_calls(family: str) -> None:
    others = [r for f, cases in VALID.items() for r, _, _ in cases]
    others += [r for rs in NEAR_MISSES.values() for r in rs]
    for reply in others:
        check_foreign(family, reply)


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


def test_kimi_deep_nesting_is_not_a_call() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    reply = kimi(("f", {})).replace("{}", '{"a": ' + deep + "}")
    result = parse("kimi-k2", reply)
    assert result.calls == [] and result.content == reply


# ----------------------------------------------------------------------- round trips

TEMPLATES = {
    "GLM-4.6.jinja": "glm",
    "poolside-Laguna-S-2.1.jinja": "glm",
    "poolside-Laguna-XS-2.1.jinja": "glm",
    "Kimi-K2-Instruct.jinja": "kimi-k2",
    "moonshotai-Kimi-K2.jinja": "kimi-k2",
    "MiniMax-M2.jinja": "minimax",
}
ALARM_TOOLS = [
    *TOOLS,
    {
        "type": "function",
        "function": {
            "name": "set_alarm",
            "description": "Set an alarm.",
            "parameters": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "loud": {"type": "boolean"},
                    "minutes": {"type": "integer"},
                },
            },
        },
    },
]
TWO_CALLS = [
    ToolCall("call_1", "get_weather", {"city": "Paris", "days": 3}),
    ToolCall("call_2", "set_alarm", {"label": "wake up", "loud": True, "minutes": 30}),
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
    for marker in ("<tool_call>", "<arg_", "<|tool_call", "<invoke", "<parameter", "minimax"):
        assert marker not in result.content
    # streamed one character at a time, the same
    check_stream(family.name, text, list(text), tools=ALARM_TOOLS, reasoning_open=opened)


_PIECES = [
    "<tool_call>",
    "</tool_call>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "functions.get_weather:0",
    "<minimax:tool_call>",
    "</minimax:tool_call>",
    '<invoke name="',
    "</invoke>",
    '<parameter name="',
    "</parameter>",
    '">',
    "<think>",
    "</think>",
    '{"city": "Paris"}',
    "{",
    "}",
    '"',
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
    if not result.calls and "<think>" not in reply:
        assert result.content == text_kept(family, reply)  # nothing is lost but markup
    cuts = sorted(data.draw(st.lists(st.integers(0, len(reply)), max_size=8)))
    chunks = [reply[a:b] for a, b in zip([0, *cuts], [*cuts, len(reply)], strict=True)]
    check_stream(family, reply, chunks)
