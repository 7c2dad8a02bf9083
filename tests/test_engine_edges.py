"""Where the engine's later readings stop: each one reads its case and nothing around it.

A tool output's opener in the reply's own words, a leading call followed by a tagged one, a
Glimmer answer that shows a call's markup, the turn's end token, a Markdown fence after a
Command R+ action, a repair told only for a block that is read, a words block's repairs told
once, a closer after prose, and LFM2's bare list with no tools known. Each is read whole and
at every split point.
"""

from __future__ import annotations

from typing import Any

from toolwire import get_family
from toolwire.events import CallEnd, Notice
from toolwire.formats.base import assemble
from toolwire.formats.words import Words

from .replies import TOOLS
from .test_engine_behaviours import _events, _every_split

_SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    },
}
_TOOLS: list[Any] = [*TOOLS, _SEARCH]


def _codes(name: str, reply: str, tools: Any = _TOOLS) -> list[str]:
    family = get_family(name)
    return [e.code for e in _events(family, tools, [reply], False) if isinstance(e, Notice)]


def test_a_tool_output_opener_in_the_reply_s_words_keeps_them_and_the_calls_after() -> None:
    family = get_family("hermes")
    prose = "The template wraps results in <tool_response> tags.\n\n"
    call = '<tool_call>\n{"name": "search", "arguments": {"q": "x"}}\n</tool_call>'
    for reply, content in [(prose + call, prose), ("See <tool_response> there.", None)]:
        result = assemble(_every_split(family, _TOOLS, reply, False))
        assert result.content == (content if content is not None else reply)
        assert [c.name for c in result.calls] == (["search"] if content else [])
        assert "ignored-tool-response" not in _codes("hermes", reply)


def test_a_leading_call_ends_before_a_later_tagged_call() -> None:
    family = get_family("llama3")
    reply = (
        '{"name": "get_weather", "parameters": {"city": "P"}}\n\nNow searching. '
        '<|python_tag|>{"name": "search", "parameters": {"q": "x"}}'
    )
    events = _every_split(family, _TOOLS, reply, False)
    assert [c.name for c in assemble(events).calls] == ["get_weather", "search"]
    assert [e.index for e in events if isinstance(e, CallEnd)] == [0, 1]


def test_a_glimmer_answer_showing_a_call_s_markup_is_its_text() -> None:
    family = get_family("glimmer")
    for reply, content in [
        (" to=user<|message|><atem:function_calls>oops<|eot|>", "<atem:function_calls>oops"),
        (
            ' to=user<|message|><atem:function_calls>\n<atem:invoke name="nope">\n'
            "</atem:invoke>\n</atem:function_calls><|eot|>",
            '<atem:function_calls>\n<atem:invoke name="nope">\n</atem:invoke>\n'
            "</atem:function_calls>",
        ),
    ]:
        result = assemble(_every_split(family, _TOOLS, reply, False))
        assert (result.calls, result.content) == ([], content)
        assert "call-not-read" not in _codes("glimmer", reply)


def test_the_turn_s_end_token_is_no_echoed_closer() -> None:
    reply = '<function=search>{"q": "a"}</function><|eom_id|>'
    assert "recovered-echoed-markup" not in _codes("functionary-v3.1", reply)
    assert [c.name for c in get_family("functionary-v3.1").parse(reply, _TOOLS).calls] == ["search"]


def test_a_markdown_fence_after_a_command_r_plus_action_is_text() -> None:
    family = get_family("command-r-plus")
    fence = "```python\nprint(1)\n```"
    reply = 'Action: ```json\n[{"tool_name": "search", "parameters": {"q": "a"}}]\n```\n' + fence
    result = assemble(_every_split(family, _TOOLS, reply, False))
    assert [c.name for c in result.calls] == ["search"]
    assert result.content.strip() == fence
    assert "recovered-echoed-markup" not in _codes("command-r-plus", reply)


def test_a_repair_is_told_only_for_a_block_that_is_read() -> None:
    reply = '<tool_call>{"name": "search", "parameters": {"q": "a"}} oops {'
    codes = _codes("hermes", reply)
    assert "recovered-arguments-key" not in codes and "call-not-read" in codes
    assert get_family("hermes").parse(reply, _TOOLS).calls == []


def test_a_words_block_s_repairs_are_told_once_and_only_when_every_call_is_read() -> None:
    a = '{"name": "search", "arguments": {"q": "a",}}'
    b = '{"name": "get_weather", "arguments": {"city": "P"}}'
    events = Words().stream(_TOOLS)
    out = events.feed(f"<tool_call>[{a}, {b}]</tool_call>") + events.finish()
    repairs = [e for e in out if isinstance(e, Notice) and e.code == "recovered-repairs"]
    assert len(repairs) == 1
    bad = Words().stream(_TOOLS)
    out = bad.feed(f'<tool_call>[{a}, {{"nome": "x"}}]</tool_call>') + bad.finish()
    assert not [e for e in out if isinstance(e, Notice) and e.code == "recovered-repairs"]


def test_a_closer_after_prose_held_by_the_trailing_block_stays_text() -> None:
    reply = '<|tool_call_start|>[search(q="a")]<|tool_call_end|>\n{"a": 1}<|tool_call_end|>'
    result = assemble(_every_split(get_family("lfm2"), _TOOLS, reply, False))
    assert result.content.endswith('{"a": 1}<|tool_call_end|>')
    assert "recovered-echoed-markup" not in _codes("lfm2", reply)


def test_a_closer_written_again_is_named_once() -> None:
    block = '<tool_call>{"name": "search", "arguments": {"q": "a"}}</tool_call>'
    reply = block + "</tool_call>" * 5
    assert _codes("hermes", reply).count("recovered-echoed-markup") == 1


def test_lfm2_s_bare_list_needs_declared_tools() -> None:
    family = get_family("lfm2")
    assert family.parse("[foo(x=1)]", None).calls == []
    assert family.parse("[foo(x=1)]", _TOOLS).calls == []
