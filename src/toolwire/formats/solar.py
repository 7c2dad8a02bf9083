"""Solar Open (Upstage): special tokens around each call's id, name and JSON arguments.

In full: ``<|tool_calls|><|tool_call:begin|>ID<|tool_call:name|>NAME<|tool_call:args|>{...}``
``<|tool_call:end|>``, the ``<|tool_call:begin|>…<|tool_call:end|>`` part repeated for each
call of the turn, and ``<|calls|>`` may close the block. The id the model writes is kept as the
call's id (a fresh one is made when it writes none, or one the reply already used). Text after the
last call is reply text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .base import Family
from .grammar import CallForm, NamedJson, lit
from .grammar_forms import CALL_ID
from .markerstream import DONE, OPEN, MarkerStream, expect_any
from .openings import ArgsBody, OpeningsStream, end_after_call
from .textargs import MAX_NAME, NameReader

__all__ = ["SolarOpen"]

_CALLS = "<|tool_calls|>"
_BEGIN = "<|tool_call:begin|>"
_NAME = "<|tool_call:name|>"
_ARGS = "<|tool_call:args|>"
_END = "<|tool_call:end|>"
_CLOSE = "<|calls|>"

_FIRST, _ID, _NAME_TAG, _NAME_TEXT, _ARGS_TAG, _OBJ_WAIT, _OBJECT, _END_TAG, _AFTER = range(9)

#: After each literal, the state that follows it.
_LITERALS = {
    _FIRST: (_BEGIN, _ID),
    _NAME_TAG: (_NAME, _NAME_TEXT),
    _ARGS_TAG: (_ARGS, _OBJ_WAIT),
    _END_TAG: (_END, _AFTER),
}


class _SolarBody(ArgsBody):
    stream: SolarOpenStream

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.names = NameReader("<", "tool name")
        self.id_parts: list[str] = []

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state in _LITERALS:
            literal, then = _LITERALS[state]
            j = self.expect(s, i, literal, f"expected {literal}")
            if j >= 0:
                self.state = then
            return max(i, j), j >= 0
        if state == _ID:
            return self._id(s, i)
        if state == _NAME_TEXT:
            name, i = self.names.read(self, s, i)
            if name is not None:
                self.name = name
                self.state = _ARGS_TAG
            return i, name is not None
        if state == _OBJ_WAIT:
            i, found = self.object_start(s, i, f"no JSON object after {_ARGS}")
            if found:
                call_id = "".join(self.id_parts)
                used = call_id in self.stream.ids
                self.start_args(self.name, None if used or not call_id else call_id)
                self.stream.ids.add(self.call_id)
                self.state = _OBJECT
            return i, self.status == OPEN
        if state == _OBJECT:
            i, complete = self.read_args(s, i)
            if complete:
                self.state = _END_TAG
            return i, complete
        # _AFTER: the next call, the block's close, or text after the calls
        status, j, literal = expect_any(s, i, (_BEGIN, _CLOSE))
        if status == OPEN:
            return i, False
        if literal == _BEGIN:
            self.state = _ID
            self.id_parts = []
            return j, True
        self.status = DONE
        return (j if literal else i), False

    def _id(self, s: str, i: int) -> tuple[int, bool]:
        """The call id runs up to the next ``<``."""
        # looked for no further than an id may reach: the text after it is not read here
        j = s.find("<", i, i + MAX_NAME + 1)
        stop = min(len(s), i + MAX_NAME + 1) if j < 0 else j
        self.id_parts.append(s[i:stop])
        if sum(map(len, self.id_parts)) > MAX_NAME:
            return self.fail(i, "a malformed call id"), False
        if j >= 0:
            self.state = _NAME_TAG
        return stop, j >= 0

    def end_of_reply(self) -> None:
        if self.state == _AFTER:
            end_after_call(self)
        else:
            super().end_of_reply()


class SolarOpenStream(OpeningsStream):
    openings = (_CALLS,)
    body_class = _SolarBody

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The call ids of the reply so far: each call's id is its own.
        self.ids: set[str] = set()


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    return (
        f"<|tool_calls|><|tool_call:begin|>call{index}<|tool_call:name|>{name}"
        f"<|tool_call:args|>{json.dumps(args)}<|tool_call:end|><|calls|>"
    )


_SOLAR_OPEN_FORM = CallForm(
    NamedJson(
        before=f"{lit('<|tool_call:begin|>')} {CALL_ID} {lit('<|tool_call:name|>')}",
        between=lit("<|tool_call:args|>"),
        after=lit("<|tool_call:end|>"),
    ),
    open=lit("<|tool_calls|>"),
    close=f"({lit('<|calls|>')})?",
    triggers=("<|tool_calls|>",),
)


class SolarOpen(Family):
    name = "solar-open"
    label = (
        "Solar Open <|tool_call:begin|>ID<|tool_call:name|>NAME<|tool_call:args|>{...} (Solar Open)"
    )
    kept_tokens = (
        "<|tool_call:begin|>",
        "<|tool_call:name|>",
        "<|tool_call:args|>",
        "<|tool_call:end|>",
        "<|calls|>",
    )
    samples = (_sample,)
    markers = (_CALLS,)
    stream_class = SolarOpenStream
    grammar = _SOLAR_OPEN_FORM
