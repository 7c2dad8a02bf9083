"""The DeepSeek families: R1 and its distills, V3.1, and V3.2/V4 DSML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolwire import (
    CallArgsDelta,
    CallEnd,
    CallStart,
    LimitError,
    TextDelta,
    detect_format,
    get_family,
    load_template,
)
from toolwire.formats.base import ParseResult
from toolwire.formats.detect import assistant_text
from toolwire.messages import ToolCall

from .prepared import prepared, typed
from .replies import CODE, FLAGS, NEAR_MISSES, ONE_CALL, TOOLS, VALID, WEATHER, WRITE

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"
OURS = ("deepseek-r1", "deepseek-v3.1", "deepseek-dsml")
THEIRS = sorted(ONE_CALL)

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"


def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def r1(*calls: tuple[str, dict[str, Any]]) -> str:
    body = "\n".join(
        f"{CALL_BEGIN}function{SEP}{n}\n```json\n{_j(a)}\n```{CALL_END}" for n, a in calls
    )
    return CALLS_BEGIN + body + CALLS_END


def v31(*calls: tuple[str, dict[str, Any]]) -> str:
    body = "".join(f"{CALL_BEGIN}{n}{SEP}{_j(a)}{CALL_END}" for n, a in calls)
    return CALLS_BEGIN + body + CALLS_END


def dsml(*calls: tuple[str, dict[str, Any]], block: str = "function_calls") -> str:
    out = f"\n\n<｜DSML｜{block}>\n"
    for name, args in calls:
        out += f'<｜DSML｜invoke name="{name}">\n'
        for key, value in args.items():
            if isinstance(value, str):
                out += (
                    f'<｜DSML｜parameter name="{key}" string="true">{value}</｜DSML｜parameter>\n'
                )
            else:
                out += (
                    f'<｜DSML｜parameter name="{key}" string="false">{_j(value)}'
                    "</｜DSML｜parameter>\n"
                )
        out += "</｜DSML｜invoke>\n"
    return out + f"</｜DSML｜{block}>"


BUILD = {"deepseek-r1": r1, "deepseek-v3.1": v31, "deepseek-dsml": dsml}

PLAIN = "Plain text with ```json fences``` and <｜ bars."

# family -> (reply, expected content, expected calls)
CASES: dict[str, list[tuple[str, str, list[tuple[str, dict[str, Any]]]]]] = {
    "deepseek-r1": [
        (r1(WEATHER), "", [WEATHER]),
        (
            "Let me look.\n\n" + r1(WEATHER, WRITE, FLAGS),
            "Let me look.\n\n",
            [WEATHER, WRITE, FLAGS],
        ),
        (
            CALLS_BEGIN
            + f"{CALL_BEGIN}function{SEP}get_weather\n```json\n"
            + '{\n  "city": "Paris"\n}\n```\n'
            + CALL_END
            + "\n"
            + CALLS_END,
            "",
            [("get_weather", {"city": "Paris"})],
        ),
        (
            "Plain text with ```json fences``` and <｜ bars.",
            "Plain text with ```json fences``` and <｜ bars.",
            [],
        ),
    ],
    "deepseek-v3.1": [
        (v31(WEATHER), "", [WEATHER]),
        ("Sure." + v31(WRITE, FLAGS, WEATHER), "Sure.", [WRITE, FLAGS, WEATHER]),
        (v31(("set_flags", {})), "", [("set_flags", {})]),
    ],
    "deepseek-dsml": [
        (dsml(WEATHER), "\n\n", [WEATHER]),
        ("Doing both." + dsml(WRITE, FLAGS), "Doing both.\n\n", [WRITE, FLAGS]),
        (dsml(WEATHER, ("set_flags", {})), "\n\n", [WEATHER, ("set_flags", {})]),
        (dsml(FLAGS, WEATHER, block="tool_calls"), "\n\n", [FLAGS, WEATHER]),
    ],
}
ALL = [(f, *case) for f, cases in CASES.items() for case in cases]

#: (A reply that ends where only closing words were due is read by the engine for every
#: declared syntax: tests/test_engine_behaviours.py.)
NEAR: dict[str, list[str]] = {
    "deepseek-r1": [
        r1(WEATHER)[:60],
        v31(WEATHER),
        r1(WEATHER).replace("function", "tool", 1),
        r1(WEATHER).replace("```json", "```", 1),
        r1(WEATHER).replace("```" + CALL_END, CALL_END),
        r1(("get_weather", {"city": "Paris"})).replace('"Paris"}', '"Paris"'),
        r1(WEATHER).replace("get_weather", "get weather"),
        CALLS_BEGIN + f"{CALL_BEGIN}function{SEP}f\n```json\n[1, 2]\n```{CALL_END}{CALLS_END}",
        CALLS_BEGIN + f"{CALL_BEGIN}function{SEP}f\n```json\n{{}}\n``` x{CALL_END}{CALLS_END}",
        CALLS_BEGIN + CALLS_END,
        CALLS_BEGIN,
    ],
    "deepseek-v3.1": [
        v31(WEATHER)[:50],
        r1(WEATHER),
        v31(WEATHER).replace(SEP, "<｜tool_sep｜>"),
        v31(("get_weather", {"city": "Paris"})).replace("{", "[", 1),
        CALLS_BEGIN + f"{CALL_BEGIN}{SEP}{{}}{CALL_END}{CALLS_END}",
        CALLS_BEGIN + f"{CALL_BEGIN}f{SEP}{{}} trailing{CALL_END}{CALLS_END}",
        CALLS_BEGIN + f'{CALL_BEGIN}f{SEP}{{"a": NaN}}{CALL_END}{CALLS_END}',
    ],
    "deepseek-dsml": [
        dsml(WEATHER)[:-30],
        dsml(WEATHER).replace("</｜DSML｜function_calls>", "</｜DSML｜tool_calls>"),
        dsml(WEATHER).replace('string="false">3', 'string="false">three'),
        dsml(WEATHER).replace("invoke name", "call name", 1),
        dsml(("f", {"a": "x"})).replace("</｜DSML｜parameter>", "</｜DSML｜parameter>" * 2, 1),
        dsml(("f", {"a": "x", "b": "y"})).replace('name="b"', 'name="a"'),
        "\n\n<｜DSML｜function_calls>\n</｜DSML｜function_calls>",
        "<｜DSML｜parameter",
        "<｜DSML｜",
    ],
}


def ids(i: int) -> str:
    return f"id{i}"


def parse(family: str, text: str, tools: Any = TOOLS, **kw: Any) -> ParseResult:
    return get_family(family).parse(text, tools, make_id=ids, **kw)


def stream(family: str, chunks: list[str], tools: Any = TOOLS) -> list[Any]:
    s = get_family(family).stream(tools, make_id=ids)
    events: list[Any] = []
    for chunk in chunks:
        events += s.feed(chunk)
    return events + s.finish()


# ------------------------------------------------------------------ templates


CALLS = [
    ToolCall("call_one", "write_file", {"path": "src/a.py", "content": CODE}),
    ToolCall(
        "call_two",
        "set_flags",
        {"enabled": True, "tags": ["x", "y z"], "options": {"deep": {"n": [1, 2.5]}}},
    ),
]
PLAIN_TOOLS = json.loads(json.dumps(TOOLS))
del PLAIN_TOOLS[2]["parameters"]["properties"]["ratio"]

TEMPLATES = {
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "deepseek-r1",
    "llama-cpp-deepseek-r1.jinja": "deepseek-r1",
    "deepseek-ai-DeepSeek-V3.1.jinja": "deepseek-v3.1",
    "deepseek-ai-DeepSeek-V3.2.jinja": "deepseek-dsml",
    "deepseek-ai-DeepSeek-V4.jinja": "deepseek-dsml",
}


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_the_templates_own_calls_read_back(name: str) -> None:
    tpl = load_template(FIXTURES / name)
    assert detect_format(tpl).format == TEMPLATES[name]
    family = get_family(TEMPLATES[name])
    turn = {"role": "assistant", "content": None, "tool_calls": [c.to_openai() for c in CALLS]}
    user = {"role": "user", "content": "Write the file and set the flags."}
    text, opened = assistant_text(tpl, [user], [turn], PLAIN_TOOLS, call_ids=family.call_ids)
    result = family.parse(text, PLAIN_TOOLS, reasoning_open=opened)
    assert [(c.name, typed(c, PLAIN_TOOLS)) for c in result.calls] == [
        (c.name, c.arguments) for c in CALLS
    ]
    for call in result.calls:  # the values are the ones written: nothing left to type
        assert not call.text_values and not prepared(call, PLAIN_TOOLS, strict=True).repairs
        assert (call.name, call.arguments) in [(c.name, c.arguments) for c in CALLS]
    assert result.content.strip() == "" and not result.notices
    for other in OURS:  # and no other DeepSeek family reads them
        if other != family.name:
            assert parse(other, text, PLAIN_TOOLS).calls == []


def test_the_r1_distill_llama_template_is_r1() -> None:
    # It writes calls only for a turn whose content is None, and leaves a one-call block
    # without its closing marker: the probe also sends None, and R1's grammar ends a block
    # at the end of the turn after a complete call (tests/test_detect_more.py).
    tpl = load_template(FIXTURES / "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja")
    assert detect_format(tpl).format == "deepseek-r1"


# ------------------------------------------------------------------ replies


@pytest.mark.parametrize(("family", "reply", "content", "calls"), ALL)
def test_replies(family: str, reply: str, content: str, calls: list[Any]) -> None:
    result = parse(family, reply)
    assert result.content == content
    assert [(c.name, typed(c)) for c in result.calls] == calls
    for call in result.calls:
        assert json.loads(call.arguments_text) == call.arguments
        assert not call.text_values and (call.name, call.arguments) in calls
    assert not result.notices
    assert [c.id for c in result.calls] == [f"id{i}" for i in range(len(calls))]


def test_dsml_string_values_are_text_and_the_others_json() -> None:
    reply = (
        '<｜DSML｜tool_calls><｜DSML｜invoke name="f">'
        '<｜DSML｜parameter name="s" string="true">3</｜DSML｜parameter>'
        '<｜DSML｜parameter name="t" string="true"> two\nlines "q" </｜DSML｜parameter>'
        '<｜DSML｜parameter name="n" string="false">3</｜DSML｜parameter>'
        '<｜DSML｜parameter name="o" string="false">{"a": [true, null]}</｜DSML｜parameter>'
        "</｜DSML｜invoke></｜DSML｜tool_calls>"
    )
    (call,) = parse("deepseek-dsml", reply, None).calls
    assert call.arguments == {"s": "3", "t": ' two\nlines "q" ', "n": 3, "o": {"a": [True, None]}}
    assert json.loads(call.arguments_text) == call.arguments


def test_the_call_is_announced_before_its_arguments_end() -> None:
    for family, reply in [
        ("deepseek-r1", r1(WEATHER)),
        ("deepseek-v3.1", v31(WEATHER)),
        ("deepseek-dsml", dsml(WEATHER)),
    ]:
        cut = reply.index("Paris") + 2
        s = get_family(family).stream(TOOLS, make_id=ids)
        events = s.feed(reply[:cut])
        assert CallStart(0, "id0", "get_weather") in events, family
        assert any(isinstance(e, CallArgsDelta) for e in events), family
        assert not any(isinstance(e, CallEnd) for e in events), family
        assert all(e.text.isspace() for e in events if isinstance(e, TextDelta)), family


@pytest.mark.parametrize("family", OURS)
def test_thinking_is_reasoning_and_its_calls_are_not_read(family: str) -> None:
    call = BUILD[family](WEATHER)
    result = parse(family, f"<think>maybe {call}?</think>\n\n{call}")
    assert result.reasoning == f"maybe {call}?"
    assert [c.name for c in result.calls] == ["get_weather"]


# ------------------------------------------------------------------ cross-family


@pytest.mark.parametrize("family", OURS)
@pytest.mark.parametrize("other", THEIRS)
def test_ours_read_no_calls_from_the_others(family: str, other: str) -> None:
    for reply in ONE_CALL[other] + [r for r, _, _ in VALID[other]] + NEAR_MISSES[other]:
        result = parse(family, reply)
        assert result.calls == [] and result.content == reply, (family, reply)


@pytest.mark.parametrize("family", [*THEIRS, *OURS])
@pytest.mark.parametrize("other", OURS)
def test_no_other_family_reads_ours(family: str, other: str) -> None:
    if family == other:
        return
    for reply, _, _ in CASES[other]:
        result = parse(family, reply)
        assert result.calls == [], (family, reply)
        assert result.content.strip() == reply.strip()


# ------------------------------------------------------------------ near misses


NEAR_CASES = [(f, r) for f, rs in NEAR.items() for r in rs]


@pytest.mark.parametrize(("family", "reply"), NEAR_CASES)
def test_near_misses_stay_text_with_a_notice(family: str, reply: str) -> None:
    result = parse(family, reply)
    assert result.calls == []
    assert result.content == reply
    if family == "deepseek-dsml" or "<｜tool▁calls▁begin｜>" in reply:
        said = ("is not a call", "was not one")
        assert any(w in n for n in result.notices for w in said), reply


@pytest.mark.parametrize("attribute", ["", ' string="yes"'])
def test_a_dsml_value_whose_tag_does_not_say_its_type_is_text_typed_by_the_schema(
    attribute: str,
) -> None:
    """As for every syntax writing a name as an attribute: the value is text, typed by the
    tool's schema, another attribute read past and named; strict refuses."""
    reply = dsml(WEATHER).replace(' string="true"', attribute)
    (call,) = parse("deepseek-dsml", reply).calls
    assert call.arguments == {"city": "Paris", "days": 3} and call.text_values
    # no attribute is no repair (the value is text); another one is, which strict refuses
    assert len(parse("deepseek-dsml", reply, strict=True).calls) == (0 if attribute else 1)


# ------------------------------------------------------------------ streaming


STREAMED = [(f, r) for f, r, _, _ in ALL] + NEAR_CASES


# ------------------------------------------------------------------ limits


@pytest.mark.parametrize("family", OURS)
def test_a_reply_over_max_chars_raises(family: str) -> None:
    reply = BUILD[family](WEATHER)
    s = get_family(family).stream(TOOLS, max_chars=len(reply) - 1)
    s.feed(reply[:-1])
    with pytest.raises(LimitError):
        s.feed(reply[-1])
    with pytest.raises(LimitError):
        parse(family, reply, max_chars=10)


@pytest.mark.parametrize("family", OURS)
def test_deep_nesting_is_not_a_call_and_never_recurses(family: str) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    reply = BUILD[family](("set_flags", {"tags": []})).replace("[]", deep)
    result = parse(family, reply)
    assert result.calls == [] and result.content == reply


@pytest.mark.parametrize("family", OURS)
def test_a_very_long_name_is_not_a_call(family: str) -> None:
    reply = BUILD[family](("f" * 10_000, {}))
    result = parse(family, reply)
    assert result.calls == [] and result.content == reply
