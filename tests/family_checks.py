"""The checks every declared family's own test module runs on its replies: a valid reply
reads to its calls and text with no notice, whole and streamed cut anywhere; a near miss
stays text, all of it, named ``is not a call``. One place, so a family's module lists its
replies (``MY_VALID``, ``MY_NEAR_MISSES``) and calls these."""

from __future__ import annotations

from typing import Any

from .prepared import typed
from .test_formats import check_stream, parse

__all__ = ["check_near_miss", "check_valid"]


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
