"""Hermes: ``<tool_call>\\n{"name": NAME, "arguments": {...}}\\n</tool_call>``.

Written by Qwen2.5, Qwen3, Hermes 2/3, Granite 4 and many fine-tunes of them. Only a JSON
object with exactly ``name`` and ``arguments`` between the tags is a call; anything else
there (Qwen-Coder's XML, doubled braces, a missing closing tag) is reply text. Unless
strict, ``"arguments"`` written as a string holding the JSON object is decoded, and the
repair named in a ``recovered-arguments-string`` notice.
"""

from __future__ import annotations

from .base import Family
from .callshape import CallShape
from .jsoncall import JsonCall
from .markerstream import DONE, WS, Body, MarkerStream

__all__ = ["Hermes"]

_OPEN_TAG = "<tool_call>"
_CLOSE_TAG = "</tool_call>"
#: Exactly ``name`` and ``arguments``; unless strict, the arguments may be a string holding
#: their JSON (a named repair).
_SHAPE = CallShape(args_in_string=True)
_PRE, _OBJECT, _POST = range(3)


class _HermesBody(Body):
    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.call = JsonCall(stream, _SHAPE)

    def step(self, s: str, i: int) -> tuple[int, bool]:
        if self.state == _OBJECT:
            i, ended = self.feed_json_call(self.call, s, i, "the call is not a JSON object")
            if not ended:
                return i, False
            self.state = _POST
            return i, True
        if s[i] in WS:
            i += 1
            return i, True
        if self.state == _PRE:
            if s[i] != "{":
                return self.fail(i, "no JSON object after <tool_call>"), False
            self.state = _OBJECT
            return i, True
        j = self.expect(s, i, _CLOSE_TAG, "text after the call before </tool_call>")
        if j < 0:
            return i, False
        self.status = DONE
        return j, False


class HermesStream(MarkerStream):
    marker = _OPEN_TAG
    body_class = _HermesBody


class Hermes(Family):
    name = "hermes"
    label = "Hermes <tool_call> JSON (Qwen2.5, Qwen3, Hermes 2/3, Granite 4)"
    markers = (_OPEN_TAG,)
    stream_class = HermesStream
