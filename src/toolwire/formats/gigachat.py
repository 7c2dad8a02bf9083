"""GigaChat 3 and 3.1 (Sber): the call is a message of its own role, one JSON object.

- GigaChat 3: the assistant's message ends (``<|message_sep|>``), and a ``function call``
  message follows: ``<|message_sep|>\\n\\nfunction call<|role_sep|>\\n{"name": NAME,
  "arguments": {...}}``, itself ended by ``<|message_sep|>\\n\\n``.
- GigaChat 3.1: ``<|function_call|>{"name": NAME, "arguments": {...}}``.

The whole separator, role name and all, opens the call: ``<|message_sep|>`` alone only ends
a message, and is no call. The templates render one call per turn (the first of the turn's
calls); a reply that writes another call message after the first (or another
``<|function_call|>``) is read as a second call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .base import Family
from .callshape import CallShape
from .grammar import AnyOf, CallForm, lit
from .grammar_forms import NAME_ARGS
from .jsoncall import JsonCall
from .markerstream import DONE, OPEN, WS, Body, MarkerStream, expect_literal
from .openings import OpeningsStream, end_after_call

__all__ = ["GigaChat"]

_MESSAGE_SEP = "<|message_sep|>"
_CALL_V3 = _MESSAGE_SEP + "\n\nfunction call<|role_sep|>"
_CALL_V31 = "<|function_call|>"
_SHAPE = CallShape()

_PRE, _OBJECT, _POST = range(3)


class _GigaChatBody(Body):
    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.call = JsonCall(stream, _SHAPE)

    def step(self, s: str, i: int) -> tuple[int, bool]:
        if self.state == _OBJECT:
            i, ended = self.feed_json_call(self.call, s, i, "the call is not a JSON object")
            if ended:
                self.state = _POST
            return i, ended
        if self.state == _PRE:
            if s[i] in WS:
                return i + 1, True
            if s[i] != "{":
                return self.fail(i, "no JSON object after the function call role"), False
            self.state = _OBJECT
            return i, True
        # _POST: another call message, the message's own separator, or reply text
        status, j = expect_literal(s, i, _CALL_V3)
        if status == DONE:  # the separator ends this call's message and opens the next
            self.call = JsonCall(self.stream, _SHAPE)
            self.state = _PRE
            return j, True
        if status == OPEN:
            return i, False
        status, j = expect_literal(s, i, _MESSAGE_SEP)
        self.status = DONE
        return (j if status == DONE else i), False

    def end_of_reply(self) -> None:
        if self.state != _POST:
            super().end_of_reply()
            return
        raw = self.stream._raw
        if raw[-1].startswith(_MESSAGE_SEP):  # the call's message ended; the rest is text
            raw[-1] = raw[-1][len(_MESSAGE_SEP) :]
        end_after_call(self)


class GigaChatStream(OpeningsStream):
    openings = (_CALL_V3, _CALL_V31)
    body_class = _GigaChatBody
    turn_end = "</s>"  # the models' end-of-sequence token


def _message_sample(name: str, args: Mapping[str, Any], index: int) -> str:
    """The call as a message of its own, after an empty content."""
    call = json.dumps({"name": name, "arguments": args})
    return "<|message_sep|>\n\nfunction call<|role_sep|>\n" + call + "<|message_sep|>\n\n"


def _token_sample(name: str, args: Mapping[str, Any], index: int) -> str:
    return "<|function_call|>" + json.dumps({"name": name, "arguments": args})


_GIGACHAT_FORM = AnyOf(
    (
        CallForm(
            NAME_ARGS,
            open=lit("<|message_sep|>\n\nfunction call<|role_sep|>"),
            close=f"({lit('<|message_sep|>')})?",
            blocks=True,
            triggers=("<|message_sep|>\n\nfunction call<|role_sep|>",),
        ),
        CallForm(
            NAME_ARGS, open=lit("<|function_call|>"), blocks=True, triggers=("<|function_call|>",)
        ),
    )
)


class GigaChat(Family):
    name = "gigachat"
    label = "GigaChat function call<|role_sep|> JSON (GigaChat 3, 3.1)"
    samples = (_message_sample, _token_sample)
    markers = (_CALL_V3, _CALL_V31)
    stream_class = GigaChatStream
    grammar = _GIGACHAT_FORM
    one_call_per_message = True
