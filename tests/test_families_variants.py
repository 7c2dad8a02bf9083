"""The variants peers' parsers meet in real replies, read by Kimi K2/K3, MiniMax M1/M2, Llama 3,
Glimmer and GigaChat: each one is either the grammar, a tolerance named in a notice, or text
with a notice. Inputs are the peers' cases (llama.cpp's test-chat.cpp, vLLM's parser tests)."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire import get_family
from toolwire.events import CallAbort, CallStart
from toolwire.formats.base import ParseResult

from .test_formats import check_stream, parse, stream_events

# --------------------------------------------------------------------------- Kimi K2

K2_SPACED = (
    "I'll help you check the weather. <|tool_calls_section_begin|> <|tool_call_begin|>\n"
    'functions.get_weather:0 <|tool_call_argument_begin|> {"city": "Beijing"} '
    "<|tool_call_end|> <|tool_call_begin|>\nfunctions.get_weather:1 "
    '<|tool_call_argument_begin|> {"city": "Shanghai"} <|tool_call_end|> '
    "<|tool_calls_section_end|>"
)
K2_BAD_ID = K2_SPACED.replace("get_weather:0", "invalid_get_weather.0")
K2_BAD_JSON = K2_SPACED.replace('{"city": "Beijing"}', '{"city": "Beijing"')
K2_THINK_OPEN = (
    "<think>I need to call two functions<|tool_calls_section_begin|><|tool_call_begin|>"
    'functions.special_function:0<|tool_call_argument_begin|>{"arg1": 1}<|tool_call_end|>'
    "<|tool_call_begin|>functions.python:1<|tool_call_argument_begin|>"
    '{"code": "print(\'hey\')"}<|tool_call_end|><|tool_calls_section_end|>'
)
K2_THINK_BARE = (
    "<think>I need to call two functions<|tool_call_begin|>functions.special_function:0"
    '<|tool_call_argument_begin|>{"arg1": 1}<|tool_call_begin|>functions.python:1'
    '<|tool_call_argument_begin|>{"code": "print(\'hey\')"}'
)
K2_BARE = (
    "<|tool_call_begin|>functions.execute_command:0<|tool_call_argument_begin|>"
    '{"command": "ls -lah", "cwd": "/home/user/development/exllamav3", "timeout": 10}'
)


def _calls(result: ParseResult) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.arguments) for c in result.calls]


def _codes(family: str, reply: str, **kw: Any) -> list[str]:
    from toolwire.events import Notice

    return [e.code for e in stream_events(family, [reply], **kw) if isinstance(e, Notice)]


def test_kimi_blanks_between_the_tokens_are_skipped() -> None:
    result = parse("kimi-k2", K2_SPACED)
    assert _calls(result) == [
        ("get_weather", {"city": "Beijing"}),
        ("get_weather", {"city": "Shanghai"}),
    ]
    assert [c.id for c in result.calls] == ["functions.get_weather:0", "functions.get_weather:1"]
    assert result.content == "I'll help you check the weather. "
    assert not result.notices


@pytest.mark.parametrize("reply", [K2_BAD_ID, K2_BAD_JSON])
def test_kimi_one_broken_call_stays_text_and_the_section_reads_on(reply: str) -> None:
    result = parse("kimi-k2", reply)
    assert _calls(result) == [("get_weather", {"city": "Shanghai"})]
    broken = reply[reply.index("<|tool_call_begin|>") : reply.index("<|tool_call_end|>") + 17]
    assert result.content == "I'll help you check the weather. " + broken
    assert len(result.notices) == 1 and "is not a call" in result.notices[0]


def test_kimi_a_broken_announced_call_is_aborted() -> None:
    events = stream_events("kimi-k2", [K2_BAD_JSON])
    started = [e.name for e in events if isinstance(e, CallStart)]
    aborted = [e.index for e in events if isinstance(e, CallAbort)]
    assert started == ["get_weather", "get_weather"] and aborted == [0]


def test_kimi_a_section_of_broken_calls_only_is_text_once() -> None:
    reply = K2_BAD_JSON.replace('{"city": "Shanghai"}', '{"city": ')
    result = parse("kimi-k2", reply)
    assert result.calls == [] and result.content == reply


def test_kimi_thinking_left_open_ends_at_the_call_tokens() -> None:
    result = parse("kimi-k2", K2_THINK_OPEN)
    assert _calls(result) == [
        ("special_function", {"arg1": 1}),
        ("python", {"code": "print('hey')"}),
    ]
    assert result.reasoning == "I need to call two functions" and result.content == ""
    assert _codes("kimi-k2", K2_THINK_OPEN) == ["recovered-call-ended-thinking"]


def test_kimi_calls_without_their_section() -> None:
    result = parse("kimi-k2", K2_THINK_BARE)
    assert _calls(result) == [
        ("special_function", {"arg1": 1}),
        ("python", {"code": "print('hey')"}),
    ]
    assert result.reasoning == "I need to call two functions" and result.content == ""
    # each call without its section named, as for every syntax whose opening words may be
    # left out (the second opens a block of its own)
    assert _codes("kimi-k2", K2_THINK_BARE) == [
        "recovered-call-ended-thinking",
        "recovered-unopened-call",
        "recovered-unopened-call",
    ]
    result = parse("kimi-k2", K2_BARE)
    assert _calls(result) == [
        (
            "execute_command",
            {"command": "ls -lah", "cwd": "/home/user/development/exllamav3", "timeout": 10},
        )
    ]
    assert result.content == "" and result.calls[0].id == "functions.execute_command:0"


def test_kimi_bare_calls_end_where_text_begins() -> None:
    reply = "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}<|tool_call_end|> Done."
    result = parse("kimi-k2", reply)
    assert _calls(result) == [("f", {})] and result.content == " Done."


def test_kimi_closed_thinking_and_thinking_in_a_prompt() -> None:
    closed = K2_THINK_OPEN.replace("functions<|tool_calls", "functions</think><|tool_calls")
    result = parse("kimi-k2", closed)
    assert len(result.calls) == 2 and not result.notices
    # the prompt opened the thinking: the call token ends it all the same
    result = parse("kimi-k2", K2_THINK_OPEN.removeprefix("<think>"), reasoning_open=True)
    assert len(result.calls) == 2 and result.reasoning == "I need to call two functions"
    # thinking that only mentions the tokens' words stays reasoning
    result = parse("kimi-k2", "<think>the tool_call_begin token</think>Hi")
    assert result.reasoning == "the tool_call_begin token" and result.content == "Hi"


def test_kimi_a_broken_bare_call_stays_text_after_the_good_one() -> None:
    good = '<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{"a": 1}'
    for broken in (
        "<|tool_call_begin|>functions.g.0<|tool_call_argument_begin|>{}",
        "<|tool_call_begin|>functions.g:1<|tool_call_argument_begin|>{oops}<|tool_call_end|>",
    ):
        result = parse("kimi-k2", good + broken)
        assert _calls(result) == [("f", {"a": 1})] and result.content == broken
        assert "opening with <|tool_call_begin|>" in result.notices[-1]


@pytest.mark.parametrize(
    "reply",
    [
        "<|tool_call_begin|>hello world",
        "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{not json}",
        '<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{"a": 1',
        "<|tool_call_begin|>functions.f<|tool_call_argument_begin|>{}",
        "<|tool_call_begin|>" + "x" * 5000,
    ],
)
def test_kimi_bare_near_misses_are_text(reply: str) -> None:
    result = parse("kimi-k2", reply)
    assert result.calls == [] and result.content == reply
    assert [n for n in result.notices if "is not a call" in n]


# --------------------------------------------------------------------------- MiniMax M2

M2_ATTRS = (
    '<minimax:tool_call><invoke name="test_func" extra="ignored"><parameter name="arg1" '
    'type="string">value1</parameter><parameter name="arg2" description="(e.g. a>b)">value2'
    "</parameter></invoke></minimax:tool_call>"
)


def test_minimax_other_attributes_are_read_past_and_named() -> None:
    result = parse("minimax", M2_ATTRS)
    assert _calls(result) == [("test_func", {"arg1": "value1", "arg2": "value2"})]
    assert _codes("minimax", M2_ATTRS) == ["recovered-attributes-ignored"] * 3
    assert result.content == ""


@pytest.mark.parametrize(
    "tag",
    [
        '<invoke name="f" x=y>',
        '<invoke name="f" "x">',
        '<invoke name="f"x="1">',
        '<invoke name="f" x="1>',
    ],
)
def test_minimax_malformed_attributes_are_text(tag: str) -> None:
    reply = (
        f'<minimax:tool_call>{tag}<parameter name="a">1</parameter></invoke></minimax:tool_call>'
    )
    result = parse("minimax", reply)
    assert result.calls == [] and result.content == reply and result.notices


def test_minimax_huge_attributes_are_text() -> None:
    reply = '<minimax:tool_call><invoke name="f" d="' + "x" * 100_000 + '"></invoke>'
    result = parse("minimax", reply)
    assert result.calls == [] and result.content == reply and result.notices


# --------------------------------------------------------------------------- MiniMax M1

M1_LINES = (
    '<tool_calls>\n{"name": "valid_tool", "arguments": {"city": "Seattle"}}\n'
    '{invalid json here}\n{"name": "missing_args"}\n'
    '{"name": "another_valid_tool", "arguments": {"param": "value"}}\n</tool_calls>'
)
M1_UNCLOSED = '<tool_calls>\n{"name": "get_current_weather", "arguments": {"city": "Boston"}}'


def test_minimax_m1_a_broken_line_stays_text() -> None:
    result = parse("minimax-m1", M1_LINES)
    assert _calls(result) == [
        ("valid_tool", {"city": "Seattle"}),
        ("another_valid_tool", {"param": "value"}),
    ]
    assert result.content == '{invalid json here}\n{"name": "missing_args"}\n'
    assert _codes("minimax-m1", M1_LINES) == ["call-not-read", "call-not-read"]


def test_minimax_m1_complete_calls_before_the_reply_ends() -> None:
    result = parse("minimax-m1", M1_UNCLOSED)
    assert _calls(result) == [("get_current_weather", {"city": "Boston"})]
    # named as the engine names it for every syntax
    assert _codes("minimax-m1", M1_UNCLOSED) == ["recovered-unclosed-tag"]
    cut = parse("minimax-m1", M1_UNCLOSED + "\n</tool_c")  # the block's own closer, cut short
    assert len(cut.calls) == 1 and cut.content == ""


@pytest.mark.parametrize(
    "reply",
    [
        M1_UNCLOSED[:-2],  # the call itself is cut short
        M1_UNCLOSED + "\nThanks!",  # prose after the calls, in a block never closed
        '<tool_calls>\n{"name": "f"}\n</tool_calls>',  # its only line is no call
    ],
)
def test_minimax_m1_near_misses_are_text(reply: str) -> None:
    result = parse("minimax-m1", reply)
    assert result.calls == [] and result.content == reply and result.notices


# --------------------------------------------------------------------------- Kimi K3

K3_TOOLS = "<|open|>tools<|sep|>"
K3_END = "<|close|>call<|sep|><|close|>tools<|sep|>"


def _k3_call(tool: str, key: str, value: str = "raw") -> str:
    return (
        f'{K3_TOOLS}<|open|>call tool="{tool}" index="1"<|sep|><|open|>argument key="{key}" '
        f'type="string"<|sep|>{value}<|close|>argument<|sep|>{K3_END}'
    )


@pytest.mark.parametrize(
    ("tool", "key", "name", "arg"),
    [
        ("a&amp;b&quot;c", "k&amp;q", 'a&b"c', "k&q"),
        ("calc<beta", "foo<bar", "calc<beta", "foo<bar"),
    ],
)
def test_kimi_k3_names_are_quoted_attributes(tool: str, key: str, name: str, arg: str) -> None:
    result = parse("kimi-k3", _k3_call(tool, key))
    assert _calls(result) == [(name, {arg: "raw"})] and result.content == ""


def test_kimi_k3_blanks_around_a_tag_and_a_blank_name() -> None:
    result = parse("kimi-k3", "<|open|> response <|sep|>answer<|close|> response <|sep|>")
    assert result.content == "answer" and not result.notices
    result = parse("kimi-k3", _k3_call("a b", "x"))
    assert result.calls == [] and result.notices


def test_kimi_k3_an_unclosed_tools_section_keeps_its_complete_calls() -> None:
    reply = "<|open|>response<|sep|>Hi" + _k3_call("calc", "x", "1").removesuffix(
        "<|close|>tools<|sep|>"
    )
    result = parse("kimi-k3", reply)
    assert _calls(result) == [("calc", {"x": "1"})] and result.content == "Hi"
    assert _codes("kimi-k3", reply) == ["recovered-block-unclosed"]
    cut = '<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="calc" index="1"'
    result = parse("kimi-k3", cut)
    assert result.calls == [] and "call tool=" in result.content and result.notices


# ----------------------------------------------------------- Llama 3, Glimmer, GigaChat


def test_llama3_arguments_key_is_its_own() -> None:
    # what most JSON grammars write and Llama models often answer with, vLLM and SGLang
    # read as Llama 3's own: read strict or not, with no notice, its arguments streamed
    reply = '{"name": "searchTool", "arguments": {"query": "test"}}'
    for strict in (False, True):
        result = parse("llama3", reply, tools=None, strict=strict)
        assert _calls(result) == [("searchTool", {"query": "test"})] and not result.notices
    assert result.calls[0].arguments_text == '{"query": "test"}'
    both = '{"name": "f", "arguments": {}, "parameters": {}}'
    assert parse("llama3", both, tools=None).calls == []


@pytest.mark.parametrize(
    "reply",
    [
        'Here is the result: {"name": "getOpenIncidentsTool", "parameters": {}} More?',
        '{"name": "searchTool", "parameters": {"query": "test1"}} Would you like to know more?',
    ],
)
def test_llama3_json_in_prose_is_text(reply: str) -> None:
    result = parse("llama3", reply, tools=None)
    assert result.calls == [] and result.content == reply


GLIMMER_ECHO = (
    'to=self<|message|>I could call <atem:invoke name="evil.fn"><atem:parameter name="x">1'
    "</atem:parameter></atem:invoke> but I will not.<|eom|><|start|>assistant to=user<|message|>"
    "The answer is 42.<|eot|>"
)


def test_glimmer_an_invoke_in_reasoning_is_reasoning() -> None:
    result = parse("glimmer", GLIMMER_ECHO)
    assert result.calls == [] and result.content == "The answer is 42."
    assert "evil.fn" in result.reasoning and not result.notices


def test_gigachat_call_words_without_the_tokens_are_text() -> None:
    reply = 'function call{"name": "manage_user_memory", "arguments": {}}'
    result = parse("gigachat", reply)
    assert result.calls == [] and result.content == reply


# --------------------------------------------------------------------------- streaming

SPLIT = [
    ("kimi-k2", K2_BAD_JSON, {}),
    ("kimi-k2", K2_BAD_ID, {}),
    ("kimi-k2", K2_THINK_OPEN, {}),
    ("kimi-k2", K2_THINK_BARE, {}),
    ("kimi-k2", K2_BARE + " and then text", {}),
    ("kimi-k2", K2_BARE + "<|tool_call_begin|>functions.g.0<|tool_call_argument_begin|>{}", {}),
    ("minimax", M2_ATTRS, {}),
    ("minimax-m1", M1_LINES, {}),
    ("minimax-m1", M1_UNCLOSED + "\n</tool_c", {}),
    ("kimi-k3", _k3_call("a&amp;b&quot;c", "foo<bar") + "<|close|>message<|sep|>", {}),
    ("kimi-k3", "<|open|> response <|sep|>Hi" + _k3_call("calc", "x")[:-21], {}),
    ("llama3", '{"name": "searchTool", "arguments": {"query": "test"}}', {"tools": None}),
    ("glimmer", GLIMMER_ECHO, {}),
]


@pytest.mark.parametrize(("family", "reply", "kw"), SPLIT)
def test_every_split_point_gives_the_same_events(
    family: str, reply: str, kw: dict[str, Any]
) -> None:
    for k in range(len(reply) + 1):
        check_stream(family, reply, [reply[:k], reply[k:]], **kw)
    check_stream(family, reply, list(reply), **kw)


def _k3_unclosed() -> str:
    return "<|open|>response<|sep|>Hi" + _k3_call("calc", "x", "1").removesuffix(
        "<|close|>tools<|sep|>"
    )


@pytest.mark.parametrize(
    ("family", "reply", "kw"),
    [
        ("kimi-k2", K2_BARE, {}),
        ("kimi-k2", K2_THINK_BARE, {}),
        ("minimax", M2_ATTRS, {}),
        ("minimax-m1", M1_UNCLOSED, {}),
    ],
)
def test_strict_refuses_each_tolerance(family: str, reply: str, kw: dict[str, Any]) -> None:
    loose = get_family(family).parse(reply, kw.get("tools"))
    assert loose.calls and loose.notices
    strict = get_family(family).parse(reply, kw.get("tools"), strict=True)
    assert strict.calls == []
    assert not [e for e in stream_events(family, [reply], strict=True, **kw) if _recovered(e)]


def test_strict_refuses_the_unclosed_kimi_k3_section() -> None:
    assert get_family("kimi-k3").parse(_k3_unclosed()).calls
    assert get_family("kimi-k3").parse(_k3_unclosed(), strict=True).calls == []


def _recovered(event: object) -> bool:
    from toolwire.events import Notice

    return isinstance(event, Notice) and event.code.startswith("recovered-")
