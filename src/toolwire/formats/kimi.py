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

And one for ids that do not name the tool as the templates write them (``bare-id``; vLLM and
SGLang read both): ``NAME:N`` without the ``functions.`` namespace names NAME, and a bare
counter (``0``) names no tool at all — the call is then to the one declared tool, or to the
one declared tool whose schema takes the arguments (every field one it lists, every field it
requires given); with no such single tool the call stays text with a ``call-not-read``
notice. A bare counter's call is announced once its arguments are whole, so its name is
known; the id kept is the one the model wrote.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..arguments.schema import declared, matching_pattern, resolve
from ..events import Event, NoticeCode, ReasoningDelta
from ..messages import ToolCall
from .base import Family, ToolIndex
from .brokencall import BlockStream, ResyncBody
from .grammar import AnyOf, CallForm, NamedJson, lit
from .grammar_forms import CALL_INDEX
from .jsonscan import ObjectScanner
from .markerstream import DONE, FAILED, OPEN, WS, Body, MarkerStream, expect_any
from .openings import OpeningsStream
from .reasoning import THINK, ReasoningSplitter
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
#: ``NAME:N``, the id without its namespace (a tolerance).
_ID_NO_NAMESPACE = re.compile(r"([^\s<>{}\[\]\"'=:.]+):(\d+)\Z")
#: ``N``, a bare counter: the id names no tool (a tolerance).
_COUNTER = re.compile(r"\d{1,9}\Z")

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
        #: The current call's id is a bare counter: its tool is found from its arguments.
        self.counter = False
        #: ``(index, code, message)`` of the tolerances each call used, told for the calls
        #: read once the block is (a call that breaks after is text, and used none).
        self.told: list[tuple[int, NoticeCode, str]] = []

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
            if self.counter:
                i = self.scanner.feed(s, i)
                if self.scanner.failed:
                    return self.fail(i, "the arguments are not a JSON object"), False
            else:
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
        loose = None if m or self.stream.strict else _ID_NO_NAMESPACE.match(call_id)
        self.counter = not (m or loose or self.stream.strict) and bool(_COUNTER.match(call_id))
        if m is None and loose is None and not self.counter:
            return self.fail(j, f"the call id {call_id[:40]!r} is not functions.NAME:N")
        if any(call_id == cid for _index, cid in self.started):
            return self.fail_block(j, f"the call id {call_id!r} is used twice")
        self.id = call_id
        self.state = _BEFORE_ARGS
        if self.counter:  # announced once its arguments name its tool
            return j
        named = m or loose
        assert named is not None
        self.name = named.group(1)
        self.index, self.id = self.announce(self.name, call_id)
        if loose is not None:
            self.told.append(
                (
                    self.index,
                    "recovered-bare-id",
                    f"the call id {call_id!r} has no functions. namespace: read as a call to "
                    f"{self.name}",
                )
            )
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
        self.counter = False

    def _finish_call(self) -> bool:
        text = self.scanner.text()
        args = self.json_args(text, 0)
        if args is None:
            return False
        if self.counter:
            self.counter = False
            name = fitting_tool(self.stream.tools, args)
            if name is None:
                self.fail(
                    0,
                    f"the call id {self.id!r} names no tool, and no one declared tool "
                    "takes its arguments",
                )
                return False
            self.name = name
            self.index, self.id = self.announce(name, self.id)
            self.stream._args(self.index, text.strip())
            self.told.append(
                (
                    self.index,
                    "recovered-bare-id",
                    f"the call id {self.id!r} names no tool: read as a call to {name}, the one "
                    "declared tool its arguments fit",
                )
            )
        self.calls.append((self.index, ToolCall(self.id, self.name, args, text.strip())))
        return True


def fitting_tool(tools: ToolIndex, args: Mapping[str, object]) -> str | None:
    """The one declared tool a call of ``args`` can be to: the only tool declared, or the only
    one whose schema lists every field given (or takes any) and finds every field it requires;
    None when no tool or several fit (a call must not be guessed)."""
    if not tools.known or not len(tools):
        return None
    if len(tools) == 1:
        return tools.names[0]
    fits = [name for name in tools.names if _takes(tools.schema(name) or {}, args)]
    return fits[0] if len(fits) == 1 else None


def _takes(schema: Mapping[str, object], args: Mapping[str, object]) -> bool:
    props, patterns, is_open = declared(schema, schema)
    if not is_open and any(k not in props and not matching_pattern(patterns, k) for k in args):
        return False
    root = resolve(schema, schema)
    required = root.get("required") if isinstance(root, Mapping) else None
    return all(k in args for k in required) if isinstance(required, list) else True


class KimiK2Stream(BlockStream, OpeningsStream):
    openings = (_SECTION, _CALL)
    body_class = _KimiBody

    def _close(self, body: Body) -> None:
        if body.status == DONE and isinstance(body, _KimiBody):
            read = {index for index, _call in body.calls}
            for index, code, message in body.told:
                if index in read:
                    self._notice(code, message)
        super()._close(body)

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
        elif not (self._reasoning.deciding or self._reasoning.thinking):  # thinking is over
            self._watching = False
            out += super().feed(self._take_pending())
        return out

    def _take_pending(self) -> str:
        pending, self._pending = self._pending, ""
        return pending

    def _cut_thinking(self, token: str) -> list[Event]:
        """A call token came: inside thinking that never closed, it ends the thinking."""
        self._watching = False
        if not self._reasoning.thinking:
            return []
        for _thinking, piece in self._reasoning.finish():
            self._out.append(ReasoningDelta(piece))
        self._reasoning = ReasoningSplitter()
        self._notice("recovered-thinking-unclosed", f"{token} ended thinking that was never closed")
        return self._take()

    def finish(self) -> list[Event]:
        out = super().feed(self._take_pending()) if self._pending else []
        return out + super().finish()


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    return (
        f"<|tool_calls_section_begin|><|tool_call_begin|>functions.{name}:0"
        "<|tool_call_argument_begin|>" + json.dumps(args) + "<|tool_call_end|>"
        "<|tool_calls_section_end|>"
    )


_KIMI_BODY = NamedJson(
    before=lit("functions."),
    between=f'":" {CALL_INDEX} {lit("<|tool_call_argument_begin|>")}',
    lead=False,
)

_KIMI_CALL = (lit("<|tool_call_begin|>"), lit("<|tool_call_end|>"))

_KIMI_K2_FORM = AnyOf(
    (
        CallForm(
            _KIMI_BODY,
            open=lit("<|tool_calls_section_begin|>"),
            close=lit("<|tool_calls_section_end|>"),
            call_open=_KIMI_CALL[0],
            call_close=_KIMI_CALL[1],
            triggers=("<|tool_calls_section_begin|>",),
        ),
        CallForm(
            _KIMI_BODY,
            call_open=_KIMI_CALL[0],
            call_close=_KIMI_CALL[1],
            triggers=("<|tool_call_begin|>",),
        ),
    )
)


class KimiK2(Family):
    name = "kimi-k2"
    label = "Kimi K2 <|tool_calls_section_begin|> functions.NAME:N + JSON (Kimi K2)"
    reasoning = THINK
    # its templates read a call's name from its id (a tool result's name too)
    call_ids = "functions"
    kept_tokens = (
        "<|tool_call_argument_begin|>",
        "<|tool_call_end|>",
        "<|tool_calls_section_end|>",
    )
    samples = (_sample,)
    markers = (_SECTION, _CALL)
    stream_class = KimiK2Stream
    grammar = _KIMI_K2_FORM
