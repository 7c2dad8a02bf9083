"""A block of calls opened again before it closed (``<｜tool▁calls▁begin｜>A…`` then
``<｜tool▁calls▁begin｜>B…<｜tool▁calls▁end｜>``, as TensorRT-LLM's DeepSeek tests write it):
the engine reads both calls as one block for every declared syntax whose block holds its
calls between opening and closing words, named ``recovered-block-reopened``; strict refuses.
Each reply is built from the syntax's own writer and read whole and at every split point.
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
