"""MiniMax M1: ``<tool_calls>`` around one JSON call object per line.

In full: ``<tool_calls>\\n{"name": NAME, "arguments": {...}}\\n{...}\\n</tool_calls>``. Apriel
opens its calls with the same ``<tool_calls>`` but writes one JSON list there; each family
reads only its own shape, so neither ever reads the other's reply (the other's block is text,
with a ``call-not-read`` notice). A block with no call in it is not a call.

One line that is no call (broken JSON, an object without a name or arguments) stays reply
text with a ``call-not-read`` notice, and the block reads on from the next line
(:mod:`~toolwire.formats.brokencall`). A reply that ends after complete calls, the closing
tag never written (the engine stopped at its end token), keeps those calls, named in a
``block-unclosed`` notice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .base import Family
from .brokencall import BlockStream, ResyncBody
from .callshape import CallShape
from .grammar import CallForm, lit
from .grammar_forms import NAME_ARGS
from .jsoncall import JsonCall
from .markerstream import DONE, WS, MarkerStream
from .scan import Markers

__all__ = ["MiniMaxM1"]

_OPEN_TAG = "<tool_calls>"
_CLOSE_TAG = "</tool_calls>"
#: Exactly ``name`` and ``arguments``.
_SHAPE = CallShape()

#: Where a broken line ends: the line's end, or the block's.
_RESYNC = Markers(("\n", _CLOSE_TAG))

_BLOCK, _ITEM, _SKIP = range(3)


class _M1Body(ResyncBody):
    between = _BLOCK
    resync = _SKIP

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.item = JsonCall(stream, _SHAPE)

    def step(self, s: str, i: int) -> tuple[int, bool]:
        if self.state == _SKIP:
            j, end = _RESYNC.scan(s, i)
            if not end:
                return j, False
            self.state = _BLOCK
            return (j + 1 if end == "\n" else j), True
        if self.state == _ITEM:
            i, ended = self.feed_json_call(self.item, s, i, "a call is not a JSON object")
            if ended:
                self.state = _BLOCK
            return i, ended
        if s[i] in WS:
            return i + 1, True
        if s[i] == "{":
            self.item = JsonCall(self.stream, _SHAPE)
            self.state = _ITEM
            return i, True
        j = self.expect(s, i, _CLOSE_TAG, f"expected a JSON call or {_CLOSE_TAG}")
        if j < 0:
            return i, False
        return self.end_block(i, j, "no call in the block"), False

    def end_of_reply(self) -> None:
        if self.state != _BLOCK or not self.calls or self.stream.strict:
            super().end_of_reply()
            return
        self.status = DONE
        self.stream._notice(
            "recovered-block-unclosed",
            f"the reply ended before {_CLOSE_TAG}: the complete calls before it are read",
        )
        self.stream._text(self.stream._raw[-1])  # a closing tag cut short stays text


class MiniMaxM1Stream(BlockStream):
    marker = _OPEN_TAG
    body_class = _M1Body


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    return "<tool_calls>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_calls>"


_MINIMAX_M1_FORM = CallForm(
    NAME_ARGS, open=lit("<tool_calls>"), close=lit("</tool_calls>"), triggers=("<tool_calls>",)
)


class MiniMaxM1(Family):
    name = "minimax-m1"
    label = "MiniMax M1 <tool_calls> JSON lines </tool_calls> (MiniMax M1)"
    kept_tokens = ("</tool_calls>",)
    samples = (_sample,)
    markers = (_OPEN_TAG,)
    stream_class = MiniMaxM1Stream
    grammar = _MINIMAX_M1_FORM
