"""Every family's replies, streamed: cut at every point, and one character at a time, a
reply gives the events it gives whole.

The replies are the ones each family's own tests read (valid calls, near misses, plain
text; tests/family_cases.py finds them), so a reply added there is streamed here too.
"""

from __future__ import annotations

import pytest

from . import (
    test_families_deepseek,
    test_families_json_lists,
    test_families_json_more,
    test_formats,
)
from .family_cases import modules_listing
from .test_formats import check_stream

REPLIES = [
    *test_formats.ALL_REPLIES,
    *test_families_json_lists.ALL,
    *test_families_json_more.ALL,
    *test_families_json_more.PLAIN,
    *test_families_deepseek.STREAMED,
    *(reply for module in modules_listing("MY_REPLIES") for reply in module.MY_REPLIES),
]


def test_every_family_is_streamed() -> None:
    from toolwire import family_names

    assert {family for family, _ in REPLIES} >= set(family_names()) - {"pythonic"}


@pytest.mark.parametrize(("family", "reply"), REPLIES)
def test_stream_every_split_point(family: str, reply: str) -> None:
    for k in range(len(reply) + 1):
        check_stream(family, reply, [reply[:k], reply[k:]])


@pytest.mark.parametrize(("family", "reply"), REPLIES)
def test_stream_one_character_at_a_time(family: str, reply: str) -> None:
    check_stream(family, reply, list(reply))
