"""LFM2's tagged call list, the bare Python call list (Llama 4), and Gemma 4: each reads exactly
its own grammar, from real template renderings and llama.cpp's own cases for these models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire import LimitError, detect_format, get_family, load_template
from toolwire.formats.detect import assistant_text
from toolwire.formats.dialects import GEMMA, PYTHON, Dialect
from toolwire.formats.pyliteral import LiteralReader
from toolwire.messages import ToolCall

from .family_cases import text_kept
from .family_checks import check_foreign
from .prepared import typed
from .replies import CODE, NEAR_MISSES, ONE_CALL, TOOLS, VALID
from .replies import FLAGS as FLAGS_CALL
from .test_formats import check_stream, parse

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"
MINE = ("lfm2", "pythonic", "gemma4")

Call = tuple[str, dict[str, Any]]


def _tool(name: str, **props: Any) -> dict[str, Any]:
    params = {"type": "object", "properties": props}
    return {"type": "function", "function": {"name": name, "parameters": params}}


# The tools llama.cpp's cases declare (their schemas matter only for declared names).
LLAMA_TOOLS = [
    _tool("special_function", arg1={"type": "integer"}),
    _tool("special_function_with_opt", arg1={"type": "integer"}, arg2={"type": "integer"}),
    _tool("get_time", city={"type": "string"}),
    _tool("get_weather", city={"type": "string"}),
    _tool("toggle", enabled={"type": "boolean"}),
    _tool("set_nullable", value={"type": ["string", "null"]}),
    _tool("set_config", config={"type": "object"}),
    _tool("Calendar.create_event", title={"type": "string"}),
    _tool("python", code={"type": "string"}),
    _tool("empty_args"),
    _tool("amount", orig={"type": "number"}),
    _tool("todo_list", todos={"type": "array"}),
]


S = "<|tool_call_start|>"

E = "<|tool_call_end|>"

Q = '<|"|>'

C = "<|tool_call>call:"

CE = "<tool_call|>"


# ------------------------------------------------------------------ hand-written replies

WEATHER: Call = ("get_weather", {"city": "Paris", "days": 3})
WRITE: Call = ("write_file", {"path": "a.py", "content": CODE})
FLAGS: Call = ("set_flags", {"enabled": True, "tags": ["a", "b"], "options": {"k": [1, 2]}})


def py_call(name: str, args: dict[str, Any]) -> str:
    return name + "(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"


def lfm2(*calls: Call) -> str:
    return S + "[" + ", ".join(py_call(*c) for c in calls) + "]" + E


def pythonic(*calls: Call) -> str:
    return "[" + ", ".join(py_call(*c) for c in calls) + "]"


def _gemma_value(v: Any) -> str:
    if isinstance(v, str):
        return Q + v + Q
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{_gemma_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(map(_gemma_value, v)) + "]"
    return json.dumps(v)


def gemma4(*calls: Call) -> str:
    return "".join(f"{C}{name}{_gemma_value(args)}{CE}" for name, args in calls)


MY_VALID: dict[str, list[tuple[str, str, list[Call]]]] = {
    "lfm2": [
        (lfm2(WEATHER), "", [WEATHER]),
        ("Both:\n" + lfm2(WRITE, FLAGS) + "\nDone.", "Both:\n\nDone.", [WRITE, FLAGS]),
        (S + " [ get_weather( city = 'Paris' , days = 3 , ) , ] \n" + E, "", [WEATHER]),
        (
            S + "[write_file(path='''a.py''', content=\"\"\"x = 'y'\n\"\"\")]" + E,
            "",
            [("write_file", {"path": "a.py", "content": "x = 'y'\n"})],
        ),
        (lfm2(WEATHER) + lfm2(FLAGS), "", [WEATHER, FLAGS]),
    ],
    "pythonic": [
        (pythonic(WEATHER), "", [WEATHER]),
        ("\n  " + pythonic(WRITE, FLAGS) + "\n", "", [WRITE, FLAGS]),
        ("<|python_start|>" + pythonic(WEATHER) + "<|python_end|>", "", [WEATHER]),
        ("<think>the weather</think>\n" + pythonic(WEATHER), "", [WEATHER]),
        (
            "[\n  get_weather(city='Paris', days=3),\n  set_flags(),\n]",
            "",
            [WEATHER, ("set_flags", {})],
        ),
    ],
    "gemma4": [
        (gemma4(WEATHER), "", [WEATHER]),
        ("Writing.\n" + gemma4(WRITE, FLAGS), "Writing.\n", [WRITE, FLAGS]),
        (f"<|channel>thought\nplan<channel|>{gemma4(WEATHER)}", "", [WEATHER]),
        (f"{C}get_weather{{{Q}city{Q}:{Q}Paris{Q}, days: 3}} {CE}", "", [WEATHER]),
        (
            gemma4(("set_flags", {"options": {"o": None}})),
            "",
            [("set_flags", {"options": {"o": None}})],
        ),
    ],
}

# Never a call, and nothing that looked like one: text, no notice.
PLAIN: dict[str, list[str]] = {
    "pythonic": [
        "[link text](url) and more",
        "[Wikipedia](https://www.wikipedia.org)",
        "[1] A footnote.",
        "[1, 2, 3]",
        '["a", "b"]',
        "[]",
        "[get_weather]",
        "[get_weather](https://example.com)",
        "[get_weather (city='Paris')]",
        "Sure: [get_weather(city='Paris')]",
        "<|python_st",
        "   ",
        "",
    ],
    # (its list without the token, where the reply starts, is read as a named repair:
    # test_lfm2_list_without_its_token_is_read_as_a_repair; in prose it is text)
    "lfm2": ["Sure: [get_weather(city='Paris')] then more", "<|tool_call_sta", "[1, 2]"],
    "gemma4": ["call:get_weather{city:1}", "<|tool_cal", "<|channel"],
}

# Looks like a call and is not one: text, with a call-not-read notice.
MY_NEAR_MISSES: dict[str, list[str]] = {
    "lfm2": [
        S + "[]" + E,
        # (the list closed and the reply ended before its closing token: read, as for every
        # declared syntax: tests/test_engine_behaviours.py)
        S + "[get_weather(city='Paris')] x" + E,
        S + "[get_weather('Paris')]" + E,
        S + "[get_weather(city='Paris', city='Lyon')]" + E,
        S + "[get weather(city='Paris')]" + E,
        S + "[get_weather(city='Par",
        S + "[get_weather(city='\\x4')]" + E,
        S + "[get_weather(days=1e999)]" + E,
        S + "[get_weather(days=" + "1" * 100 + ")]" + E,
        S + "[get_weather(city={1: 'a'})]" + E,
        S + "[get_weather(city=r'a')]" + E,
        S + "get_weather(city='Paris')" + E,
        S,
    ],
    "pythonic": [
        "[get_weather(city='Paris')]Done.",  # (set apart, it is read: test_families_round3b)
        "[get_weather(city='Paris')][set_flags()]",
        "[get_weather('Paris')]",
        "[unknown_tool(a=1)]",
        "[get_weather(city='Paris'), unknown_tool()]",
        "[get_weather(city='Par",
        "[get_weather(city='Paris'",
        # text after <|python_end|> is read under a notice: tests/test_families_round3b.py
        # (the list closed, the reply ended in its end tag: read, the turn's end closing it)
        "<|python_start|>print('hi')",  # the family's token, no list after it: named
    ],
    # (a call the reply ended in after its mapping closed is read by the engine for every
    # declared syntax: tests/test_engine_behaviours.py)
    "gemma4": [
        f"{C}get_weather{{city:{Q}Par",
        f"{C}get_weather{{city:Paris}}{CE}",
        f"{C}get_weather{{city:{Q}Paris{Q},city:{Q}Lyon{Q}}}{CE}",
        f"{C}get_weather[1]{CE}",
        f"{C}get weather{{}}{CE}",
        f"{C}{{}}{CE}",
        f"<|tool_call>get_weather{{}}{CE}",
        f"{C}get_weather{{}}x{CE}",
        f"{C}get_weather{{days:1,}}{CE}",
        f"{C}get_weather{{days:NaN}}{CE}",
        "<|tool_call>",
    ],
}


@pytest.mark.parametrize(
    ("family", "reply", "content", "calls"),
    [(f, *case) for f, cases in MY_VALID.items() for case in cases],
)
def test_valid_replies(family: str, reply: str, content: str, calls: list[Call]) -> None:
    result = parse(family, reply)
    assert result.content == content
    assert [(c.name, c.arguments) for c in result.calls] == calls  # JSON values, untyped
    assert [(c.name, typed(c)) for c in result.calls] == calls
    for call in result.calls:
        assert json.loads(call.arguments_text) == call.arguments
        assert not call.text_values
    assert not result.notices
    assert len({c.id for c in result.calls}) == len(result.calls)


def test_thinking_is_reasoning() -> None:
    result = parse("gemma4", f"<|channel>thought\nI'll call {gemma4(WEATHER)}<channel|>Hi")
    assert (result.content, result.calls) == ("Hi", [])
    assert result.reasoning == "I'll call " + gemma4(WEATHER)
    result = parse("pythonic", "<think>" + pythonic(WEATHER) + "</think>Hi")
    assert (result.content, result.calls) == ("Hi", [])


def test_gemma4_channel_tokens_inside_a_string_are_text() -> None:
    (call,) = parse("gemma4", gemma4(("write_file", {"content": "a<|channel>b<channel|>c"}))).calls
    assert call.arguments == {"content": "a<|channel>b<channel|>c"}


def test_gemma4_unclosed_thinking_is_all_reasoning() -> None:
    result = parse("gemma4", f"<|channel>thought\nstill thinking {C}get_wea")
    assert (result.content, result.calls) == ("", [])
    assert result.reasoning == f"still thinking {C}get_wea"


@pytest.mark.parametrize(("family", "reply"), [(f, r) for f, rs in PLAIN.items() for r in rs])
def test_plain_text_is_text_without_a_notice(family: str, reply: str) -> None:
    result = parse(family, reply)
    assert (result.content, result.calls, result.notices) == (reply, [], [])


@pytest.mark.parametrize(
    ("family", "reply"), [(f, r) for f, rs in MY_NEAR_MISSES.items() for r in rs]
)
def test_near_misses_are_text_with_a_notice(family: str, reply: str) -> None:
    result = parse(family, reply)
    assert result.calls == []
    assert result.content == reply
    if not get_family(family).markers[0].startswith(reply):  # more than a cut-off marker
        assert [n for n in result.notices if "not a call" in n]


def test_pythonic_reads_only_declared_tools_when_tools_are_known() -> None:
    reply = "[unknown_tool(a=1)]"
    assert parse("pythonic", reply).calls == []
    (call,) = parse("pythonic", reply, None).calls  # no tools given: any well-formed name
    assert (call.name, call.arguments) == ("unknown_tool", {"a": 1})
    assert parse("pythonic", reply, []).calls == []  # no tools declared: none is a call


def test_pythonic_without_tools_still_refuses_links() -> None:
    for reply in PLAIN["pythonic"]:
        assert parse("pythonic", reply, None).calls == []


# ------------------------------------------------------------------ the literal reader


def _read(dialect: Dialect, text: str) -> tuple[Any, str, str]:
    out: list[str] = []
    reader = LiteralReader(dialect, out.append)
    end = reader.feed(text, 0)
    assert reader.done or reader.problem or end == len(text) or len(text) - end < 12
    return (reader.value if reader.done else None), reader.problem, "".join(out)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("'a\\'b'", "a'b"),
        ('"tab\\there"', "tab\there"),
        ("'\\x41\\u00e9\\U0001F600\\101\\0'", "Aé😀A\x00"),
        ("'\\ud83d\\ude00'", "😀"),
        ("'back\\\\slash \\d'", "back\\slash \\d"),
        ("'line\\\ncontinued'", "linecontinued"),
        ("'raw\nnewline'", "raw\nnewline"),
        ("'''a ' '' b'''", "a ' '' b"),
        ("['', \"\"]", ["", ""]),
        (
            "[1, -2, +3, 1.5, .5, 2e3, True, False, None, null]",
            [1, -2, 3, 1.5, 0.5, 2000.0, True, False, None, None],
        ),
        ("{'a': {'b': [[], {}]}}", {"a": {"b": [[], {}]}}),
        ("[1, 2,]", [1, 2]),
    ],
)
def test_python_literals(text: str, value: Any) -> None:
    got, problem, text_out = _read(PYTHON, text)
    assert (got, problem) == (value, "")
    assert json.loads(text_out) == value


@pytest.mark.parametrize(
    "text",
    [
        "'\\x4g'",
        "{1: 2}",
        "{'a' 1}",
        "[1 2]",
        "nan",
        "1e999",
        "--1",
        "{'a': 1, 'a': 2}",
        "[,]",
        "@",
    ],
)
def test_python_non_literals(text: str) -> None:
    assert _read(PYTHON, text + " ")[1]


def test_gemma_literals() -> None:
    value, problem, text = _read(GEMMA, f"{{a:{Q}x{Q},{Q}b c{Q}:[1,true,None],d:{{}}}}")
    assert (value, problem) == ({"a": "x", "b c": [1, True, None], "d": {}}, "")
    assert json.loads(text) == value
    assert _read(GEMMA, "[1,]")[1] and _read(GEMMA, "'x'")[1] and _read(GEMMA, "True ")[1]


@pytest.mark.parametrize("dialect", [PYTHON, GEMMA])
def test_deep_nesting_fails_at_the_limit_without_recursion(dialect: Dialect) -> None:
    assert _read(dialect, "[" * 100 + "]" * 100)[0] is not None
    assert "deeper" in _read(dialect, "[" * 101 + "]" * 101)[1]
    assert "deeper" in _read(dialect, "[" * 1_000_000)[1]


def test_huge_values_are_read_or_refused_never_raised() -> None:
    long = "x" * 2_000_000
    assert parse("lfm2", lfm2(("write_file", {"content": long}))).calls[0].arguments == {
        "content": long
    }
    reply = S + "[f(a=" + "[" * 50_000 + ")]" + E
    result = parse("lfm2", reply)
    assert result.calls == [] and result.content == reply and result.notices
    name = "n" * 100_000
    for family, reply in [
        ("lfm2", f"{S}[{name}()]{E}"),
        ("gemma4", f"{C}{name}{{}}{CE}"),
        ("pythonic", f"[{name}()]"),
    ]:
        result = parse(family, reply, None)
        assert result.calls == [] and result.content == reply


@pytest.mark.parametrize("family", MINE)
def test_reply_size(family: str) -> None:
    s = get_family(family).stream(max_chars=100)
    s.feed(_one(family)[:50].ljust(100, "x"))
    with pytest.raises(LimitError):
        s.feed("y")


# ------------------------------------------------------------------ cross-family


def _one(family: str) -> str:
    return {"lfm2": lfm2, "pythonic": pythonic, "gemma4": gemma4}[family](WEATHER)


@pytest.mark.parametrize("family", MINE)
def test_other_families_replies_are_no_calls(family: str) -> None:
    others = [r for f, cases in VALID.items() for r, _, _ in cases]
    others += [r for rs in NEAR_MISSES.values() for r in rs]
    others += [r for rs in ONE_CALL.values() for r in rs]
    others += [_one(f) for f in MINE if f != family]
    for reply in others:
        check_foreign(family, reply)  # (none, or another's body as a named repair only)


# ------------------------------------------------------------------ streaming

MY_REPLIES = (
    [(f, r) for f, cases in MY_VALID.items() for r, _, _ in cases]
    + [(f, r) for f, rs in MY_NEAR_MISSES.items() for r in rs]
    + [(f, r) for f, rs in PLAIN.items() for r in rs]
)


def test_arguments_stream_while_a_string_is_written() -> None:
    from toolwire import CallArgsDelta, CallStart

    s = get_family("lfm2").stream(TOOLS)
    events = s.feed(S + "[write_file(content='first part")
    assert any(isinstance(e, CallStart) for e in events)
    assert (
        "".join(e.text for e in events if isinstance(e, CallArgsDelta)) == '{"content": "first part'
    )


def test_llama_cpp_partial_call_streams_its_name_and_arguments_so_far() -> None:
    from toolwire import CallArgsDelta, CallStart

    s = get_family("lfm2").stream(LLAMA_TOOLS)
    events = s.feed(f"{S}[special_function(arg1=")
    assert [e.name for e in events if isinstance(e, CallStart)] == ["special_function"]
    assert "".join(e.text for e in events if isinstance(e, CallArgsDelta)) == '{"arg1": '
    s = get_family("gemma4").stream(LLAMA_TOOLS)
    events = s.feed(f"{C}get_time{{city:{Q}Lon")
    assert [e.name for e in events if isinstance(e, CallStart)] == ["get_time"]
    assert "".join(e.text for e in events if isinstance(e, CallArgsDelta)) == '{"city": "Lon'


_PIECES = [
    *(S, E, Q, C, CE, "<|channel>", "<channel|>", "thought", "<|python_start|>", "<|python_end|>"),
    *("get_weather", "city", "days", "3", "True", "null", "x"),
    *"[]()=,'\"\\\n :{}",
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
    if not result.calls and "<think>" not in reply and "channel" not in reply:
        assert result.content == text_kept(family, reply)  # nothing is lost but markup
    cuts = sorted(data.draw(st.lists(st.integers(0, len(reply)), max_size=8)))
    chunks = [reply[a:b] for a, b in zip([0, *cuts], [*cuts, len(reply)], strict=True)]
    check_stream(family, reply, chunks)


# ------------------------------------------------------------------ real templates

TEMPLATES = {
    "LFM2.5-8B-A1B.jinja": "lfm2",
    "google-gemma-4-31B-it.jinja": "gemma4",
    "google-gemma-4-31B-it-interleaved.jinja": "gemma4",
}
TWO_CALLS = [
    ToolCall("call_1", "get_weather", {"city": "Paris", "days": 3}),
    ToolCall(
        "call_2", "set_flags", {"enabled": True, "tags": ["x", "y z"], "options": {"k": None}}
    ),
]
USER = {"role": "user", "content": "Weather in Paris, and set the flags."}


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_template_round_trip(name: str) -> None:
    tpl = load_template(FIXTURES / name)
    found = detect_format(tpl)
    assert found.format == TEMPLATES[name]
    family = get_family(found.format)
    turn = {"role": "assistant", "content": "", "tool_calls": [c.to_openai() for c in TWO_CALLS]}
    text, opened = assistant_text(tpl, [USER], [turn], TOOLS, call_ids=family.call_ids)
    result = family.parse(text, TOOLS, reasoning_open=opened)
    assert [(c.name, c.arguments) for c in result.calls] == [
        (c.name, c.arguments) for c in TWO_CALLS
    ]
    assert result.content.strip() == "" and not result.notices
    check_stream(family.name, text, list(text), tools=TOOLS, reasoning_open=opened)


def test_gemma4_interleaved_thinking_round_trip() -> None:
    tpl = load_template(FIXTURES / "google-gemma-4-31B-it-interleaved.jinja")
    turn = {
        "role": "assistant",
        "content": "",
        "reasoning_content": "Paris first.",
        "tool_calls": [TWO_CALLS[0].to_openai()],
    }
    # the model's own turn, as the template writes it when thinking is on (the generation
    # prompt then ends at the turn's start, not after an empty thought)
    rendered = tpl.render([USER, turn], TOOLS, add_generation_prompt=False)
    text = rendered.rsplit("<|turn>model\n", 1)[1].split("<turn|>")[0]
    assert text.startswith("<|channel>thought")
    result = get_family("gemma4").parse(text, TOOLS)
    assert result.reasoning.strip() == "Paris first."
    assert [(c.name, c.arguments) for c in result.calls] == [
        (TWO_CALLS[0].name, TWO_CALLS[0].arguments)
    ]


def test_gemma4_reply_that_starts_inside_thinking() -> None:
    result = parse("gemma4", f"more thought<channel|>Hi{gemma4(WEATHER)}", reasoning_open=True)
    assert (result.reasoning, result.content) == ("more thought", "Hi")
    assert [(c.name, c.arguments) for c in result.calls] == [WEATHER]


def test_gemma4_prompt_closes_an_empty_thought_and_ends_turns_with_its_tokens() -> None:
    tpl = load_template(FIXTURES / "google-gemma-4-31B-it.jinja")
    prompt = tpl.render([USER], TOOLS, add_generation_prompt=True)
    assert prompt.endswith("<|turn>model\n<|channel>thought\n<channel|>")
    found = detect_format(tpl)
    assert found.call_text == f"{C}get_weather{{city:{Q}Paris{Q},days:3}}{CE}"
    assert not found.reasoning_open


def test_flags_sample_reads_back_typed() -> None:
    (call,) = parse("lfm2", lfm2(FLAGS_CALL)).calls
    assert typed(call) == FLAGS_CALL[1]


@pytest.mark.parametrize(
    ("reply", "content"),
    [
        ("[get_weather(city='Paris')]", ""),
        ("I will look.\n[get_weather(city='Paris')]", "I will look.\n"),
        ('[{"name": "get_weather", "arguments": {"city": "Paris"}}]', ""),
    ],
)
def test_lfm2_list_without_its_token_is_read_as_a_repair(reply: str, content: str) -> None:
    """LFM2 writes its list without <|tool_call_start|> (Ollama's parser tests): read where
    the reply starts or as its last block, calls to declared tools only, named; strict and
    an undeclared tool keep it text."""
    got = parse("lfm2", reply)
    assert [(c.name, c.arguments) for c in got.calls] == [("get_weather", {"city": "Paris"})]
    assert got.content == content
    assert any("without the family's opening <|tool_call_start|>" in n for n in got.notices)
    assert parse("lfm2", reply, strict=True).calls == []
    assert parse("lfm2", reply.replace("get_weather", "unknown_tool")).calls == []
    for k in range(len(reply) + 1):
        check_stream("lfm2", reply, [reply[:k], reply[k:]])
