"""Kimi K2: a section of calls, each named by an id and given as one JSON object.

In full: ``<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0``
``<|tool_call_argument_begin|>{…}<|tool_call_end|>…<|tool_calls_section_end|>``.

The id the model writes, ``functions.NAME:N``, names the tool and is kept as the call's id
(the templates write it back the same way in later turns). The arguments are a JSON object,
passed on as written while it streams. A section with no call in it is not a call.
Blanks between the tokens (around the id, before the arguments) are skipped. One broken call
in a section (JSON cut short, an id not ``functions.NAME:N``) stays reply text with a
``call-not-read`` notice, and the section reads on from that call's end
(:mod:`~toolwire.formats.brokencall`).
"""

from __future__ import annotations

import re

from ..messages import ToolCall
from .base import Family
from .brokencall import BlockStream, ResyncBody
from .jsonscan import ObjectScanner
from .markerstream import OPEN, WS, MarkerStream
from .scan import Markers
from .textargs import MAX_NAME

__all__ = ["KimiK2"]

_SECTION = "<|tool_calls_section_begin|>"
_END_SECTION = "<|tool_calls_section_end|>"
_CALL = "<|tool_call_begin|>"
_ARGS = "<|tool_call_argument_begin|>"
_END_CALL = "<|tool_call_end|>"
#: ``functions.NAME:N``, the id the model writes for each call.
_ID = re.compile(r"functions\.([^\s<>{}\[\]\"'=:]+):(\d+)\Z")

#: Where a broken call's text ends: its own end, or the next call or the section's end.
_RESYNC = Markers((_END_CALL, _CALL, _END_SECTION))

_BLOCK, _ID_TEXT, _BEFORE_ARGS, _OBJECT, _AFTER, _SKIP = range(6)


class _KimiBody(ResyncBody):
    between = _BLOCK
    resync = _SKIP

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.id_parts: list[str] = []
        self.id = ""
        self.name = ""
        self.index = -1
        self.scanner = ObjectScanner()

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _SKIP:
            j, end = _RESYNC.scan(s, i)
            if not end:
                return j, False
            self.state = _BLOCK
            return (j + len(end) if end == _END_CALL else j), True
        if state == _ID_TEXT:
            i = self._id(s, i)
            if self.state == _ID_TEXT:
                return i, False
            return i, True
        if state == _OBJECT:
            i = self.feed_args(self.scanner, self.index, s, i)
            if self.status != OPEN or not self.scanner.done:
                return i, False
            if not self._finish_call():
                return i, False
            self.state = _AFTER
            return i, True
        if s[i] in WS:
            i += 1
            return i, True
        if state == _BLOCK:
            return self.next_call(s, i, _CALL, _END_SECTION, _ID_TEXT, "no call in the section")
        if state == _BEFORE_ARGS:
            j = self.expect(s, i, _ARGS, "no <|tool_call_argument_begin|> after the call id")
            if j < 0:
                return i, False
            self.state = _OBJECT
            self.scanner = ObjectScanner()
            i = j
            return i, True
        # _AFTER
        j = self.expect(s, i, _END_CALL, "text after the arguments before <|tool_call_end|>")
        if j < 0:
            return i, False
        self.state = _BLOCK
        i = j
        return i, True

    def _id(self, s: str, i: int) -> int:
        """Read the call id up to the next ``<``; announce the call once it is whole."""
        j = s.find("<", i)
        stop = len(s) if j < 0 else j
        self.id_parts.append(s[i:stop])
        if sum(map(len, self.id_parts)) > MAX_NAME + 32:
            return self.fail(i, "a malformed call id")
        if j < 0:
            return stop
        call_id = "".join(self.id_parts).strip(WS)  # blanks between the tokens
        self.id_parts = []
        m = _ID.match(call_id)
        if m is None:
            return self.fail(j, f"the call id {call_id[:40]!r} is not functions.NAME:N")
        if any(call_id == cid for _index, cid in self.started):
            return self.fail(j, f"the call id {call_id!r} is used twice")
        self.name = m.group(1)
        self.index, self.id = self.announce(self.name, call_id)
        self.state = _BEFORE_ARGS
        return j

    def on_broken(self) -> None:
        self.id_parts = []
        self.scanner = ObjectScanner()

    def _finish_call(self) -> bool:
        text = self.scanner.text()
        args = self.json_args(text, 0)
        if args is None:
            return False
        self.calls.append((self.index, ToolCall(self.id, self.name, args, text.strip())))
        return True


class KimiK2Stream(BlockStream):
    marker = _SECTION
    body_class = _KimiBody


class KimiK2(Family):
    name = "kimi-k2"
    label = "Kimi K2 <|tool_calls_section_begin|> functions.NAME:N + JSON (Kimi K2)"
    markers = (_SECTION,)
    stream_class = KimiK2Stream
