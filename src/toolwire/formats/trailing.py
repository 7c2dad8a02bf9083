"""A call that is the last block of a reply, after prose: held back while it streams.

A model often says a sentence and then calls: ``I'll look that up.\\n{"name": "get_weather",
"parameters": {"city": "Paris"}}``. A grammar that reads a call only as the whole reply
(Llama 3's JSON, Llama 4's bare list) or a reader that takes bare JSON only as the whole reply
(drift recovery, tools in words) shows such a call to the user as text. This module finds the
block that may be that call while the reply streams, holds it back, and at the reply's end
gives it to the reader to decide.

What is a candidate, and why only that:

- a ``{`` or ``[`` at the start of a line, then the balanced group it opens (strings in either
  quote skipped), perhaps several such groups apart only by white space, ``;`` or ``,``
  (calls one after another), and nothing after them but white space: the reply's **last**
  block. Anything else after a closed group releases it at once as the prose it was, so JSON
  in the middle of prose stays prose and is never held longer than it takes to see the text
  after it;
- a family's own marker (``<|python_tag|>``, ``<|python_start|>``), anywhere: everything
  after it is the candidate. A marker makes the call certain, so this is the family's grammar,
  not a guess.

A bracketed candidate is only a guess, so the reader must be sure: the block read by the
family's grammar (or drift recovery's shapes) is nothing but calls, each names a declared tool,
and its arguments fit the tool's schema as written (:func:`fit_calls`); the read is then named
``recovered-trailing-call`` and the prose stays content. Else the block is text.

Each character is looked at once (a marker search, or the group's bracket and quote tracking),
so the work is linear in the reply however it is cut; a candidate longer than
:data:`MAX_CANDIDATE` is released as text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import replace

from .. import events as ev
from ..errors import ArgumentsError
from ..messages import ToolCall
from .base import MAX_JSON_DEPTH, ReplyStream, ToolIndex
from .scan import Markers

__all__ = ["MAX_CANDIDATE", "TrailingBlock", "end_trailing", "fit_calls"]

#: A candidate block longer than this is not held: it goes out as text.
MAX_CANDIDATE = 256 * 1024
_LINE_STARTS = ("\n{", "\n[")
_TOKENS = re.compile(r"[\"'\\\[\]{}()]")
_BETWEEN = " \t\r\n;,"
_OPENERS = "[{("

_PROSE, _GROUP, _CLOSED, _MARKED = range(4)

#: Notices a reader gives because it was handed the block as a whole reply: for a block after
#: prose they would say the reply was only the call, which it was not — one call, one notice.
_WHOLE_REPLY_ONLY = frozenset({"recovered-bare-json"})


class TrailingBlock:
    """Text of a reply in, text that may go out now out; the last block that may be a call
    held back (see the module docstring).

    ``markers``: the family's own call markers (a candidate up to the reply's end).
    ``brackets``: whether a ``{``/``[`` line may be a candidate (off with ``strict``: reading
    one is a tolerance).
    """

    def __init__(self, markers: Iterable[str] = (), *, brackets: bool = True) -> None:
        found = (*(_LINE_STARTS if brackets else ()), *markers)
        self._markers = Markers(found) if found else None
        self._state = _PROSE
        self._tail = ""  # a partial marker held from the last piece
        self._held: list[str] = []  # the candidate so far
        self._size = 0
        self.opener = ""  # the marker that opened the candidate ("" for a bracket)
        self._depth = 0
        self._quote = ""
        self._escape = False
        self._quotes = '"'  # the quotes of the group's strings: JSON's, or Python's too

    def feed(self, text: str) -> str:
        out: list[str] = []
        s = self._tail + text
        self._tail = ""
        i, n = 0, len(s)
        while i < n:
            if self._state == _PROSE:
                if self._markers is None:
                    out.append(s[i:])
                    break
                j, marker = self._markers.scan(s, i)
                out.append(s[i:j])
                if not marker:
                    self._tail = s[j:]
                    break
                if marker in _LINE_STARTS:
                    out.append("\n")
                    i = j + 1
                    self._start_group()
                else:
                    self.opener = marker
                    self._state = _MARKED
                    i = j + len(marker)
                continue
            if self._state == _MARKED:
                self._hold(s[i:])
                break
            i = self._track(s, i, out)
        if self._size > MAX_CANDIDATE:
            out.append(self.release())
        return "".join(out)

    def release(self) -> str:
        """Give up the candidate: all that is held, as text; prose is read on from here."""
        held = self.opener + "".join(self._held)
        self._held, self._size, self.opener = [], 0, ""
        self._state = _PROSE
        return held

    def end(self) -> tuple[str, str]:
        """The reply is over: ``(text still held that is prose, the candidate block)``; the
        candidate is ``""`` when there is none (``opener`` says what opened it)."""
        tail, self._tail = self._tail, ""
        if self._state == _MARKED:
            block = "".join(self._held) + tail
        elif self._state == _CLOSED:
            block = "".join(self._held)
        else:  # prose, or a group the reply never closed: text
            return self.release() + tail, ""
        self._held, self._size = [], 0
        self._state = _PROSE
        return "", block

    def flush(self) -> str:
        """Something other than text comes next (a call the reader found): all held text goes
        out first, so nothing is reordered; it is no longer the reply's last block."""
        tail, self._tail = self._tail, ""
        return self.release() + tail if self._held or self.opener else tail

    # -- the bracketed groups

    def _start_group(self) -> None:
        self._state = _GROUP
        self._depth = 0
        self._quote = ""
        self._escape = False

    def _hold(self, piece: str) -> None:
        if piece:
            self._held.append(piece)
            self._size += len(piece)

    def _track(self, s: str, i: int, out: list[str]) -> int:
        """Follow the groups from ``s[i]``: where the text was read to."""
        n = len(s)
        start = i
        while i < n:
            if self._state == _CLOSED:
                c = s[i]
                if c in _BETWEEN:
                    i += 1
                    continue
                if c in "{[":
                    self._start_group()
                    continue
                # text after the block: it was prose; read on from this character
                self._hold(s[start:i])
                out.append(self.release())
                return i
            if self._escape:
                self._escape = False
                i += 1
                continue
            m = _TOKENS.search(s, i)
            if m is None:
                i = n
                break
            j = m.start()
            c = s[j]
            i = j + 1
            if self._quote:
                if c == "\\":
                    self._escape = True
                elif c == self._quote:
                    self._quote = ""
                continue
            if c in self._quotes:
                self._quote = c
            elif c in _OPENERS:
                if self._depth == 0:  # the group's first bracket says whose strings
                    self._quotes = '"' if c == "{" else "\"'"
                self._depth += 1
                if self._depth > MAX_JSON_DEPTH:
                    self._hold(s[start:i])
                    out.append(self.release())
                    return i
            elif c in "]})":
                self._depth -= 1
                if self._depth <= 0:
                    self._state = _CLOSED
        self._hold(s[start:i])
        return i


def fit_calls(calls: list[ToolCall], tools: ToolIndex) -> bool:
    """Is each call to a declared tool, its arguments fitting the tool's schema as written?

    The test a guessed call must pass (a call after prose): text that merely looks like a call
    to a tool, with arguments the tool cannot take, is prose, never run."""
    if not calls:
        return False
    # (the schema checker is loaded by the first check: reading a reply needs none)
    from ..arguments.pipeline import prepare_arguments

    for call in calls:
        schema = tools.schema(call.name)
        if schema is None:
            return False
        raw = call.arguments_text if call.arguments_text.strip() else call.arguments
        try:
            prepare_arguments(raw, schema, strict=True, name=call.name)
        except ArgumentsError:
            return False
    return True


def end_trailing(
    stream: ReplyStream, trail: TrailingBlock, whole_reply: Callable[[], ReplyStream]
) -> None:
    """The reply is over: what ``trail`` still holds goes out on ``stream``, the candidate
    block read as ``whole_reply()`` (a fresh reader of the family's grammar, with no trailing
    of its own) reads a whole reply.

    A block its marker opened is the family's grammar: its calls are the reply's (and text the
    reader gives after them, as its grammar allows or under a notice it names, the reply's
    text), or it is text with the ``call-not-read`` notice the grammar gives. A bracketed
    block is a guess: only calls that :func:`fit_calls` are read, named
    ``recovered-trailing-call``; else it is text (with a ``call-not-read`` notice when it did
    call a declared tool, so call markup is never shown silently).
    """
    text, block = trail.end()
    opener, trail.opener = trail.opener, ""
    stream._text(text)
    if not block and not opener:
        return
    reply = opener + block
    reader = whole_reply()
    events = reader.feed(reply) + reader.finish()
    calls = [e.call for e in events if isinstance(e, ev.CallEnd)]
    prose = "".join(e.text for e in events if isinstance(e, ev.TextDelta)).strip()
    notices = [e for e in events if isinstance(e, ev.Notice)]
    # After a marker the reader's own grammar decides: text it gives after its calls (a
    # tolerance it names itself) stays text; a guessed block must be nothing but calls.
    read = (
        bool(calls)
        and (not prose or bool(opener))
        and not any(isinstance(e, ev.CallAbort) for e in events)
    )
    if read and not opener:
        read = fit_calls(calls, stream.tools)
        if not read and all(stream.tools.has(c.name) for c in calls):
            stream._notice(
                "call-not-read",
                f"the reply ends with a call to {calls[0].name[:100]} whose arguments do not "
                "fit its schema; it stays text and nothing was run",
            )
    if not read:
        if opener:
            for notice in notices:
                if notice.code == "call-not-read":
                    stream._out.append(notice)
        stream._text(reply)
        return
    for notice in notices:
        if not opener and notice.code in _WHOLE_REPLY_ONLY:
            continue  # the block is not the whole reply: recovered-trailing-call says what it is
        stream._out.append(notice)
    for event in events:
        if isinstance(event, ev.TextDelta):
            stream._text(event.text)
    if not opener:
        names = ", ".join(dict.fromkeys(c.name[:100] for c in calls))[:300]
        stream._notice(
            "recovered-trailing-call",
            f"read the call to {names} the reply ends with, after its prose",
        )
    for call in calls:
        index, cid = stream._new_call(call.name, call.id)
        stream._args(index, call.arguments_text)
        stream._end(index, replace(call, id=cid))
