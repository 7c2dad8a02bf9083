"""The checks every declared family's own test module runs on its replies: a valid reply
reads to its calls and text with no notice, whole and streamed cut anywhere; a near miss
stays text, all of it, named ``is not a call``. One place, so a family's module lists its
replies (``MY_VALID``, ``MY_NEAR_MISSES``) and calls these."""

from __future__ import annotations

from typing import Any

from toolwire.events import Notice

from .prepared import typed
from .test_formats import check_stream, parse, stream_events

__all__ = ["SIBLING_REPAIRS", "check_foreign", "check_near_miss", "check_valid"]

#: The repairs that read another family's call body written in this family's framing (a
#: JSON call object or a list of them in a tag: toolwire.formats.jsonsteps), or this family's
#: own body without its framing, as a sibling writes it (LFM2's list without its token is
#: Llama 4's list).
SIBLING_REPAIRS = frozenset(
    {"recovered-json-call", "recovered-call-list", "recovered-unopened-call"}
)


def check_valid(family: str, reply: str, content: str, calls: list[Any]) -> None:
    result = parse(family, reply)
    assert result.content == content
    assert [(c.name, typed(c)) for c in result.calls] == calls
    assert not result.notices
    for k in range(0, len(reply) + 1, 3):  # streamed, cut anywhere, the same
        check_stream(family, reply, [reply[:k], reply[k:]])


def check_near_miss(family: str, reply: str) -> None:
    result = parse(family, reply)
    assert result.calls == [] and result.content == reply
    assert [n for n in result.notices if "is not a call" in n]


def check_foreign(family: str, reply: str, tools: Any = None) -> None:
    """Another family's reply read by ``family``: no call, and the text kept — unless it is
    that family's body in this family's own framing (Hermes' JSON in GLM's ``<tool_call>``),
    read then only under a named sibling repair, and never strictly."""
    kw = {} if tools is None else {"tools": tools}
    result = parse(family, reply, **kw)
    if not result.calls:
        return
    codes = {e.code for e in stream_events(family, [reply], **kw) if isinstance(e, Notice)}
    assert codes & SIBLING_REPAIRS, (family, reply)
    assert parse(family, reply, strict=True, **kw).calls == [], (family, reply)
