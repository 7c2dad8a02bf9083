"""The cross-family matrix over every registered family: each reads its own call, and no
family reads a call out of another family's reply.

The calls are the ones each family declares (``Family.samples``), read from the registry,
so a family added there is checked here too.
"""

from __future__ import annotations

import pytest

from toolwire import family_names, get_family


def _sample_call(name: str, index: int) -> str:
    """Sample call ``index`` in family ``name``'s grammar."""
    return get_family(name).sample(index)


NAMES = family_names()


def test_every_family_has_a_sample_call() -> None:
    assert len(NAMES) >= 16
    for name in NAMES:
        assert _sample_call(name, 1)


#: (writer, reader): the writer's call is the reader's own framing around a body the reader
#: reads as a named repair, as peers read it (xLAM's ``<tool_call>[{…}]</tool_call>`` is
#: Hermes' tag holding a list of call objects: SGLang's Hermes reader takes it; Hermes' JSON
#: body in GLM's, TeleChat4's and the tagged Python dialect's ``<tool_call>``). The reader
#: must name the repair, and strict reading refuses it.
_JSON_IN_TAG = "read a call written as JSON in <tool_call>"
_NO_TOKEN = "read calls written without the family's opening <|tool_call_start|>"
SIBLINGS = {
    ("xlam", "hermes"): "read a list of calls in one <tool_call>",
    ("hermes", "glm"): _JSON_IN_TAG,
    ("hermes", "tagged-pythonic"): _JSON_IN_TAG,
    ("xlam", "glm"): _JSON_IN_TAG,
    ("xlam", "tagged-pythonic"): _JSON_IN_TAG,
    ("hermes", "telechat4"): _JSON_IN_TAG,
    ("xlam", "telechat4"): _JSON_IN_TAG,
    # Llama 4's bare list, and xLAM's bare JSON list, are LFM2's list (either way) without
    # its <|tool_call_start|>
    ("pythonic", "lfm2"): _NO_TOKEN,
    ("xlam", "lfm2"): _NO_TOKEN,
}


@pytest.mark.parametrize("writer", NAMES)
def test_a_call_is_read_by_its_own_family_only(writer: str) -> None:
    text = _sample_call(writer, 1)
    assert [c.name for c in get_family(writer).parse(text).calls] == ["write_file"]
    for reader in NAMES:
        if reader == writer:
            continue
        result = get_family(reader).parse(text)
        repair = SIBLINGS.get((writer, reader))
        if repair is None or not result.calls:
            assert result.calls == [], reader
        else:  # the sibling's framing: read only with the repair named, and never strictly
            assert [c.name for c in result.calls] == ["write_file"], reader
            assert repair in result.notices, reader
            assert get_family(reader).parse(text, strict=True).calls == [], reader


def _valid_replies() -> list[tuple[str, str]]:
    """Every reply with calls that a family's own tests read, as (writer, reply)."""
    from . import test_families_deepseek, test_families_json_lists, test_families_json_more
    from .family_cases import modules_listing
    from .replies import VALID

    out = [(f, case[0]) for f, cases in VALID.items() for case in cases if case[2]]
    for module in modules_listing("MY_VALID"):
        out += [(f, case[0]) for f, cases in module.MY_VALID.items() for case in cases if case[2]]
    out += [(f, reply) for f, reply, _, calls in test_families_deepseek.ALL if calls]
    for module in (test_families_json_lists, test_families_json_more):
        out += [(f, reply) for f, reply, _, calls in module.VALID if calls]
    return out


VALID_REPLIES = _valid_replies()


def test_the_replies_cover_every_family() -> None:
    assert {writer for writer, _ in VALID_REPLIES} >= set(NAMES) - {"pythonic"}


#: Families whose grammars write a call with no arguments alike (GLM's and TeleChat4's
#: ``<tool_call>NAME</tool_call>``: they differ only in their argument tags), so either reads
#: the other's argument-less call, as its own.
ALIKE_WITHOUT_ARGUMENTS = {("glm", "telechat4"), ("telechat4", "glm")}


@pytest.mark.parametrize("reader", NAMES)
def test_no_family_reads_a_call_from_another_familys_replies(reader: str) -> None:
    family = get_family(reader)
    for writer, reply in VALID_REPLIES:
        if writer == reader:
            continue
        result = family.parse(reply)
        if (writer, reader) in ALIKE_WITHOUT_ARGUMENTS:
            assert all(not c.arguments for c in result.calls), (writer, reply)
            continue
        repair = SIBLINGS.get((writer, reader))
        if repair is None or not result.calls:
            assert result.calls == [], (writer, reply)
        else:  # the sibling's framing: read only with the repair named, and never strictly
            assert repair in result.notices, (writer, reply)
            assert family.parse(reply, strict=True).calls == [], (writer, reply)
