"""Hunyuan: ``<tool_calls><tool_call>NAME<tool_sep><arg_key>K</arg_key><arg_value>V</arg_value>…``.

The grammar SGLang's Hunyuan reader takes (Hunyuan's ``hy_v3`` models)::

    <tool_calls>
    <tool_call>NAME<tool_sep>
    <arg_key>K</arg_key>
    <arg_value>V</arg_value>
    </tool_call>
    </tool_calls>

with or without the line breaks, one or more calls in the block, a call with no arguments
written ``<tool_call>NAME<tool_sep></tool_call>``. Each value is the text between its tags,
verbatim (strings as they are, other values as their JSON): the call is marked
``text_values`` and the argument pipeline types each value by the tool's schema, as the peer
types them. ``<tool_sep>`` after the name is what tells this grammar from GLM's, which writes
the same argument tags straight after the name and no ``<tool_calls>`` around its calls.

Hunyuan A13B writes another grammar, ``<tool_calls>[{"name": …, "arguments": …}]</tool_calls>``
inside ``<answer>…</answer>``: that is the ``apriel`` family's (its template is detected as
such), and the answer tags are dropped where the answer starts (formats/reasoning.py).
"""

from __future__ import annotations

from .base import Family
from .markerstream import WS, MarkerStream
from .scan import Markers
from .textargs import NameReader, TextBody

__all__ = ["Hunyuan"]

_BLOCK_OPEN = "<tool_calls>"
_BLOCK_CLOSE = "</tool_calls>"
_CALL_OPEN = "<tool_call>"
_CALL_CLOSE = "</tool_call>"
_SEP = "<tool_sep>"
_KEY = "<arg_key>"
_END_KEY = "</arg_key>"
_VALUE = "<arg_value>"
_END_VALUE = "</arg_value>"
_VALUE_END = Markers((_END_VALUE,))

(_BLOCK, _NAME_START, _NAME, _SEP_WAIT, _BETWEEN, _KEY_NAME, _KEY_END, _BEFORE_VALUE, _IN_VALUE) = (
    range(9)
)


class _HunyuanBody(TextBody):
    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.names = NameReader(WS + "<", "tool name")
        self.keys = NameReader("<", "argument name")

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _IN_VALUE:
            i, complete = self.read_value(s, i, _VALUE_END, _BETWEEN)
            return i, complete
        if state == _NAME_START and s[i] not in WS:  # whitespace before the name is skipped
            self.state = state = _NAME
        if state == _NAME:
            name, i = self.names.read(self, s, i)
            if name is None or not self.named(name, True, i):
                return i, False
            self.state = _SEP_WAIT
            return i, True
        if state == _KEY_NAME:
            key, i = self.keys.read(self, s, i)
            if key is None or not self.named(key, False, i):
                return i, False
            self.state = _KEY_END
            return i, True
        if state == _KEY_END:
            j = self.expect(s, i, _END_KEY, "an argument name not closed by </arg_key>")
            if j < 0:
                return i, False
            self.state = _BEFORE_VALUE
            return j, True
        if s[i] in WS:
            return i + 1, True
        if state == _BLOCK:
            return self.next_call(
                s, i, _CALL_OPEN, _BLOCK_CLOSE, _NAME_START, "the call block is empty"
            )
        if state == _SEP_WAIT:
            j = self.expect(s, i, _SEP, "no <tool_sep> after the tool's name")
            if j < 0:
                return i, False
            self.state = _BETWEEN
            return j, True
        if state == _BEFORE_VALUE:
            j = self.expect(s, i, _VALUE, "no <arg_value> after </arg_key>")
            if j < 0:
                return i, False
            self.state = _IN_VALUE
            return j, True
        # _BETWEEN
        j, literal = self.expect_one(
            s, i, (_KEY, _CALL_CLOSE), "expected <arg_key> or </tool_call>"
        )
        if j < 0:
            return i, False
        if literal == _KEY:
            self.state = _KEY_NAME
            return j, True
        self.end_call()
        self.state = _BLOCK
        return j, True


class HunyuanStream(MarkerStream):
    marker = _BLOCK_OPEN
    body_class = _HunyuanBody


class Hunyuan(Family):
    name = "hunyuan"
    label = "Hunyuan <tool_calls><tool_call>NAME<tool_sep><arg_key>…<arg_value>… (Hunyuan hy_v3)"
    markers = (_BLOCK_OPEN,)
    stream_class = HunyuanStream
