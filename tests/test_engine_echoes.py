"""A family's own markup a model writes again where it means nothing, dropped by the engine
for every declared syntax (``toolwire.formats.echoes``), each read whole and at every split
point, and kept as written by strict reading:

- the block's closer written again right after it (Gemma's ``<tool_call|><tool_call|>``, as
  Ollama's parser tests write it), or a bracketed marker's closing tag (Mistral's
  ``[/TOOL_CALLS]``, as vLLM's do): ``recovered-echoed-markup``; after prose, text;
- a tool's output the model writes itself in its template's framing (DeepSeek's
  ``<｜tool▁output▁begin｜>…``, Qwen's ``<tool_response>…``): ``ignored-tool-response``, as the
  reader for tools in words treats its ``<tool_response>``.
"""

from __future__ import annotations

from typing import Any

import pytest

from toolwire import get_family
from toolwire.events import Notice
from toolwire.formats.base import Family, assemble
from toolwire.formats.declared import DECLARED
from toolwire.formats.derivedstream import DerivedStream

from .replies import TOOLS
from .test_engine_behaviours import _events, _every_split

_ARGS = {"city": "Paris"}


def _codes(family: Family, reply: str) -> list[str]:
    return [e.code for e in _events(family, TOOLS, [reply], False) if isinstance(e, Notice)]


def _stream_class(name: str) -> type[DerivedStream]:
    cls = get_family(name).stream_class
    assert issubclass(cls, DerivedStream)
    return cls


def _clean_block(name: str) -> str | None:
    """One call in the family's main form, when it reads back alone with nothing else."""
    syntax = DECLARED[name]
    if syntax.primed or syntax.shape.whole or syntax.shape.kind == "code":
        return None
    reply = syntax.write("get_weather", _ARGS)
    result = get_family(name).parse(reply, TOOLS)
    if [(c.name, c.arguments) for c in result.calls] != [("get_weather", _ARGS)]:
        return None
    return reply if not result.content.strip() and not result.notices else None


#: (family, block, closer written again) for every declared family with a clean block.
ECHOES = [
    (name, block, word)
    for name in DECLARED
    if (block := _clean_block(name)) is not None
    for word in sorted(_stream_class(name)._echoes)
]


def test_the_closers_are_computed_for_the_families_peers_test() -> None:
    words = {(name, word) for name, _, word in ECHOES}
    assert ("hermes", "</tool_call>") in words
    assert ("gemma4", "<tool_call|>") in words
    assert ("mistral", "[/TOOL_CALLS]") in words
    assert len({name for name, _, _ in ECHOES}) >= 25


@pytest.mark.parametrize(("name", "block", "word"), ECHOES)
def test_a_closer_written_again_right_after_the_calls_is_dropped(
    name: str, block: str, word: str
) -> None:
    family = get_family(name)
    reply = f"{block}\n{word}\nDone."
    result = assemble(_every_split(family, TOOLS, reply, False))
    assert [(c.name, c.arguments) for c in result.calls] == [("get_weather", _ARGS)], reply
    assert result.content.strip() == "Done.", reply
    assert "recovered-echoed-markup" in _codes(family, reply)
    strict = family.parse(reply, TOOLS, strict=True)
    assert word in strict.content
    # after the reply's own words it is their text, with no notice
    prose = f"{block}\nDone. {word} More."
    result = assemble(_every_split(family, TOOLS, prose, False))
    assert result.content.strip() == f"Done. {word} More."
    assert "recovered-echoed-markup" not in _codes(family, prose)


#: (family, opener, closer) of every declared family whose template frames a tool's result.
OUTPUTS = [
    (name, opener, closer)
    for name, syntax in DECLARED.items()
    for opener, closer in syntax.tool_outputs
]


def test_the_tool_outputs_are_declared_where_templates_frame_them() -> None:
    names = {name for name, _, _ in OUTPUTS}
    assert {"hermes", "qwen-xml", "glm", "deepseek-v3.1", "deepseek-r1", "lfm2"} <= names


@pytest.mark.parametrize(("name", "opener", "closer"), OUTPUTS)
def test_a_tool_output_the_model_writes_itself_is_dropped(
    name: str, opener: str, closer: str
) -> None:
    family = get_family(name)
    block = DECLARED[name].write("get_weather", _ARGS)
    cases: list[tuple[str, list[Any], str]] = [
        (f"{block}\n{opener}Sunny, 21 C{closer}\nIt is sunny.", [_ARGS], "It is sunny."),
        (f"Here: {opener}Sunny{closer} Hope that helps!", [], "Here:  Hope that helps!"),
        (f"{block}\n{opener}Sunny, and the rest of the reply", [_ARGS], ""),  # never closed
    ]
    for reply, calls, content in cases:
        result = assemble(_every_split(family, TOOLS, reply, False))
        assert [c.arguments for c in result.calls] == calls, reply
        assert result.content.strip() == content, reply
        assert "ignored-tool-response" in _codes(family, reply)
        assert opener in family.parse(reply, TOOLS, strict=True).content
