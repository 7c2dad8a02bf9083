"""GLM: ``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>…</tool_call>``.

Written by GLM 4.5/4.6/4.7 (a newline after the name and between the tags) and poolside
Laguna (the same tags, with or without the newlines). Each value is the text between its
tags, verbatim: the templates write strings as they are and other values as their JSON, so
the call is marked ``text_values`` and the argument pipeline types each value by the tool's
schema. The name follows the opening tag at once; a JSON object there is Hermes's call,
``<function=`` is Qwen's, and neither is ever read as this family's.
"""

from __future__ import annotations

from .base import Family
from .markerstream import DONE, WS, MarkerStream
from .scan import Markers
from .textargs import NameReader, TextBody

__all__ = ["Glm"]

_OPEN_TAG = "<tool_call>"
_CLOSE_TAG = "</tool_call>"
_KEY = "<arg_key>"
_END_KEY = "</arg_key>"
_VALUE = "<arg_value>"
_END_VALUE = "</arg_value>"
_VALUE_END = Markers((_END_VALUE,))

_NAME, _BETWEEN, _KEY_NAME, _KEY_END, _BEFORE_VALUE, _IN_VALUE = range(6)


class _GlmBody(TextBody):
    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.names = NameReader(WS + "<", "tool name")
        self.keys = NameReader("<", "argument name")

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _IN_VALUE:
            i, complete = self.read_value(s, i, _VALUE_END, _BETWEEN)
            if not complete:
                return i, False
            return i, True
        if state == _NAME:
            name, i = self.names.read(self, s, i)
            if name is None or not self.named(name, True, i):
                return i, False
            self.state = _BETWEEN
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
            i = j
            return i, True
        if s[i] in WS:
            i += 1
            return i, True
        if state == _BEFORE_VALUE:
            j = self.expect(s, i, _VALUE, "no <arg_value> after </arg_key>")
            if j < 0:
                return i, False
            self.state = _IN_VALUE
            i = j
            return i, True
        # _BETWEEN
        j, literal = self.expect_one(s, i, (_KEY, _CLOSE_TAG), "expected <arg_key> or </tool_call>")
        if j < 0:
            return i, False
        if literal == _KEY:
            self.state = _KEY_NAME
            i = j
            return i, True
        self.end_call()
        self.status = DONE
        return j, False


class GlmStream(MarkerStream):
    marker = _OPEN_TAG
    body_class = _GlmBody


class Glm(Family):
    name = "glm"
    label = "GLM <tool_call>NAME<arg_key>…<arg_value>… (GLM 4.5/4.6/4.7, poolside Laguna)"
    markers = (_OPEN_TAG,)
    stream_class = GlmStream
