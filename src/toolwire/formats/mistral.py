"""Mistral: ``[TOOL_CALLS]`` then a JSON list of calls, or one call by name.

Two generations of the grammar:

- ``[TOOL_CALLS][{"name": NAME, "arguments": {...}, "id": ID}, ...]`` — Mistral 7B v0.3, Nemo;
- ``[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...}`` and ``[TOOL_CALLS]NAME[ARGS]{...}`` — Mistral
  Small 3.2, Ministral 3, Devstral; each call opens with its own ``[TOOL_CALLS]``. Unless
  strict, ``[TOOL_CALLS]NAME{...}`` (no ``[ARGS]``, as vLLM's v11 tests write it) is read too,
  named ``recovered-args-marker-missing``.

Text may come before a call. Mistral's templates insist on call ids of 9 alphanumerics, so
this family asks for them when a conversation is rendered.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..messages import ToolCall
from .base import Family
from .callshape import CallShape
from .grammar import AnyOf, CallForm, NamedJson
from .grammar import JsonCall as JsonForm
from .grammar_forms import CALL_ID, json_list
from .jsoncall import JsonCall
from .jsonscan import ObjectScanner
from .markerstream import DONE, OPEN, WS, Body, MarkerStream, expect_any
from .reasoning import ReasoningTags

__all__ = ["Mistral"]

_MARKER = "[TOOL_CALLS]"
_ARGS = "[ARGS]"
_CALL_ID = "[CALL_ID]"
_NAME_CHARS = re.compile(r"[A-Za-z0-9_.\-]*")
_ID_CHARS = re.compile(r"[A-Za-z0-9_\-]*")
_MAX_NAME = 256

_PRE, _NAME, _ID, _OBJ_WAIT, _OBJECT, _LIST, _LIST_NEXT = range(7)


#: A list item: ``name``, ``arguments`` and the call's ``id``, a string, if any; Nemo writes
#: the id after the arguments, so an item is announced once complete, with the model's id.
_ITEM = CallShape(id_key="id")


class _MistralBody(Body):
    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.parts: list[str] = []
        self.name = ""
        self.call_id = ""
        self.index = -1
        self.scanner: ObjectScanner | None = None
        self.item: JsonCall | None = None
        self.unmarked = False  # [ARGS] was not written

    # -- [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...}

    def _word(self, s: str, i: int, chars: re.Pattern[str]) -> tuple[str | None, int]:
        """Read name or id characters; at ``[`` return the word, else None (more, or fail)."""
        m = chars.match(s, i)
        j = m.end() if m else i
        self.parts.append(s[i:j])
        if sum(map(len, self.parts)) > _MAX_NAME:
            self.fail(j, "a name or id that is too long")
            return None, j
        if j == len(s):
            return None, j
        if s[j] == "{" and chars is _NAME_CHARS and any(self.parts) and not self.stream.strict:
            return self._args_unmarked(j)
        if s[j] != "[":
            self.fail(j, "an unexpected character in the call's name")
            return None, j
        word = "".join(self.parts)
        self.parts = []
        return word, j

    def _args_unmarked(self, j: int) -> tuple[str | None, int]:
        """``[TOOL_CALLS]NAME{...}``: the arguments right after the name, ``[ARGS]`` not
        written (vLLM reads Mistral v11 calls so). The marker made the call certain and ``{``
        cannot be part of a name, so the name ends there — a tolerance, named."""
        self.name = "".join(self.parts)
        self.parts = []
        self.unmarked = True  # named once the call is read
        self.index, self.call_id = self.announce(self.name, None)
        self.state = _OBJ_WAIT
        return None, j

    def _after_word(self, s: str, i: int, allow_id: bool) -> tuple[int, bool]:
        """Match ``[ARGS]`` (or ``[CALL_ID]``): the new index, and whether more text is needed."""
        status, j, literal = expect_any(s, i, (_ARGS, _CALL_ID) if allow_id else (_ARGS,))
        if status == OPEN:
            return i, True
        if status != DONE:
            return self.fail(i, f"expected {_ARGS} after the call's name"), False
        if literal == _CALL_ID:
            self.state = _ID
            return j, False
        self.index, self.call_id = self.announce(self.name, self.call_id or None)
        self.state = _OBJ_WAIT
        return j, False

    def _object(self, s: str, i: int) -> int:
        assert self.scanner is not None
        k = self.feed_args(self.scanner, self.index, s, i)
        if self.status != OPEN or not self.scanner.done:
            return k
        text = self.scanner.text()
        args = self.json_args(text, k)
        if args is None:
            return k
        if self.unmarked:
            self.stream._notice(
                "recovered-args-marker-missing",
                f"read the call to {self.name[:100]} whose arguments follow its name "
                f"without {_ARGS}",
            )
        self.calls.append((self.index, ToolCall(self.call_id, self.name, args, text)))
        self.status = DONE
        return k

    def feed(self, s: str, i: int) -> int:
        n = len(s)
        while i < n and self.status == OPEN:
            state = self.state
            if state == _OBJECT:
                i = self._object(s, i)
                if self.status == OPEN:  # the object wants more (the rest may be held)
                    return i
                continue
            if state == _LIST and self.item is not None:  # [TOOL_CALLS][{...}, ...]
                i, ended = self.feed_json_call(self.item, s, i, "a list item is not a JSON object")
                if not ended:
                    return i
                self.item = None
                self.state = _LIST_NEXT
                continue
            if state in (_NAME, _ID):
                word, i = self._word(s, i, _NAME_CHARS if state == _NAME else _ID_CHARS)
                if word is None:
                    if self.state == _OBJ_WAIT:  # the name ended at "{": its arguments follow
                        continue
                    return i
                if state == _NAME:
                    if not word:
                        return self.fail(i, "a call with no name")
                    self.name = word
                else:
                    self.call_id = word
                i, waiting = self._after_word(s, i, allow_id=state == _NAME)
                if waiting:
                    self.parts = [word]  # read the word again with the rest of the literal
                    return i
                continue
            c = s[i]
            if state == _PRE:
                if c in WS:
                    i += 1
                elif c == "[":
                    self.state = _LIST
                    i += 1
                else:
                    self.state = _NAME
                continue
            if c in WS:
                i += 1
                continue
            if state == _OBJ_WAIT:
                if c != "{":
                    return self.fail(i, f"no JSON object after {_ARGS}")
                self.scanner = ObjectScanner()
                self.state = _OBJECT
            elif state == _LIST:
                if c != "{":
                    return self.fail(i, "the call list does not hold objects")
                self.item = JsonCall(self.stream, _ITEM, announce_at_end=True)
            else:  # _LIST_NEXT
                if c == ",":
                    self.state = _LIST
                    i += 1
                elif c == "]":
                    self.status = DONE
                    return i + 1
                else:
                    return self.fail(i, "expected , or ] in the call list")
        return i


class MistralStream(MarkerStream):
    marker = _MARKER
    body_class = _MistralBody


def _list_sample(name: str, args: Mapping[str, Any], index: int) -> str:
    """The list form, with an id (Mistral 7B v0.3, Nemo)."""
    return "[TOOL_CALLS]" + json.dumps([{"name": name, "arguments": args, "id": "a1b2c3d4e"}])


def _args_sample(name: str, args: Mapping[str, Any], index: int) -> str:
    """``[TOOL_CALLS]NAME[ARGS]{...}`` (Small 3.2, Ministral 3, Devstral)."""
    return "[TOOL_CALLS]" + name + "[ARGS]" + json.dumps(args)


_MISTRAL_FORM = AnyOf(
    (
        json_list("[TOOL_CALLS]", JsonForm(id_key="id")),
        CallForm(
            NamedJson(between=f'("[CALL_ID]" {CALL_ID})? "[ARGS]"'),
            open='"[TOOL_CALLS]"',
            blocks=True,
            triggers=("[TOOL_CALLS]",),
        ),
    )
)


class Mistral(Family):
    name = "mistral"
    label = "Mistral [TOOL_CALLS] (7B v0.3, Nemo, Small 3.2, Ministral 3, Devstral)"
    reasoning = ReasoningTags(blocks={"[THINK]": "[/THINK]"})
    end_tokens = ("</s>",)
    kept_tokens = ("[ARGS]", "[CALL_ID]")
    samples = (_list_sample, _args_sample)
    markers = (_MARKER,)
    call_ids = "alnum9"
    stream_class = MistralStream
    grammar = _MISTRAL_FORM
