"""A block of calls opened again before it closed (``<｜tool▁calls▁begin｜>A…`` then
``<｜tool▁calls▁begin｜>B…<｜tool▁calls▁end｜>``, as TensorRT-LLM's DeepSeek tests write it):
the engine reads both calls as one block for every declared syntax whose block holds its
calls between opening and closing words, named ``recovered-block-reopened``; strict refuses.
Two more kinds of a block's words not all written, for every declared syntax of the kind:
several calls in one framing that holds one (``<|tool_call>call:f{…}call:g{…}<tool_call|>``,
as mlx-lm reads Gemma 4; Qwen XML's ``<function=`` twice in one ``<tool_call>``),
``recovered-calls-one-block``; a call's own closing word left out where its block's came
(Qwen XML's ``</function>`` before ``</tool_call>``, as transformers reads it),
``recovered-closer-missing``. Each reply is built from the syntax's own writer and read whole
and at every split point.
"""

from __future__ import annotations

import pytest

from toolwire import get_family
from toolwire.events import Notice
from toolwire.formats.base import assemble
from toolwire.formats.declared import DECLARED
from toolwire.formats.derived import DerivedShape

from .replies import TOOLS
from .test_engine_behaviours import _events, _every_split


def _reopens(shape: DerivedShape) -> bool:
    listed = shape.kind == "json" and bool(shape.trail) and not shape.trail_optional
    framed = bool(shape.trail) and not shape.trail_optional and shape.opening[1:] == shape.next_call
    return framed and not listed and not shape.whole and shape.kind != "code"


#: Every declared family whose main form frames its calls in a block.
FAMILIES = [name for name, syntax in DECLARED.items() if _reopens(syntax.shape)]


def test_the_families_are_those_peers_test() -> None:
    assert {"deepseek-v3.1", "deepseek-r1", "minimax"} <= set(FAMILIES)


@pytest.mark.parametrize("name", FAMILIES)
def test_a_block_opened_again_before_it_closed_is_one_block(name: str) -> None:
    syntax = DECLARED[name]
    family = get_family(name)
    first = syntax.write("get_weather", {"city": "Paris"}, 0)
    trail = "".join(syntax.shape.trail)
    cut = first.rstrip()
    assert cut.endswith(trail), first
    reply = cut[: -len(trail)].rstrip() + syntax.write("get_weather", {"city": "Rome"}, 1)
    result = assemble(_every_split(family, TOOLS, reply, False))
    cities = [c.arguments.get("city") for c in result.calls]
    assert cities == ["Paris", "Rome"], reply
    assert result.content.strip() == ""
    codes = [e.code for e in _events(family, TOOLS, [reply], False) if isinstance(e, Notice)]
    assert "recovered-block-reopened" in codes
    assert [c.arguments.get("city") for c in family.parse(reply, TOOLS, strict=True).calls] != [
        "Paris",
        "Rome",
    ]


def _one_call_blocks(shape: DerivedShape) -> bool:
    """Each call a block of its own, the call's opening words after the block's (or a JSON
    call object right after the block's word)."""
    inner = shape.opening[1:] or shape.kind == "json"
    own = shape.next_call == shape.opening and bool(shape.post) and not shape.trail
    # (a closer that begins the call's own words, RWKV's ``` before ```json, closes the block)
    alike = bool(shape.opening[1:]) and shape.opening[1].startswith(shape.post[-1:] or ("\0",))
    return own and bool(inner) and not shape.whole and not alike


ONE_BLOCK = [name for name, syntax in DECLARED.items() if _one_call_blocks(syntax.shape)]


def test_the_one_call_block_families_are_those_expected() -> None:
    assert {"hermes", "gemma4", "qwen-xml", "internlm2", "functiongemma"} <= set(ONE_BLOCK)


@pytest.mark.parametrize("name", ONE_BLOCK)
def test_several_calls_in_one_block_that_holds_one_are_read(name: str) -> None:
    syntax = DECLARED[name]
    family = get_family(name)
    shape = syntax.shape
    first = syntax.write("get_weather", {"city": "Paris"}, 0).rstrip()
    second = syntax.write("get_weather", {"city": "Rome"}, 1).lstrip()
    assert first.endswith(shape.post[-1]) and second.startswith(shape.opening[0])
    reply = first[: -len(shape.post[-1])] + "\n" + second[len(shape.opening[0]) :].lstrip()
    events = _every_split(family, TOOLS, reply, False)
    result = assemble(events)
    assert [c.arguments.get("city") for c in result.calls] == ["Paris", "Rome"], reply
    assert result.content.strip() == ""
    codes = [e.code for e in events if isinstance(e, Notice)]
    assert codes == ["recovered-calls-one-block"]
    strict = family.parse(reply, TOOLS, strict=True)
    assert [c.arguments.get("city") for c in strict.calls] != ["Paris", "Rome"]


def test_text_after_a_call_in_its_block_is_no_second_call() -> None:
    family = get_family("hermes")
    reply = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\nand more\n'
    result = family.parse(reply + "</tool_call>", TOOLS)
    assert result.calls == [] and "and more" in result.content


#: Tagged syntaxes whose call closes with a word of its own before its block's.
CLOSERS = [
    name
    for name, syntax in DECLARED.items()
    if syntax.shape.kind == "tags" and len(syntax.shape.post) > 1
]


def test_the_closer_families_are_those_expected() -> None:
    assert {"qwen-xml", "seed-oss"} <= set(CLOSERS)


@pytest.mark.parametrize("name", CLOSERS)
def test_a_call_whose_own_closer_was_left_out_is_read(name: str) -> None:
    syntax = DECLARED[name]
    family = get_family(name)
    written = syntax.write("get_weather", {"city": "Paris"}, 0)
    closer = syntax.shape.post[0]
    assert written.count(closer) == 1
    reply = written.replace(closer, "")
    events = _every_split(family, TOOLS, reply, False)
    result = assemble(events)
    assert [(c.name, c.arguments) for c in result.calls] == [("get_weather", {"city": "Paris"})]
    assert result.content.strip() == ""
    assert [e.code for e in events if isinstance(e, Notice)] == ["recovered-closer-missing"]
    assert family.parse(reply, TOOLS, strict=True).calls == []
