"""DeepSeek R1 (and its distills) and DeepSeek V3.1: calls in a ``<｜tool▁calls▁begin｜>`` block.

R1 writes each call as ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME`` then a fenced JSON
object::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
    ```json
    {...}
    ```<｜tool▁call▁end｜>
    <｜tool▁call▁begin｜>…<｜tool▁call▁end｜><｜tool▁calls▁end｜>

V3.1 drops the type and the fence:
``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>``.

The two share their markers, so each reads only its own shape: R1's ``function<｜tool▁sep｜>``
is not a V3.1 name followed by JSON, and a V3.1 name is not R1's ``function`` type. Whitespace
is allowed between the pieces; anything else breaks the block, which then stays reply text.
The arguments are the JSON object as written, untyped; the calls end when the block closes
(for R1, also when the turn ends after a complete call: its templates write one call's block
without the closer, so that is R1's grammar, not a repair).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from ..messages import ToolCall
from .base import Family
from .grammar import CallForm, NamedJson, lit
from .jsonscan import ObjectScanner
from .markerstream import DONE, OPEN, WS, Body, MarkerStream
from .reasoning import THINK
from .textargs import LOOSE_NAME_BREAKS, NameReader

__all__ = ["DeepSeekR1", "DeepSeekV31"]

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"
_R1_TYPE = "function" + SEP
_FENCE_OPEN = "```json"
_FENCE_CLOSE = "```"


_CALL, _TYPE, _NAME, _SEP, _FENCE, _ARGS, _FENCE_END, _CALL_END, _NEXT = range(9)


class _BlockBody(Body):
    """One ``<｜tool▁calls▁begin｜>`` block, in R1's shape or V3.1's."""

    #: R1's shape (type, name line, fenced JSON) when True; V3.1's (name, separator, JSON) else.
    fenced: ClassVar[bool]

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self._name = NameReader("\n" if self.fenced else "<", "tool name", bad=LOOSE_NAME_BREAKS)
        self._scanner = ObjectScanner()
        self.index = -1
        self.id = ""
        self.call_name = ""

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _NAME:
            name, i = self._name.feed(s, i)
            if self._name.problem:
                return self.fail(i, self._name.problem), False
            if name is None:
                return i, False
            self.call_name = name
            if self.fenced:
                i += 1  # the newline that ends the name
                self._announce()
                self.state = _FENCE
            else:
                self.state = _SEP
            return i, True
        if state == _ARGS:
            i = self.feed_args(self._scanner, self.index, s, i)
            if self.status != OPEN or not self._scanner.done:
                return i, False
            text = self._scanner.text().strip()
            args = self.json_args(text, i)
            if args is None:
                return i, False
            self.calls.append((self.index, ToolCall(self.id, self.call_name, args, text)))
            self.state = _FENCE_END if self.fenced else _CALL_END
            return i, True
        if s[i] in WS and state not in (_TYPE, _SEP):
            i += 1
            return i, True
        if state == _CALL:
            j = self.expect(s, i, CALL_BEGIN, f"no {CALL_BEGIN} after {CALLS_BEGIN}")
            if j < 0:
                return i, False
            self.state = _TYPE if self.fenced else _NAME
            i = j
        elif state == _TYPE:
            j = self.expect(s, i, _R1_TYPE, f"no function{SEP} after {CALL_BEGIN}")
            if j < 0:
                return i, False
            self.state = _NAME
            i = j
        elif state == _SEP:
            j = self.expect(s, i, SEP, f"no {SEP} after the tool's name")
            if j < 0:
                return i, False
            self._announce()
            self.state = _ARGS
            i = j
        elif state == _FENCE:
            j = self.expect(s, i, _FENCE_OPEN, "no ```json fence after the tool's name")
            if j < 0:
                return i, False
            self.state = _ARGS
            i = j
        elif state == _FENCE_END:
            j = self.expect(s, i, _FENCE_CLOSE, "no closing ``` after the arguments")
            if j < 0:
                return i, False
            self.state = _CALL_END
            i = j
        elif state == _CALL_END:
            j = self.expect(s, i, CALL_END, f"text after the arguments before {CALL_END}")
            if j < 0:
                return i, False
            self.state = _NEXT
            i = j
        else:  # _NEXT
            j, literal = self.expect_one(
                s, i, (CALL_BEGIN, CALLS_END), f"expected {CALL_BEGIN} or {CALLS_END}"
            )
            if j < 0:
                return i, False
            if literal == CALLS_END:
                self.status = DONE
                return j, False
            self._next_call()
            i = j
        return i, True

    def end_of_reply(self) -> None:
        """R1's templates close the block only after a second call: one call's turn ends
        right after ``<｜tool▁call▁end｜>``, and that is how the model learned to write it.
        So in R1's grammar the end of the turn after a complete call also ends the block;
        a reply that stops inside a call is still no call."""
        if self.fenced and self.state == _NEXT and self.calls:
            self.status = DONE
            return
        super().end_of_reply()

    def _announce(self) -> None:
        self.index, self.id = self.announce(self.call_name)

    def _next_call(self) -> None:
        self.state = _TYPE if self.fenced else _NAME
        self._name = NameReader(self._name.stops, "tool name", bad=LOOSE_NAME_BREAKS)
        self._scanner = ObjectScanner()


class _R1Body(_BlockBody):
    fenced = True


class _V31Body(_BlockBody):
    fenced = False


class DeepSeekR1Stream(MarkerStream):
    marker = CALLS_BEGIN
    body_class = _R1Body


class DeepSeekV31Stream(MarkerStream):
    marker = CALLS_BEGIN
    body_class = _V31Body


def _calls(call: str) -> str:
    begin, end = (
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>",
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    )
    return begin + call + end


def _r1_sample(name: str, args: Mapping[str, Any], index: int) -> str:
    return _calls("function<｜tool▁sep｜>" + name + "\n```json\n" + json.dumps(args) + "\n```")


def _v31_sample(name: str, args: Mapping[str, Any], index: int) -> str:
    return _calls(name + "<｜tool▁sep｜>" + json.dumps(args))


_DS_CALLS = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>")

_DS_CALL = (lit("<｜tool▁call▁begin｜>"), lit("<｜tool▁call▁end｜>"))

_DEEPSEEK_V31_FORM = CallForm(
    NamedJson(between=lit("<｜tool▁sep｜>")),
    open=lit(_DS_CALLS[0]),
    close=lit(_DS_CALLS[1]),
    call_open=_DS_CALL[0],
    call_close=_DS_CALL[1],
    triggers=(_DS_CALLS[0],),
)

# the R1 distills' templates render a single call without the block's closing token
_DEEPSEEK_R1_FORM = CallForm(
    NamedJson(
        before=lit("function<｜tool▁sep｜>"), between=lit("\n```json"), after='"```"', lead=False
    ),
    open=lit(_DS_CALLS[0]),
    close=f"({lit(_DS_CALLS[1])})?",
    call_open=_DS_CALL[0],
    call_close=_DS_CALL[1],
    triggers=(_DS_CALLS[0],),
)


class DeepSeekR1(Family):
    name = "deepseek-r1"
    label = "DeepSeek R1 function<｜tool▁sep｜>NAME + fenced JSON (DeepSeek R1 and its distills)"
    reasoning = THINK
    end_tokens = ("<｜end▁of▁sentence｜>",)
    kept_tokens = (
        "<｜tool▁call▁begin｜>",
        "<｜tool▁sep｜>",
        "<｜tool▁call▁end｜>",
        "<｜tool▁calls▁end｜>",
    )
    samples = (_r1_sample,)
    markers = (CALLS_BEGIN,)
    stream_class = DeepSeekR1Stream
    grammar = _DEEPSEEK_R1_FORM


class DeepSeekV31(Family):
    name = "deepseek-v3.1"
    label = "DeepSeek V3.1 NAME<｜tool▁sep｜>JSON (DeepSeek V3.1)"
    reasoning = THINK
    end_tokens = ("<｜end▁of▁sentence｜>",)
    kept_tokens = (
        "<｜tool▁call▁begin｜>",
        "<｜tool▁sep｜>",
        "<｜tool▁call▁end｜>",
        "<｜tool▁calls▁end｜>",
    )
    samples = (_v31_sample,)
    markers = (CALLS_BEGIN,)
    stream_class = DeepSeekV31Stream
    grammar = _DEEPSEEK_V31_FORM
