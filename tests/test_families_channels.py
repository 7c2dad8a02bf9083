"""gpt-oss (harmony), Muse Glimmer and Kimi K3: replies made of messages on channels.

Each is read channel-aware: reasoning stays reasoning (calls are never read out of it), the
answer is text, calls are read from the call messages only, and no header reaches the text.
The cases come from llama.cpp's parser tests for these templates and from the published
templates' own renderings.
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

from .prepared import typed
from .replies import CODE, FLAGS, NEAR_MISSES, ONE_CALL, TOOLS, VALID, WEATHER, WRITE
from .test_formats import check_stream, parse

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"
MINE = ("gpt-oss", "glimmer", "kimi-k3")


def _fn(name: str, **props: str) -> dict[str, Any]:
    properties = {k: {"type": v} for k, v in props.items()}
    function = {"name": name, "parameters": {"properties": properties}}
    return {"type": "function", "function": function}


# The tools llama.cpp's cases declare.
LLAMA_TOOLS = [
    _fn("special_function", arg1="integer"),
    _fn("special_function_with_opt", arg1="integer", arg2="integer"),
    _fn("python", code="string"),
    _fn("edit", oldString="string", newString="string", replaceAll="boolean"),
]


_K3_EMPTY = "<|open|>response<|sep|><|close|>response<|sep|>"


# ------------------------------------------------------------------- writers


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def harmony(name: str, args: dict[str, Any], *, start: bool = True) -> str:
    head = "<|start|>assistant" if start else ""
    return (
        f"{head}<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>"
        f"{json.dumps(args, ensure_ascii=False)}<|call|>"
    )


def atem(name: str, args: dict[str, Any], *, start: bool = True) -> str:
    head = "<|start|>assistant" if start else ""
    params = "".join(
        f'<atem:parameter name="{k}">{_text(v)}</atem:parameter>\n' for k, v in args.items()
    )
    return (
        f'{head} to={name}<|message|><atem:function_calls>\n<atem:invoke name="{name}">\n'
        f"{params}</atem:invoke>\n</atem:function_calls><|eom|>"
    )


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, dict):
        return "object"
    return "string" if isinstance(value, str) else "array"


def k3(*calls: tuple[str, dict[str, Any]]) -> str:
    out = "<|open|>tools<|sep|>"
    for n, (name, args) in enumerate(calls, 1):
        out += f'<|open|>call tool="{name}" index="{n}"<|sep|>'
        for key, value in args.items():
            out += f'<|open|>argument key="{key}" type="{_kind(value)}"<|sep|>'
            out += f"{_text(value)}<|close|>argument<|sep|>"
        out += "<|close|>call<|sep|>"
    return out + "<|close|>tools<|sep|>"


K3_END = "<|close|>message<|sep|><|end_of_msg|>"

# ------------------------------------------------------------------- own cases

MY_VALID: dict[str, list[tuple[str, str, list[tuple[str, dict[str, Any]]]]]] = {
    "gpt-oss": [
        (harmony(*WEATHER, start=False), "", [WEATHER]),
        (" to=functions.set_flags<|channel|>commentary json<|message|>{}", "", [("set_flags", {})]),
        ("Plain text, no header.", "Plain text, no header.", []),
        (
            "<|channel|>analysis<|message|>plan<|end|>"
            + harmony(*WRITE)
            + harmony(*FLAGS)
            + "<|start|>assistant<|channel|>final<|message|>Done.<|return|>",
            "Done.",
            [WRITE, FLAGS],
        ),
        (
            '<|channel|>analysis<|message|>{"name": "get_weather", "arguments": {}} to=functions.x'
            "<|end|><|start|>assistant<|channel|>final<|message|>ok",
            "ok",
            [],
        ),
        (
            '<|channel|>commentary to=functions.get_weather json<|message|> {"city": "Paris"} \n'
            "<|call|>",
            "",
            [("get_weather", {"city": "Paris"})],
        ),
    ],
    "glimmer": [
        (atem(*WEATHER, start=False), "", [WEATHER]),
        (
            " to=self<|message|>plan<|eom|>"
            + atem(*WRITE)
            + atem(*FLAGS)
            + "<|start|>assistant to=user<|message|>Done.<|eot|>",
            "Done.",
            [WRITE, FLAGS],
        ),
        ("<|message|>No recipient: the answer.<|eot|>", "No recipient: the answer.", []),
        (atem(*WEATHER).replace("<|eom|>", "\n <|eot|>"), "", [WEATHER]),
        (
            ' to=set_flags<|message|><atem:function_calls><atem:invoke name="set_flags">'
            "</atem:invoke></atem:function_calls>",
            "",
            [("set_flags", {})],
        ),
    ],
    "kimi-k3": [
        ("<|close|>think<|sep|>" + _K3_EMPTY + k3(WEATHER) + K3_END, "", [WEATHER]),
        (k3(WEATHER) + "\n" + K3_END, "", [WEATHER]),
        (
            "<|open|>think<|sep|>plan<|close|>think<|sep|><|open|>response<|sep|>Both."
            "<|close|>response<|sep|>" + k3(WRITE, FLAGS) + K3_END,
            "Both.",
            [WRITE, FLAGS],
        ),
        (
            '<|open|>tools<|sep|><|open|>call tool="set_flags" index="1"<|sep|><|open|>json '
            'type="object"<|sep|>{"enabled": true, "tags": ["a", "b"], "options": {"k": [1, 2]}, '
            '"ratio": 0.5}<|close|>json<|sep|><|close|>call<|sep|><|close|>tools<|sep|>',
            "",
            [FLAGS],
        ),
        (
            '<|open|>tools<|sep|>\n<|open|>call tool="get_weather" index="1"<|sep|>\n'
            '<|open|>argument key="city"<|sep|>Paris<|close|>argument<|sep|>\n<|open|>argument '
            'key="days" type="integer"<|sep|> 3 <|close|>argument<|sep|>\n<|close|>call<|sep|>\n'
            "<|close|>tools<|sep|>",
            "",
            [WEATHER],
        ),
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
        assert call.text_values == (family == "glimmer")
    assert not result.notices
    assert len({c.id for c in result.calls}) == len(result.calls)
    assert "<|" not in result.content  # no header reaches the text


def test_values_are_verbatim_and_typed_by_the_grammar() -> None:
    (call,) = parse("glimmer", atem(*WRITE)).calls
    assert call.arguments["content"] == CODE
    (call,) = parse("kimi-k3", k3(WRITE)).calls
    assert call.arguments["content"] == CODE and not call.text_values
    # a string-typed value stays a string even when it reads as JSON; other types are JSON
    reply = (
        '<|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|><|open|>argument key="a" '
        'type="string"<|sep|>12<|close|>argument<|sep|><|open|>argument key="b" type="boolean"'
        "<|sep|>true<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>"
    )
    (call,) = parse("kimi-k3", reply).calls
    assert call.arguments == {"a": "12", "b": True}


def test_k3_attributes_are_unescaped() -> None:
    reply = k3(("get_weather", {"city": "x"})).replace('key="city"', 'key="a&quot;b&amp;c"')
    (call,) = parse("kimi-k3", reply).calls
    assert call.arguments == {'a"b&c': "x"}


def test_k3_reply_starts_in_the_section_the_prompt_opened() -> None:
    reply = "hmm<|close|>think<|sep|><|open|>response<|sep|>Hi<|close|>response<|sep|>"
    opened = parse("kimi-k3", reply, reasoning_open=True)
    assert (opened.reasoning, opened.content) == ("hmm", "Hi")
    # not told the prompt opened think: the first section is the answer's
    closed = parse("kimi-k3", reply)
    assert (closed.reasoning, closed.content) == ("", "hmmHi")


MY_NEAR_MISSES: dict[str, list[str]] = {
    "gpt-oss": [
        ' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Par',
        " to=functions.get_weather<|channel|>commentary json<|message|>not json<|call|>",
        " to=functions.get_weather<|channel|>commentary json<|message|>[1]<|call|>",
        ' to=functions.get_weather<|channel|>commentary json<|message|>{"a": NaN}<|call|>',
        " to=functions.get_weather<|channel|>commentary json<|message|>",
        " to=functions.get{weather}<|channel|>commentary<|message|>{}<|call|>",
        " to=functions.<|channel|>commentary<|message|>{}<|call|>",
        "<|start|>user<|message|>{}<|end|>",
        "<|channel|>commentary to=functions.f <|weird|><|message|>{}<|call|>",
        "<|channel|>commentary to=functions.get_weather",
        " to=functions.get_weather<|channel|>commentary json" + "x" * 600,
        " to=functions.f" + "x" * 600 + "<|end|>after<|start|>",
    ],
    "glimmer": [
        " to=get_weather<|message|>{}<|eom|>",
        ' to=get_weather<|message|><atem:function_calls>\n<atem:invoke name="other">\n'
        "</atem:invoke>\n</atem:function_calls><|eom|>",
        " to=get_weather<|message|><atem:function_calls>\n</atem:function_calls><|eom|>",
        ' to=get_weather<|message|><atem:function_calls>\n<atem:invoke name="get_weather">\n'
        '<atem:parameter name="city">Par',
        ' to=f<|message|><atem:function_calls><atem:invoke name="f"><atem:parameter name="a">1'
        '</atem:parameter><atem:parameter name="a">2</atem:parameter></atem:invoke>'
        "</atem:function_calls>",
        " to=get weather<|message|>x<|eom|>",
        "<|start|>tool get_weather<|message|>x<|eot|>",
        " to=get_weather",
    ],
    "kimi-k3": [
        "<|open|>tools<|sep|><|close|>tools<|sep|>",
        '<|open|>tools<|sep|><|open|>call index="1"<|sep|><|close|>call<|sep|>'
        "<|close|>tools<|sep|>",
        '<|open|>tools<|sep|><|open|>call tool="f" index=1<|sep|><|close|>call<|sep|>'
        "<|close|>tools<|sep|>",
        '<|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|><|open|>argument key="a" '
        'type="number"<|sep|>one<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>',
        '<|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|><|open|>argument key="a" '
        'type="string"<|sep|>x<|close|>argument<|sep|><|open|>argument key="a" type="string"'
        "<|sep|>y<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>",
        '<|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|><|open|>json type="object"'
        "<|sep|>[1]<|close|>json<|sep|><|close|>call<|sep|><|close|>tools<|sep|>",
        '<|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|><|open|>argument key="a" '
        'type="string"<|sep|>x',
        '<|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|>x<|close|>call<|sep|>',
        "<|open|>toolbox<|sep|>x",
        '<|open|>tools<|sep|><|open|>call tool="f"' + " " * 600 + "<|close|>call<|sep|>",
        "<|open|>tools",
    ],
}


@pytest.mark.parametrize(
    ("family", "reply"), [(f, r) for f, rs in MY_NEAR_MISSES.items() for r in rs]
)
def test_near_misses_are_text_with_a_notice(family: str, reply: str) -> None:
    result = parse(family, reply)
    assert result.calls == [] and result.reasoning == ""
    assert [n for n in result.notices if "not" in n]
    # the call's or the header's markup comes back as written, end tokens aside
    for token in ("<|call|>", "<|end|>", "<|eom|>", "<|eot|>"):
        reply = reply.replace(token, "")
    assert result.content == reply


# ------------------------------------------------------------------- cross-family

ALL_ONE_CALL = {
    **ONE_CALL,
    "gpt-oss": [harmony(*WEATHER, start=False), harmony(*WEATHER)],
    "glimmer": [atem(*WEATHER, start=False), atem(*WEATHER)],
    "kimi-k3": [k3(WEATHER), _K3_EMPTY + k3(WEATHER) + K3_END],
}


@pytest.mark.parametrize("family", sorted(ALL_ONE_CALL))
@pytest.mark.parametrize("other", sorted(ALL_ONE_CALL))
def test_cross_family_matrix(family: str, other: str) -> None:
    if family not in MINE and other not in MINE:
        return  # tests/test_formats.py covers those pairs
    for reply in ALL_ONE_CALL[other]:
        result = parse(family, reply)
        if family == other:
            assert [(c.name, typed(c)) for c in result.calls] == [WEATHER], reply
        else:
            assert result.calls == [], (family, reply)


@pytest.mark.parametrize("family", MINE)
def test_other_families_replies_are_no_calls(family: str) -> None:
    others = [r for _f, cases in VALID.items() for r, _, _ in cases]
    others += [r for rs in NEAR_MISSES.values() for r in rs]
    for reply in others:
        assert parse(family, reply).calls == [], reply


# ------------------------------------------------------------------- streaming

MY_REPLIES = [(f, r) for f, cases in MY_VALID.items() for r, _, _ in cases] + [
    (f, r) for f, rs in MY_NEAR_MISSES.items() for r in rs
]


@pytest.mark.parametrize("family", MINE)
def test_reply_size(family: str) -> None:
    s = get_family(family).stream(max_chars=100)
    s.feed(ALL_ONE_CALL[family][0][:50] + "x" * 50)
    with pytest.raises(LimitError):
        s.feed("y")


def test_huge_and_deep_inputs_are_text() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    reply = harmony("f", {}).replace("{}", '{"a": ' + deep + "}")
    result = parse("gpt-oss", reply)
    assert result.calls == [] and result.notices
    big = "y" * 200_000
    (call,) = parse("kimi-k3", k3(("f", {"a": big}))).calls
    assert call.arguments == {"a": big}
    result = parse("glimmer", " to=" + "n" * 10_000 + "<|message|>x")
    assert result.calls == [] and result.notices


# ------------------------------------------------------------------- templates

TEMPLATES = {
    "openai-gpt-oss-120b.jinja": "gpt-oss",
    "muse-glimmer.jinja": "glimmer",
    "Kimi-K3.jinja": "kimi-k3",
}
USER = {"role": "user", "content": "Weather in Paris, and the flags."}
TWO_CALLS = [
    ToolCall("call_1", "get_weather", {"city": "Paris", "days": 3}),
    ToolCall("call_2", "set_flags", {"enabled": False, "tags": ["x"], "options": {"n": None}}),
]


def _turn(tpl_name: str, turn: dict[str, Any]) -> tuple[str, str]:
    """What the template adds for ``turn`` after the generation prompt, uncut: the whole
    assistant turn, end tokens and all, and the prompt."""
    tpl = load_template(FIXTURES / tpl_name)
    prompt = tpl.render([USER], TOOLS, add_generation_prompt=True)
    full = tpl.render([USER, turn], TOOLS, add_generation_prompt=False)
    assert full.startswith(prompt)
    return full[len(prompt) :], prompt


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_template_detects_and_round_trips(name: str) -> None:
    tpl = load_template(FIXTURES / name)
    found = detect_format(tpl)
    assert found.format == TEMPLATES[name]
    family = get_family(found.format)
    calls = TWO_CALLS[:1] if name.startswith("openai") else TWO_CALLS  # one call a message
    turn = {"role": "assistant", "content": "", "tool_calls": [c.to_openai() for c in calls]}
    text, opened = assistant_text(tpl, [USER], [turn], TOOLS)
    result = family.parse(text, TOOLS, reasoning_open=opened)
    assert [(c.name, typed(c)) for c in result.calls] == [(c.name, c.arguments) for c in calls]
    assert result.content == "" and not result.notices
    check_stream(family.name, text, list(text), tools=TOOLS, reasoning_open=opened)


def test_gpt_oss_past_reasoning_renders_and_reads_back() -> None:
    # the template writes a past turn's reasoning from "thinking" (not "reasoning_content"),
    # as an analysis message before the call or the final answer
    call = TWO_CALLS[0]
    turn = {"role": "assistant", "thinking": "Look it up.", "tool_calls": [call.to_openai()]}
    text, _ = _turn("openai-gpt-oss-120b.jinja", turn)
    assert text.startswith("<|channel|>analysis<|message|>Look it up.<|end|>")
    result = parse("gpt-oss", text)
    assert result.reasoning == "Look it up." and result.content == ""
    assert [(c.name, c.arguments) for c in result.calls] == [(call.name, call.arguments)]
    answer = {"role": "assistant", "thinking": "Easy.", "content": "Sunny."}
    result = parse("gpt-oss", _turn("openai-gpt-oss-120b.jinja", answer)[0])
    assert (result.reasoning, result.content, result.calls) == ("Easy.", "Sunny.", [])


def test_glimmer_past_reasoning_renders_and_reads_back() -> None:
    turn = {
        "role": "assistant",
        "reasoning_content": "Look it up.",
        "content": "",
        "tool_calls": [c.to_openai() for c in TWO_CALLS],
    }
    text, _ = _turn("muse-glimmer.jinja", turn)
    assert text.startswith(" to=self<|message|>Look it up.<|eom|><|start|>assistant to=get")
    result = parse("glimmer", text)
    assert result.reasoning == "Look it up." and result.content == ""
    assert [(c.name, typed(c)) for c in result.calls] == [(c.name, c.arguments) for c in TWO_CALLS]


def test_k3_past_reasoning_renders_and_reads_back() -> None:
    turn = {"role": "assistant", "reasoning_content": "Look it up.", "content": "Sunny."}
    text, prompt = _turn("Kimi-K3.jinja", turn)
    assert prompt.endswith("<|open|>think<|sep|>")  # the prompt opens the think section
    result = parse("kimi-k3", text, reasoning_open=True)
    assert (result.reasoning, result.content, result.calls) == ("Look it up.", "Sunny.", [])


# ------------------------------------------------------------------- any text

_PIECES = [
    "<|start|>",
    "assistant",
    "<|channel|>",
    "analysis",
    "final",
    "commentary",
    " to=",
    "functions.get_weather",
    "get_weather",
    "self",
    "user",
    "<|constrain|>json",
    "<|message|>",
    "<|end|>",
    "<|call|>",
    "<|return|>",
    "<|eom|>",
    "<|eot|>",
    "<atem:function_calls>",
    "</atem:function_calls>",
    '<atem:invoke name="',
    "</atem:invoke>",
    '<atem:parameter name="',
    "</atem:parameter>",
    '">',
    "<|open|>",
    "<|close|>",
    "<|sep|>",
    "think",
    "tools",
    'call tool="get_weather" index="1"',
    'argument key="city" type="string"',
    "argument",
    "call",
    "<|end_of_msg|>",
    '{"city": "Paris"}',
    "{",
    "}",
    '"',
    "\n",
    " ",
    "x",
]


@settings(max_examples=300, deadline=None)
@given(
    family=st.sampled_from(MINE),
    pieces=st.lists(st.sampled_from(_PIECES) | st.text(max_size=4), max_size=40),
    opened=st.booleans(),
    data=st.data(),
)
def test_any_text_reads_the_same_however_it_is_cut(
    family: str, pieces: list[str], opened: bool, data: st.DataObject
) -> None:
    reply = "".join(pieces)
    result = parse(family, reply, reasoning_open=opened)
    for call in result.calls:
        assert isinstance(call.arguments, dict)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(reply)), max_size=8)))
    chunks = [reply[a:b] for a, b in zip([0, *cuts], [*cuts, len(reply)], strict=True)]
    check_stream(family, reply, chunks, reasoning_open=opened)


_ATEM = (
    '<atem:function_calls>\n<atem:invoke name="get_weather">\n'
    '<atem:parameter name="city">Paris</atem:parameter>\n</atem:invoke>\n</atem:function_calls>'
)


@pytest.mark.parametrize(
    ("reply", "content", "reasoning"),
    [
        # Ollama's parser tests: a well-formed block under a fumbled header
        (f"<|message|>{_ATEM}<|eom|>", "", ""),
        (f" to=user<|message|>{_ATEM}<|eot|>", "", ""),
        (f" to=atem:function_calls<|message|>{_ATEM}<|eom|>", "", ""),
        (
            f" to=self<|message|>let me look<|eom|><|start|>assistant<|message|>{_ATEM}",
            "",
            "let me look",
        ),
        (f"<|message|>{_ATEM}<|start|>assistant to=user<|message|>Done<|eot|>", "Done", ""),
    ],
)
def test_glimmer_reads_a_call_block_in_a_message_not_addressed_to_a_tool(
    reply: str, content: str, reasoning: str
) -> None:
    result = parse("glimmer", reply)
    assert [(c.name, typed(c)) for c in result.calls] == [("get_weather", {"city": "Paris"})]
    assert (result.content, result.reasoning) == (content, reasoning)
    assert any("not addressed to it" in n for n in result.notices)
    assert parse("glimmer", reply, strict=True).calls == []
    for k in range(len(reply) + 1):
        check_stream("glimmer", reply, [reply[:k], reply[k:]])


def test_glimmer_a_message_to_the_user_is_its_text_however_it_starts() -> None:
    for reply, content in [
        (" to=user<|message|>Hello there<|eot|>", "Hello there"),
        (f" to=user<|message|>Here is how: {_ATEM}<|eot|>", f"Here is how: {_ATEM}"),
        ("<|message|><atem:function_calls", "<atem:function_calls"),
    ]:
        result = parse("glimmer", reply)
        assert (result.calls, result.content) == ([], content), reply
    # a block in a stray message names declared tools only
    undeclared = f" to=user<|message|>{_ATEM.replace('get_weather', 'nope')}<|eot|>"
    assert parse("glimmer", undeclared).calls == []
