"""Command R+ (Cohere): ``Action:`` then a fenced JSON list of ``tool_name``/``parameters``.

In full: ``Action:\\n```json\\n[{"tool_name": NAME, "parameters": {...}}, ...]\\n```````, the
list grammar of :mod:`~toolwire.formats.listcalls` (the items are Command R7B's, without the
call ids) behind a code fence. Text may come before it.

``directly-answer`` is the template's pseudo-tool for "no tool is needed, answer in text":
it is not a call. Its items are left out of the calls, and a block holding nothing else is no
call at all (a ``directly-answer`` notice says so) — unless the caller declared a real tool of
that name. ``Action:`` not followed by a ```` ```json ```` fence is prose, with no notice.

A reply may open with the role token ``<|CHATBOT_TOKEN|>`` (the template's turn opener, which
a reader of the raw output sees); it is dropped there, as llama.cpp does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .base import Family, ToolIndex
from .callshape import CallShape
from .grammar import CallForm, JsonCall, lit
from .listcalls import ITEM, LIST_OPEN, NEXT, JsonListStream, ListBody, ListGrammar
from .markerstream import DONE, FAILED, WS, MarkerStream
from .openings import OpeningsStream

__all__ = ["CommandRPlus"]

_ACTION = "Action:"
_FENCE = "```json"
_ROLE = "<|CHATBOT_TOKEN|>"
_DIRECT = "directly-answer"
_DIRECT_PROBLEM = "the directly-answer pseudo-tool is not a call"

_FENCE_WAIT = -1  # before the list's fence; the list grammar's own states are from 0


@dataclass(frozen=True)
class _ActionShape(CallShape):
    """Command R's items, where ``directly-answer`` names no tool (unless one is declared)."""

    def name_problem(self, name: str, tools: ToolIndex) -> str:
        if name == _DIRECT and not tools.has(_DIRECT):
            return _DIRECT_PROBLEM
        return super().name_problem(name, tools)


COMMAND_R_PLUS = ListGrammar(
    _ACTION, _ActionShape(name_key="tool_name", args_keys=("parameters",)), "```"
)


class _ActionBody(ListBody):
    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.state = _FENCE_WAIT
        self.quiet = False
        self.direct = False  # a directly-answer item was read
        self._skipped = False

    def step(self, s: str, i: int) -> tuple[int, bool]:
        if self.state == _FENCE_WAIT:
            if s[i] in WS:
                return i + 1, True
            j = self.expect(s, i, _FENCE, f"no {_FENCE} fence after {_ACTION}")
            if j < 0:
                self.quiet = self.status == FAILED  # prose after "Action:", not call markup
                return i, False
            self.state = LIST_OPEN
            return j, True
        j, go_on = super().step(s, i)
        if self._skipped:  # a directly-answer item ended: on to the next item
            self._skipped = False
            return j, True
        return j, go_on

    def fail(self, i: int, reason: str) -> int:
        item = self.item
        if reason == _DIRECT_PROBLEM and self.state == ITEM and item and item.scanner.done:
            self.item = None  # the whole item is read: skip it
            self.state = NEXT
            self.direct = self._skipped = True
            return i
        return super().fail(i, reason)


class CommandRPlusStream(OpeningsStream, JsonListStream):
    grammar = COMMAND_R_PLUS
    body_class = _ActionBody
    turn_end = "<|END_OF_TURN_TOKEN|>"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lead: str | None = ""  # the reply's start, while it may be the role token

    def _content(self, text: str) -> None:
        if self._lead is not None:
            s = self._lead + text
            if len(s) < len(_ROLE) and _ROLE.startswith(s):
                self._lead = s
                return
            self._lead = None
            text = s[len(_ROLE) :] if s.startswith(_ROLE) else s
        if text:
            super()._content(text)

    def _content_end(self) -> None:
        if self._lead:
            super()._content(self._lead)
        self._lead = None
        super()._content_end()

    def _close(self, body: Any) -> None:
        direct = isinstance(body, _ActionBody) and body.direct
        if direct and body.status == DONE and not body.calls:
            self._notice("directly-answer", "the model chose to answer in text, not a tool")
        super()._close(body)


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    return "Action:\n```json\n" + json.dumps([{"tool_name": name, "parameters": args}]) + "\n```"


_COMMAND_R_PLUS_FORM = CallForm(
    JsonCall("tool_name", "parameters"),
    open=f'{lit("Action:")} space {lit("```json")} space "["',
    close='"]" space "```"',
    sep='","',
    triggers=("Action:\n```json",),  # "Action:" alone may be prose
    prefix=lit("<|CHATBOT_TOKEN|>"),
)


class CommandRPlus(Family):
    name = "command-r-plus"
    label = "Cohere Action: ```json [...]``` (Command R+)"
    # a call's turn is written without its end: the next turn's start ends it
    end_tokens = ("<|END_OF_TURN_TOKEN|>", "<|START_OF_TURN_TOKEN|>")
    drops_tokens = True
    samples = (_sample,)
    markers = (_ACTION, _ROLE)
    stream_class = CommandRPlusStream
    grammar = _COMMAND_R_PLUS_FORM
