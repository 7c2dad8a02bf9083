"""Each family reads exactly its own grammar, one-shot and streaming alike."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire import (
    CallAbort,
    CallArgsDelta,
    CallEnd,
    CallStart,
    LimitError,
    TextDelta,
    assemble,
    family_names,
    get_family,
)
from toolwire.errors import ArgumentsError, FormatError
from toolwire.formats.base import ParseResult

from .family_cases import text_kept
from .prepared import prepared, typed
from .replies import NEAR_MISSES, ONE_CALL, TOOLS, VALID


def ids(i: int) -> str:
    return f"id{i}"


def parse(family: str, text: str, tools: Any = TOOLS, **kw: Any) -> ParseResult:
    return get_family(family).parse(text, tools, make_id=ids, **kw)


def stream_events(family: str, chunks: list[str], tools: Any = TOOLS, **kw: Any) -> list[Any]:
    s = get_family(family).stream(tools, make_id=ids, **kw)
    events: list[Any] = []
    for chunk in chunks:
        events += s.feed(chunk)
    events += s.finish()
    return events


VALID_CASES = [(f, *case) for f, cases in VALID.items() for case in cases]


def test_registry() -> None:
    # the first four first: a family added later never takes a template from them
    assert family_names()[:4] == ["qwen-xml", "hermes", "llama3", "mistral"]
    for name in family_names():
        fam = get_family(name)
        assert fam.name == name and fam.label and fam.markers
    assert get_family("mistral").call_ids == "alnum9"
    with pytest.raises(FormatError, match="unknown tool format"):
        get_family("harmony")


@pytest.mark.parametrize(("family", "reply", "content", "calls"), VALID_CASES)
def test_valid_replies(family: str, reply: str, content: str, calls: list[Any]) -> None:
    result = parse(family, reply)
    assert result.content == content
    # typed once, by the argument pipeline, the calls are the ones written
    assert [(c.name, typed(c)) for c in result.calls] == calls
    for call in result.calls:
        assert json.loads(call.arguments_text) == call.arguments
        if family == "qwen-xml":  # the grammar writes text: the parser gives text
            assert call.text_values and all(isinstance(v, str) for v in call.arguments.values())
        else:  # JSON as written is the arguments
            assert not call.text_values
            assert (call.name, call.arguments) in calls
    assert not result.notices
    assert len({c.id for c in result.calls}) == len(result.calls)


def test_mistral_keeps_the_models_call_id() -> None:
    reply = VALID["mistral"][1][0]
    assert [c.id for c in parse("mistral", reply).calls] == ["a1b2c3d4e", "id1"]


@pytest.mark.parametrize("family", sorted(ONE_CALL))
@pytest.mark.parametrize("other", sorted(ONE_CALL))
def test_cross_family_matrix(family: str, other: str) -> None:
    for reply in ONE_CALL[other]:
        result = parse(family, reply)
        if family == other:
            assert [c.name for c in result.calls] == ["get_weather"], reply
            assert typed(result.calls[0]) == {"city": "Paris", "days": 3}
        else:
            assert result.calls == [], (family, reply)
            assert result.content == reply  # nothing lost


@pytest.mark.parametrize(("family", "reply"), [(f, r) for f, rs in NEAR_MISSES.items() for r in rs])
def test_near_misses_are_text(family: str, reply: str) -> None:
    result = parse(family, reply)
    assert result.calls == []
    assert result.content == reply


def test_llama3_untagged_json_for_the_user_with_known_tools() -> None:
    reply = '{"name": "Bob", "parameters": {"age": 3}}'
    assert parse("llama3", reply).calls == []
    # Without tools there is nothing to tell it from a call; tagged, it is a call.
    assert [c.name for c in parse("llama3", reply, tools=None).calls] == ["Bob"]
    assert [c.name for c in parse("llama3", "<|python_tag|>" + reply).calls] == ["Bob"]


def test_llama3_type_function_accepted() -> None:
    reply = '{"type": "function", "name": "get_weather", "parameters": {"city": "Oslo"}}'
    assert parse("llama3", reply).calls[0].arguments == {"city": "Oslo"}


def test_llama3_text_streams_unless_the_reply_opens_as_a_call() -> None:
    llama3 = get_family("llama3")
    assert llama3.stream(TOOLS).feed("Hello") == [TextDelta("Hello")]
    s = llama3.stream(TOOLS, make_id=ids)
    events = s.feed('{"name": "get_weather", "parameters": {"ci')
    assert events == [CallStart(0, "id0", "get_weather"), CallArgsDelta(0, '{"ci')]
    # An untagged object naming no declared tool is text as soon as the name is read.
    s = llama3.stream(TOOLS, make_id=ids)
    text = [e.text for e in s.feed('{"name": "x", ') if isinstance(e, TextDelta)]
    assert text == ['{"name": "x", ']


class TestUntyped:
    """Parsers never type a value: the arguments are what the model wrote, and typing them is
    the argument pipeline's, where every change is named and ``strict`` refuses it."""

    def test_strings_for_non_string_parameters_stay_as_written(self) -> None:
        reply = (
            '<tool_call>\n{"name": "set_flags", "arguments": {"enabled": "true", '
            '"tags": "[\\"a\\"]", "ratio": "0.25", "options": "{bad"}}\n</tool_call>'
        )
        call = parse("hermes", reply).calls[0]
        assert call.arguments == {
            "enabled": "true",
            "tags": '["a"]',
            "ratio": "0.25",
            "options": "{bad",
        }
        with pytest.raises(ArgumentsError, match="options"):  # "{bad" is no object
            prepared(call)

    def test_hermes_number_in_a_string_is_typed_by_the_pipeline_with_a_repair(self) -> None:
        tools = [{"name": "f", "parameters": {"properties": {"n": {"type": "integer"}}}}]
        reply = '<tool_call>\n{"name": "f", "arguments": {"n": "3.0"}}\n</tool_call>'
        call = parse("hermes", reply, tools=tools).calls[0]
        assert call.arguments == {"n": "3.0"} and call.arguments_text == '{"n": "3.0"}'
        done = prepared(call, tools)
        assert done.arguments == {"n": 3} and done.repairs == ("number-from-string",)
        with pytest.raises(ArgumentsError):
            prepared(call, tools, strict=True)

    def test_string_parameters_are_never_read_as_json(self) -> None:
        reply = (
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "3", "days": "2"}}'
            "\n</tool_call>"
        )
        call = parse("hermes", reply).calls[0]
        assert call.arguments == {"city": "3", "days": "2"}
        assert typed(call) == {"city": "3", "days": 2}

    def test_xml_values_are_text(self) -> None:
        reply = (
            "<tool_call>\n<function=set_flags>\n<parameter=enabled>\nFalse\n</parameter>\n"
            '<parameter=tags>\n["x", "y"]\n</parameter>\n<parameter=ratio>\nnull\n'
            "</parameter>\n<parameter=options>\nnot json\n</parameter>\n"
            "<parameter=unknown>\n42\n</parameter>\n</function>\n</tool_call>"
        )
        call = parse("qwen-xml", reply).calls[0]
        assert call.arguments == {
            "enabled": "False",
            "tags": '["x", "y"]',
            "ratio": "null",
            "options": "not json",
            "unknown": "42",
        }
        assert call.text_values
        assert json.loads(call.arguments_text) == call.arguments
        with pytest.raises(ArgumentsError, match="options"):  # text that is no object
            prepared(call)
        fits = replace(call, arguments_text=call.arguments_text.replace('"not json"', "{}"))
        done = prepared(fits)
        assert done.arguments == {
            "enabled": False,
            "tags": ["x", "y"],
            "ratio": None,
            "options": {},
        }
        assert done.repairs == ("python-literals",) and done.dropped == ("unknown",)

    def test_xml_python_false_is_a_named_repair_that_strict_refuses(self) -> None:
        tools = [{"name": "f", "parameters": {"properties": {"flag": {"type": "boolean"}}}}]
        reply = (
            "<tool_call>\n<function=f>\n<parameter=flag>\nFalse\n</parameter>\n</function>\n"
            "</tool_call>"
        )
        call = parse("qwen-xml", reply, tools=tools).calls[0]
        assert call.arguments == {"flag": "False"} and call.text_values
        done = prepared(call, tools)
        assert done.arguments == {"flag": False} and done.repairs == ("python-literals",)
        with pytest.raises(ArgumentsError, match="flag"):
            prepared(call, tools, strict=True)

    def test_xml_integer_is_the_grammar_not_a_repair_even_strict(self) -> None:
        tools = [{"name": "f", "parameters": {"properties": {"n": {"type": "integer"}}}}]
        reply = (
            "<tool_call>\n<function=f>\n<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>"
        )
        call = parse("qwen-xml", reply, tools=tools).calls[0]
        assert call.arguments == {"n": "3"} and call.arguments_text == '{"n": "3"}'
        for strict in (False, True):
            done = prepared(call, tools, strict=strict)
            assert done.arguments == {"n": 3} and done.repairs == ()

    def test_xml_arguments_stream_as_the_json_of_their_text(self) -> None:
        reply = (
            "<tool_call>\n<function=f>\n<parameter=n>\n3\n</parameter>\n"
            '<parameter=s>\nsay "hi"\n</parameter>\n</function>\n</tool_call>'
        )
        events = stream_events("qwen-xml", list(reply), tools=None)
        deltas = "".join(e.text for e in events if isinstance(e, CallArgsDelta))
        assert deltas == '{"n": "3", "s": "say \\"hi\\""}'
        (end,) = [e for e in events if isinstance(e, CallEnd)]
        assert json.loads(deltas) == end.call.arguments == {"n": "3", "s": 'say "hi"'}

    def test_xml_string_verbatim_multiline(self) -> None:
        value = "  line one\n\n  line two  \n"
        reply = (
            "<tool_call>\n<function=write_file>\n<parameter=path>\nx\n</parameter>\n"
            f"<parameter=content>\n{value}\n</parameter>\n</function>\n</tool_call>"
        )
        assert parse("qwen-xml", reply).calls[0].arguments["content"] == value

    def test_xml_windows_line_endings(self) -> None:
        reply = (
            "<tool_call>\r\n<function=write_file>\r\n<parameter=path>\r\na.py\r\n</parameter>\r\n"
            "<parameter=content>\r\nx = 1\r\ny = 2\r\n</parameter>\r\n</function>\r\n</tool_call>"
        )
        assert parse("qwen-xml", reply).calls[0].arguments == {
            "path": "a.py",
            "content": "x = 1\r\ny = 2",
        }
        for k in range(len(reply) + 1):
            check_stream("qwen-xml", reply, [reply[:k], reply[k:]])

    def test_the_tools_change_no_value(self) -> None:
        reply = (
            "<tool_call>\n<function=f>\n<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>"
        )
        tools = [{"name": "f", "parameters": {"properties": {"n": {"type": "integer"}}}}]
        for declared in (None, tools):
            assert parse("qwen-xml", reply, tools=declared).calls[0].arguments == {"n": "3"}
        reply = '<tool_call>\n{"name": "f", "arguments": {"n": "3"}}\n</tool_call>'
        for declared in (None, tools):
            assert parse("hermes", reply, tools=declared).calls[0].arguments == {"n": "3"}


class TestReasoning:
    def test_calls_inside_thinking_are_reasoning(self) -> None:
        inner = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>'
        reply = f"<think>\nMaybe {inner}?\n</think>\n\n" + VALID["hermes"][0][0]
        result = parse("hermes", reply)
        assert result.reasoning == f"\nMaybe {inner}?\n"
        assert [c.arguments["city"] for c in result.calls] == ["Paris"]
        assert result.content == ""

    def test_block_opened_by_the_prompt(self) -> None:
        reply = "I should look.\n</think>\n\nIt is sunny."
        result = parse("qwen-xml", reply, reasoning_open=True)
        assert (result.reasoning, result.content) == ("I should look.\n", "It is sunny.")
        # The same text read without the open block is all content.
        assert parse("qwen-xml", reply).content == reply

    def test_mistral_think_markers(self) -> None:
        reply = "[THINK]call it[/THINK]" + VALID["mistral"][0][0]
        result = parse("mistral", reply)
        assert result.reasoning == "call it" and len(result.calls) == 2

    def test_unclosed_thinking_is_all_reasoning(self) -> None:
        result = parse("hermes", "<think>still thinking <tool_call>")
        assert result.reasoning == "still thinking <tool_call>" and not result.calls

    def test_think_later_in_the_reply_is_text(self) -> None:
        assert parse("hermes", "Hi <think>x</think>").content == "Hi <think>x</think>"


class TestLimits:
    def test_reply_size(self) -> None:
        s = get_family("hermes").stream(max_chars=100)
        s.feed("x" * 100)
        with pytest.raises(LimitError):
            s.feed("y")

    @pytest.mark.parametrize("family", ["hermes", "llama3", "mistral"])
    def test_deep_nesting_is_not_a_call_and_never_recurses(self, family: str) -> None:
        deep = "[" * 100_000 + "]" * 100_000
        reply = {
            "hermes": f'<tool_call>{{"name": "f", "arguments": {{"a": {deep}}}}}</tool_call>',
            "llama3": f'{{"name": "get_weather", "parameters": {{"a": {deep}}}}}',
            "mistral": f'[TOOL_CALLS]f[ARGS]{{"a": {deep}}}',
        }[family]
        result = parse(family, reply)
        assert result.calls == [] and result.content == reply

    def test_huge_numbers_are_not_a_crash(self) -> None:
        reply = '<tool_call>{"name": "f", "arguments": {"a": ' + "9" * 5000 + "}}</tool_call>"
        result = parse("hermes", reply)
        assert result.calls == [] and result.content == reply


# ----------------------------------------------------------------------------- streaming

ALL_REPLIES = [(f, r) for f, r, _, _ in VALID_CASES] + [
    (f, r) for f, rs in NEAR_MISSES.items() for r in rs
]


def check_stream(family: str, reply: str, chunks: list[str], **kw: Any) -> None:
    whole = parse(family, reply, **kw)
    events = stream_events(family, chunks, **kw)
    assert assemble(events) == whole, chunks
    started: dict[int, str] = {}
    args: dict[int, list[str]] = {}
    for event in events:
        if isinstance(event, CallStart):
            assert event.index not in started
            started[event.index] = event.id
            args[event.index] = []
        elif isinstance(event, CallArgsDelta):
            assert event.index in started
            args[event.index].append(event.text)
        elif isinstance(event, (CallEnd, CallAbort)):
            assert event.index in started
            if isinstance(event, CallEnd):
                assert event.call.id == started[event.index]
                assert "".join(args[event.index]).strip() == event.call.arguments_text
        elif isinstance(event, TextDelta):
            assert event.text
    if not whole.notices:  # every call read: not even part of a marker reached the text
        text_deltas = [e.text for e in events if isinstance(e, TextDelta)]
        for marker in get_family(family).markers:
            head = marker[:2]
            if marker != "{" and head not in whole.content:
                assert not any(head in t for t in text_deltas)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), case=st.sampled_from(ALL_REPLIES))
def test_stream_random_chunkings(data: st.DataObject, case: tuple[str, str]) -> None:
    family, reply = case
    cuts = sorted(data.draw(st.lists(st.integers(0, len(reply)), max_size=12)))
    chunks = [reply[a:b] for a, b in zip([0, *cuts], [*cuts, len(reply)], strict=True)]
    check_stream(family, reply, chunks)


_PIECES = [
    "<tool_call>",
    "</tool_call>",
    "<function=",
    "<parameter=",
    "</parameter>",
    "</function>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "[CALL_ID]",
    "<|python_tag|>",
    "<think>",
    "</think>",
    '{"name": "get_weather", ',
    '"arguments": ',
    '"parameters": ',
    "{",
    "}",
    "[",
    "]",
    '"',
    "\\",
    ",",
    ":",
    ";",
    "\n",
    " ",
    "get_weather",
    ">",
    "3",
    "x",
]


@settings(max_examples=400, deadline=None)
@given(
    family=st.sampled_from(["qwen-xml", "hermes", "llama3", "mistral"]),
    pieces=st.lists(st.sampled_from(_PIECES) | st.text(max_size=4), max_size=40),
    data=st.data(),
    opened=st.booleans(),
)
def test_any_text_reads_the_same_however_it_is_cut(
    family: str, pieces: list[str], data: st.DataObject, opened: bool
) -> None:
    reply = "".join(pieces)
    result = parse(family, reply, reasoning_open=opened)  # only documented errors: none here
    if not result.calls and not opened and "<think>" not in reply and "[THINK]" not in reply:
        assert result.content == text_kept(family, reply)  # nothing is lost but markup
    cuts = sorted(data.draw(st.lists(st.integers(0, len(reply)), max_size=8)))
    chunks = [reply[a:b] for a, b in zip([0, *cuts], [*cuts, len(reply)], strict=True)]
    check_stream(family, reply, chunks, reasoning_open=opened)
