"""MiniMax M1: ``<tool_calls>`` around one JSON call object per line.

In full: ``<tool_calls>\\n{"name": NAME, "arguments": {...}}\\n{...}\\n</tool_calls>``. Apriel
opens its calls with the same ``<tool_calls>`` but writes one JSON list there; each family
reads only its own shape, so neither ever reads the other's reply (the other's block is text,
with a ``call-not-read`` notice). A block with no call in it is not a call.
"""

from __future__ import annotations

from .base import Family
from .callshape import CallShape
from .jsoncall import JsonCall
from .markerstream import WS, Body, MarkerStream

__all__ = ["MiniMaxM1"]

_OPEN_TAG = "<tool_calls>"
_CLOSE_TAG = "</tool_calls>"
#: Exactly ``name`` and ``arguments``.
_SHAPE = CallShape()

_BLOCK, _ITEM = range(2)


class _M1Body(Body):
    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.item = JsonCall(stream, _SHAPE)

    def step(self, s: str, i: int) -> tuple[int, bool]:
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


class MiniMaxM1Stream(MarkerStream):
    marker = _OPEN_TAG
    body_class = _M1Body


class MiniMaxM1(Family):
    name = "minimax-m1"
    label = "MiniMax M1 <tool_calls> JSON lines </tool_calls> (MiniMax M1)"
    markers = (_OPEN_TAG,)
    stream_class = MiniMaxM1Stream
