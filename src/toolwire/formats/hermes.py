"""Hermes: ``<tool_call>\\n{"name": NAME, "arguments": {...}}\\n</tool_call>``.

Written by Qwen2.5, Qwen3, Hermes 2/3, Granite 4 and many fine-tunes of them. Only a JSON
object with exactly ``name`` and ``arguments`` between the tags is a call; anything else
there (Qwen-Coder's XML, doubled braces, a missing closing tag) is reply text. Unless
strict, ``"arguments"`` written as a string holding the JSON object is decoded, and the
repair named in a ``recovered-arguments-string`` notice.

Some templates (vLLM's ``tool_chat_template_hermes_2_pro``) open ``<tool_call>`` once a turn
and close each call: ``<tool_call>\n{…}\n</tool_call> {…}\n</tool_call>``, so a model
trained on them writes its later calls without the opening tag. Unless strict, a call object
right after a closed call (only whitespace between) that ends in its own ``</tool_call>`` is
read, named in a ``recovered-unopened-call`` notice; an object that is not such a call stays
text, with no notice: it never became a call. A ``{`` anywhere else is text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .base import Family
from .callshape import CallShape
from .grammar_forms import NAME_ARGS, tag_block
from .jsoncall import JsonCall
from .markerstream import DONE, WS, Body, MarkerStream
from .reasoning import THINK
from .scan import Markers

__all__ = ["Hermes"]

_OPEN_TAG = "<tool_call>"
_CLOSE_TAG = "</tool_call>"
#: Exactly ``name`` and ``arguments``; unless strict, the arguments may be a string holding
#: their JSON (a named repair).
_SHAPE = CallShape(args_in_string=True)
_PRE, _OBJECT, _POST, _AFTER = range(4)
#: The object that opens a call whose <tool_call> was left out, right after a closed call.
_UNOPENED = "{"
_OPENINGS = Markers((_OPEN_TAG,))
_OPENINGS_AFTER_CALL = Markers((_OPEN_TAG, _UNOPENED))
#: How much whitespace after a closed call is looked through for the next unopened call.
_MAX_GAP = 32


class _HermesBody(Body):
    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.call = JsonCall(stream, _SHAPE)
        #: The call opened at its object: its <tool_call> was left out.
        self.unopened = False
        #: The call is read and a call without its <tool_call> may follow it.
        self.then_unopened = False

    def _after(self, s: str, i: int) -> int:
        """After a closed call, look (without taking it) at what follows: the body ends
        here; when an object comes next, the stream may read it as an unopened call."""
        k = i
        while k < len(s) and s[k] in WS and k - i <= _MAX_GAP:
            k += 1
        if k == len(s) and k - i <= _MAX_GAP:
            return i  # only whitespace so far: wait for what comes after it
        self.then_unopened = k < len(s) and s[k] == _UNOPENED
        self.status = DONE
        return i

    def end_of_reply(self) -> None:
        if self.state == _AFTER:
            self.status = DONE
            return
        super().end_of_reply()

    def step(self, s: str, i: int) -> tuple[int, bool]:
        if self.state == _PRE and self.stream._raw[:1] == [_UNOPENED]:
            self.unopened = True
            self.state = _OBJECT
            self.feed_json_call(self.call, _UNOPENED, 0, "the call is not a JSON object")
            return i, True
        if self.state == _AFTER:
            return self._after(s, i), False
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
        if self.unopened:
            self.stream._notice(
                "recovered-unopened-call",
                "read a call written after a closed call without its opening <tool_call>",
            )
        if self.stream.strict:
            self.status = DONE
            return j, False
        self.state = _AFTER
        return j, True


class HermesStream(MarkerStream):
    marker = _OPEN_TAG
    body_class = _HermesBody

    def new_body(self) -> Body:
        self._opening = _OPENINGS  # type: ignore[misc]  # per reader: after a call or not
        return super().new_body()

    def _close(self, body: Body) -> None:
        super()._close(body)
        if isinstance(body, _HermesBody) and body.status == DONE and body.then_unopened:
            self._opening = _OPENINGS_AFTER_CALL  # type: ignore[misc]

    def _give_back(self, body: Body) -> None:
        if isinstance(body, _HermesBody) and body.unopened:
            for index, cid in body.started:
                self._abort(index, cid, body.reason)
            self._text("".join(self._raw))  # an object that never became a call: text
            self._body = None
            self._raw = []
            return
        super()._give_back(body)


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


_HERMES_FORM = tag_block("<tool_call>", "</tool_call>", NAME_ARGS)


class Hermes(Family):
    name = "hermes"
    label = "Hermes <tool_call> JSON (Qwen2.5, Qwen3, Hermes 2/3, Granite 4)"
    reasoning = THINK
    end_tokens = ("<|im_end|>", "<|endoftext|>")
    kept_tokens = ("</tool_call>",)
    samples = (_sample,)
    markers = (_OPEN_TAG,)
    stream_class = HermesStream
    grammar = _HERMES_FORM
