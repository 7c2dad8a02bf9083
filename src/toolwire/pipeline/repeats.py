"""Calls a model repeats: one place for every transport, the loop and the gateway.

Small local models, once a tool's result is back, often write the same call again, and
again, until the token limit. Two cases are caught (both off with ``strict``):

* a call repeated within one reply (same name, same arguments) is not returned, and the
  reply ends there: generation is closed so no more tokens are spent;
* a call identical to the one whose result ends the conversation is not returned; when
  nothing was said before it, the model is asked once more without tools, so the user gets
  an answer. Either way a ``repeated-call`` notice names it. (An answer to that retry that
  is the call again, as text, is named like any call written on a turn without tools:
  ``call-without-tools``, by :func:`toolwire.pipeline.reply.read`.)

Arguments are compared after typing by the tool's schema (``"3"`` and ``3`` for an integer
are the same call), else as canonical JSON.

A call whose name was already called (in this reply, or the call just answered) may be a
repeat, so it is held — a repeat must never have reached the client — until its arguments
show it cannot be one: a field given early (:class:`~toolwire.arguments.streamed.
ArgumentWriter`, the bytes typing cannot change) that no earlier call of its name has so, or
a text value that parts from theirs. From then it passes as it comes and streams (an agent
calls the same tool turn after turn, each time with other arguments); a call that may still
be a repeat at its end is given on whole or dropped there. Any other call passes as it
comes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .. import events as ev
from ..arguments import prepare_arguments
from ..arguments.streamed import ArgumentWriter
from ..errors import ArgumentsError
from ..events import Event
from ..formats.base import loads_json
from ..messages import ToolCall
from .request import Request

__all__ = ["ANSWER_NOW", "Repeats", "call_key", "without_tools"]

#: What the model is asked, once, when it wrote again the call whose result it was just given.
#: Sent only with that retry, never kept in the conversation: small models, shown the same
#: conversation without tools, copy their call again as text (the default local model does).
ANSWER_NOW = "Using the tool results above, answer my question in words; do not call a tool again."

Key = tuple[str, str]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def call_key(
    name: str,
    raw: str | Mapping[str, Any],
    schema: Mapping[str, Any] | None,
    *,
    text_values: bool = False,
) -> Key:
    """What makes two calls the same: the name, and the arguments typed by the schema (or,
    when they cannot be typed, as canonical JSON, or else the text as written)."""
    if schema is not None:
        try:
            done = prepare_arguments(raw, schema, name=name, text_values=text_values)
        except ArgumentsError:
            pass
        else:
            return name, _canonical(done.arguments)
    if isinstance(raw, str):
        try:
            return name, _canonical(loads_json(raw or "{}"))
        except ValueError:
            return name, raw.strip()
    return name, _canonical(dict(raw))


def _answered(request: Request) -> set[Key]:
    """The calls whose results end the conversation: its last messages are an assistant
    turn with calls, then their tool results."""
    messages = list(request.messages)
    i = len(messages)
    while i > 0 and messages[i - 1].get("role") == "tool":
        i -= 1
    if i == len(messages) or i == 0:
        return set()
    turn = messages[i - 1]
    if turn.get("role") != "assistant":
        return set()
    keys: set[Key] = set()
    for call in turn.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            continue
        arguments = fn.get("arguments")
        if not isinstance(arguments, (str, Mapping)):
            arguments = "{}" if arguments is None else _canonical(arguments)
        keys.add(call_key(fn["name"], arguments, request.index.schema(fn["name"])))
    return keys


class _Probe:
    """What a held call may still repeat: the earlier calls of its name (their arguments as
    their keys have them) that what it has given so far does not rule out."""

    def __init__(self, name: str, schema: Mapping[str, Any] | None, candidates: list[Key]) -> None:
        self.name = name
        self._writer = ArgumentWriter(schema)
        self._left: list[dict[str, Any]] | None = []
        for key in candidates:
            self.add(key)
        self._read = 0  # of the writer's given values
        self._text: tuple[str, int] = ("", 0)  # the text field being compared, and how far

    def add(self, key: Key) -> None:
        """Another call it may repeat (one kept while it was held)."""
        try:
            value = json.loads(key[1])
        except ValueError:
            value = None
        if self._left is not None:
            # a call whose arguments are no object is compared only at the end
            self._left = [*self._left, value] if isinstance(value, dict) else None

    def feed(self, text: str) -> bool:
        """Read more of its arguments: can it no longer be a repeat?"""
        self._writer.feed(text)
        given = self._writer.given
        while self._left and self._read < len(given):
            key, value, whole = given[self._read]
            self._read += 1
            if whole:
                shown = _canonical(value)
                self._left = [c for c in self._left if key in c and _canonical(c[key]) == shown]
                continue
            at = self._text[1] if self._text[0] == key else 0
            end = at + len(value)
            self._text = (key, end)
            self._left = [
                c for c in self._left if isinstance(c.get(key), str) and c[key][at:end] == value
            ]
        return self._left == []


class Repeats:
    """Watches one turn's events (after the grammar read them) for repeated calls.

    The events of a call that may be a repeat (its name is one already called) are held until
    the call ends, then given on or dropped whole. :attr:`stop` says the reply should end
    now; :attr:`retry` that the model should be asked again without tools.
    """

    def __init__(self, request: Request) -> None:
        self._index = request.index
        self._answered = _answered(request)
        self._answered_names = {name for name, _ in self._answered}
        #: The calls given on or answered in this reply, by name, each with its key once
        #: it was needed: a key types the arguments, which is only worth it when another
        #: call of the same name comes to compare with.
        self._done: dict[str, list[list[Any]]] = {}
        self._held: dict[int, list[Event]] = {}
        self._probes: dict[int, _Probe] = {}  # a held call: what it may still repeat
        self.said = False  # text the user saw, or a call given on
        self.calls = 0
        self.stop = False
        self.retry = False
        self.ended = False  # the reply's Done was given on

    def answered(self, name: str, arguments: str) -> bool:
        """Is this call (arguments as JSON text) the one whose result ends the conversation?
        For the drift guard: a reply that opens with it and runs on is a repeat too."""
        return call_key(name, arguments, self._index.schema(name)) in self._answered

    def _names(self) -> set[str]:
        return self._answered_names | self._done.keys()

    def _seen(self, call: ToolCall) -> Key | None:
        """The key of ``call`` when an earlier call of this reply is the same, else None."""
        earlier = self._done.get(call.name)
        if not earlier:
            return None
        key = self._key(call)
        for entry in earlier:
            if entry[1] is None:
                entry[1] = self._key(entry[0])
            if entry[1] == key:
                return key
        return None

    def _keep(self, call: ToolCall, key: Key | None = None) -> None:
        self._done.setdefault(call.name, []).append([call, key])
        for probe in self._probes.values():  # a call still held may repeat this one
            if probe.name == call.name:
                probe.add(key if key is not None else self._key(call))

    def _candidates(self, name: str) -> list[Key]:
        """The keys of the calls a call named ``name`` may repeat: the one just answered,
        and those of this reply."""
        keys = [key for key in self._answered if key[0] == name]
        for entry in self._done.get(name, ()):
            if entry[1] is None:
                entry[1] = self._key(entry[0])
            keys.append(entry[1])
        return keys

    def push(self, event: Event) -> list[Event]:
        """The events to give on now for ``event``."""
        if self.stop and not isinstance(event, (ev.Done, ev.Notice)):
            return []  # the reply ended at the repeat: what came after it is not given on
        if isinstance(event, ev.Done):
            self.ended = True
        if isinstance(event, ev.CallStart):
            if event.name in self._names():
                self._held[event.index] = [event]
                self._probes[event.index] = _Probe(
                    event.name, self._index.schema(event.name), self._candidates(event.name)
                )
                return []
            return [event]
        if isinstance(event, ev.CallArgsDelta) and event.index in self._held:
            self._held[event.index].append(event)
            if self._probes[event.index].feed(event.text):  # it cannot be a repeat: it passes
                del self._probes[event.index]
                return self._held.pop(event.index)
            return []
        if isinstance(event, ev.CallAbort):
            self._probes.pop(event.index, None)
            return [*self._held.pop(event.index, []), event]
        if isinstance(event, ev.TextDelta):
            self.said = self.said or bool(event.text.strip())
            return [event]
        if isinstance(event, ev.Done):
            # a call still held never ended: given on as it came, for the reader to judge
            held = [e for events in self._held.values() for e in events]
            self._held.clear()
            return [*held, event]
        if not isinstance(event, ev.CallEnd):
            return [event]
        held = self._held.pop(event.index, [])
        self._probes.pop(event.index, None)
        call = event.call
        if self._seen(call) is not None:
            self.stop = True
            return [self._notice(call, "it was already called in this reply; the reply ends")]
        key = self._key(call) if call.name in self._answered_names else None
        if key is not None and key in self._answered:
            if not self.said:
                self.stop = self.retry = True
                return [
                    self._notice(
                        call,
                        "its result is the last thing in the conversation; the model is "
                        "asked again without tools",
                    )
                ]
            self._keep(call, key)
            return [self._notice(call, "its result is the last thing in the conversation")]
        self._keep(call, key)
        self.said = True
        self.calls += 1
        return [*held, event]

    def _key(self, call: ToolCall) -> Key:
        raw: str | Mapping[str, Any] = (
            call.arguments_text if call.arguments_text.strip() else call.arguments
        )
        return call_key(call.name, raw, self._index.schema(call.name), text_values=call.text_values)

    @staticmethod
    def _notice(call: ToolCall, why: str) -> ev.Notice:
        return ev.Notice(
            "repeated-call",
            f"{call.name} ({call.id}) repeats a call with the same arguments and was not "
            f"returned: {why}",
        )


def without_tools(request: Request) -> Request:
    """The retry after the call just answered came again: no tools, and asked to answer."""
    messages = [*request.messages, {"role": "user", "content": ANSWER_NOW}]
    return replace(request, messages=messages, tools=None, tool_choice=None)
