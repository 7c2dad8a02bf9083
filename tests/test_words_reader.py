"""The reader for tools in words: its reply limit, work linear in the reply (counted), and a
list of call objects in one block."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from toolwire import LimitError, assemble
from toolwire.formats import words
from toolwire.formats.words import Words

from .replies import TOOLS

WORDS_FILE = str(Path(words.__file__).resolve())
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def test_the_reply_limit_holds_across_blocks() -> None:
    # 10 blocks of 80 characters: each is short, the reply is not
    assert len(CALL) == 80
    s = Words().stream(TOOLS, max_chars=100)
    with pytest.raises(LimitError):
        for _ in range(10):
            s.feed(CALL)
    s = Words().stream(TOOLS, max_chars=100)
    with pytest.raises(LimitError):
        s.feed(CALL + " and " + CALL)
    # within the limit, the same blocks are read
    result = Words().parse(CALL * 10, TOOLS, max_chars=800)
    assert [c.name for c in result.calls] == ["get_weather"] * 10


def _cuts(reply: str) -> list[list[str]]:
    return [[reply], list(reply), *([reply[:k], reply[k:]] for k in range(0, len(reply), 7))]


def test_a_block_over_its_limit_is_cut_there_however_the_reply_streams(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(words, "_MAX_BLOCK", 100)
    reply = "<tool_call>\n" + "x" * 150 + "</tool_call>Bye. " + CALL + "\n```\n" + "y" * 120 + "```"
    for chunks in _cuts(reply):
        s = Words().stream(TOOLS)
        result = assemble([e for c in chunks for e in s.feed(c)] + s.finish())
        # the first 100 characters are no call; what follows them is words again
        unreadable, weather = result.calls
        assert unreadable.name == words.UNREADABLE
        assert unreadable.arguments_text == "<tool_call>\n" + "x" * 99
        assert weather.name == "get_weather" and weather.arguments == {"city": "Paris"}
        # a fence too long to be a call is text, cut or not
        assert result.content == "x" * 51 + "</tool_call>Bye. \n```\n" + "y" * 120 + "```"


def _work(reply: str, chunk: int) -> int:
    """How many characters the reader's own code looks at while streaming ``reply``.

    Counted, not timed: every ``str`` method the words module calls is charged the length of
    the string it is called on, and every marker search the length it read up to its match.
    """
    seen = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal seen
        if event == "c_call" and frame.f_code.co_filename == WORDS_FILE:
            receiver = getattr(arg, "__self__", None)
            if isinstance(receiver, str):
                seen += len(receiver)
        elif (
            event == "return"
            and frame.f_code.co_name == "scan"
            and frame.f_back is not None
            and frame.f_back.f_code.co_filename == WORDS_FILE
        ):
            text, start = frame.f_locals["text"], frame.f_locals["start"]
            j, marker = arg
            seen += (j + len(marker) if marker else len(text)) - start

    s = Words().stream(TOOLS)
    sys.setprofile(profile)
    try:
        for i in range(0, len(reply), chunk):
            s.feed(reply[i : i + chunk])
        s.finish()
    finally:
        sys.setprofile(None)
    return seen


def _bare(n: int) -> str:
    return json.dumps({"name": "write_file", "arguments": {"path": "a", "content": "x" * n}})


def _blocks(n: int) -> str:
    return "".join(f"Now {i}.\n{CALL}\n```python\nprint({i})\n```\n" for i in range(n // 150))


def _long_call(n: int) -> str:
    return "Here.\n" + CALL.replace("Paris", "P" * n)


REPLIES: dict[str, Callable[[int], str]] = {
    "a reply that may be only a call's JSON": _bare,
    "many blocks and words": _blocks,
    "one long call": _long_call,
}


@pytest.mark.parametrize("kind", sorted(REPLIES))
@pytest.mark.parametrize("chunk", [4, 1_000_000])
def test_work_is_linear_in_the_reply(kind: str, chunk: int) -> None:
    small, large = REPLIES[kind](8_000), REPLIES[kind](32_000)
    ratio = _work(large, chunk) / _work(small, chunk)
    # four times the text: about four times the work (quadratic work would be sixteen)
    assert ratio < 4 * 1.5, ratio
    # and never much more than the text itself
    assert _work(large, chunk) < 8 * len(large)


_PARIS = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
_ROME = '{"name": "get_weather", "arguments": {"city": "Rome"}}'


@pytest.mark.parametrize(
    ("reply", "strict"),
    [
        # strict: the asked form holds one call object: this one is unreadable, and said so
        (f"<tool_call>\n[{_PARIS}, {_ROME}]\n</tool_call>", ["unreadable_tool_call"]),
        (f"```json\n[{_PARIS}, {_ROME}]\n```", []),  # strict: a fence is text
    ],
)
def test_a_list_of_call_objects_in_one_block_is_read_as_every_family_reads_it(
    reply: str, strict: list[str]
) -> None:
    """One decision for every reader: a list of call objects where one is due is read, named
    (recovered-call-list), as the engine reads it in a family's framing; strict refuses."""
    for cut in _cuts(reply):
        s = Words().stream(TOOLS)
        events = [e for piece in cut for e in s.feed(piece)] + s.finish()
        result = assemble(events)
        assert [(c.name, c.arguments) for c in result.calls] == [
            ("get_weather", {"city": "Paris"}),
            ("get_weather", {"city": "Rome"}),
        ]
        assert result.content == ""
        assert "recovered-call-list" in [getattr(e, "code", "") for e in events]
    assert [c.name for c in Words().parse(reply, TOOLS, strict=True).calls] == strict


def test_a_list_with_an_item_that_is_no_call_is_no_list_of_calls() -> None:
    tagged = Words().parse(f"<tool_call>\n[{_PARIS}, 3]\n</tool_call>", TOOLS)
    assert [c.name for c in tagged.calls] == ["unreadable_tool_call"]  # (its result says how)
    fenced = f"```json\n[{_PARIS}, 3]\n```"
    assert Words().parse(fenced, TOOLS).content == fenced
