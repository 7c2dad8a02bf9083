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

Two tolerances, each named in a notice, for what Kimi K2 Thinking writes:

- ``thinking-unclosed``: the model leaves ``<think>`` open and goes straight to its calls.
  The call tokens are special tokens that thinking never holds, so the first of them ends
  the thinking there, and the calls are read.
- ``section-missing``: calls opened by ``<|tool_call_begin|>`` with no section around them,
  perhaps without ``<|tool_call_end|>``. Each call is still whole (its id, then one complete
  JSON object); the calls end at the first text that is no call token, or at the reply's end.
"""

from __future__ import annotations

import re
from typing import Any

from ..events import Event, ReasoningDelta
from ..messages import ToolCall
from .base import Family
from .brokencall import BlockStream, ResyncBody
from .functionary import OpeningsStream
from .jsonscan import ObjectScanner
from .markerstream import DONE, FAILED, OPEN, WS, MarkerStream, expect_any
from .reasoning import _REASONING, _START, ReasoningSplitter
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

#: The tokens that open calls: thinking never holds them.
_CALL_TOKENS = Markers((_SECTION, _CALL))
#: Where a broken call's text ends: its own end, or the next call or the section's end.
_RESYNC = Markers((_END_CALL, _CALL, _END_SECTION))

_BLOCK, _ID_TEXT, _BEFORE_ARGS, _OBJECT, _AFTER, _SKIP, _FIRST = range(7)


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
        self.state = _FIRST
        #: Opened by <|tool_call_begin|>, no section around the calls (a tolerance).
        self.bare = False

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _FIRST:  # what opened the body: the section, or a call without one
            self.bare = self.stream._raw[0] == _CALL
            if self.bare and self.stream.strict:
                return self.fail(i, f"a call without {_SECTION} around it"), False
            self.state = _ID_TEXT if self.bare else _BLOCK
            return i, True
        if self.bare and state in (_BLOCK, _AFTER):
            return self._bare_next(s, i)
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
        # looked for no further than an id may reach: the text after it is not read here
        j = s.find("<", i, i + MAX_NAME + 32 + 1)
        stop = min(len(s), i + MAX_NAME + 32 + 1) if j < 0 else j
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
            return self.fail_block(j, f"the call id {call_id!r} is used twice")
        self.name = m.group(1)
        self.index, self.id = self.announce(self.name, call_id)
        self.state = _BEFORE_ARGS
        return j

    def _bare_next(self, s: str, i: int) -> tuple[int, bool]:
        """After a call without a section: its end token, another call, or the calls end."""
        ends = (_END_CALL, _CALL) if self.state == _AFTER else (_CALL,)
        status, j, literal = expect_any(s, i, ends)
        if status == OPEN:
            return i, False
        if status == FAILED:
            self._bare_done()
            return i, False
        if self.state == _AFTER:  # this call is over; the next one begins from _BLOCK
            self.state = _BLOCK
            return (j if literal == _END_CALL else i), True
        self.state = _ID_TEXT
        return j, True

    def _bare_done(self) -> None:
        self.status = DONE
        self.stream._notice(
            "recovered-section-missing",
            f"calls written without {_SECTION} around them are read",
        )

    def end_of_reply(self) -> None:
        tail = self.stream._raw[-1]
        if self.bare and self.state == _SKIP and self.calls:  # the last call broke
            self.close_broken(tail)
            self._bare_done()
        elif self.bare and self.state in (_BLOCK, _AFTER):
            self._bare_done()
            self.stream._text(tail)  # an end token cut short stays text
        else:
            super().end_of_reply()

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


class KimiK2Stream(BlockStream, OpeningsStream):
    openings = (_SECTION, _CALL)
    body_class = _KimiBody

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._watching = True  # thinking may still be open: a call token would end it
        self._pending = ""  # a piece that may begin a call token, held while watching

    def feed(self, chunk: str) -> list[Event]:
        if not self._watching or self.strict:
            return super().feed(chunk)
        self._check(len(self._pending) + len(chunk))  # the piece held is still to be counted
        s = self._pending + chunk
        j, token = _CALL_TOKENS.scan(s)
        self._pending = "" if token else s[j:]
        out = super().feed(s[:j])
        if token:
            out += self._cut_thinking(token) + super().feed(s[j:])
        elif self._reasoning._state not in (_START, _REASONING):  # thinking is over
            self._watching = False
            out += super().feed(self._take_pending())
        return out

    def _take_pending(self) -> str:
        pending, self._pending = self._pending, ""
        return pending

    def _cut_thinking(self, token: str) -> list[Event]:
        """A call token came: inside thinking that never closed, it ends the thinking."""
        self._watching = False
        if self._reasoning._state != _REASONING:
            return []
        for _thinking, piece in self._reasoning.finish():
            self._out.append(ReasoningDelta(piece))
        self._reasoning = ReasoningSplitter()
        self._notice("recovered-thinking-unclosed", f"{token} ended thinking that was never closed")
        return self._take()

    def finish(self) -> list[Event]:
        out = super().feed(self._take_pending()) if self._pending else []
        return out + super().finish()


class KimiK2(Family):
    name = "kimi-k2"
    label = "Kimi K2 <|tool_calls_section_begin|> functions.NAME:N + JSON (Kimi K2)"
    markers = (_SECTION, _CALL)
    stream_class = KimiK2Stream
