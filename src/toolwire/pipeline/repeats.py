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

Linear in the number of calls: a call is compared with the earlier ones by its key, in a
set; a held call is compared field by field, as it streams, with at most
:data:`MAX_COMPARED` earlier calls of its name — past that many it is held to its end and
decided there, by its key.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
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


#: Earlier calls of its name a held call is compared with as it streams, at most. A call
#: with more (a reply calling one tool over and over) is held to its end and decided there,
#: by its key: comparing each call with every earlier one as it streams would make a reply
#: of many calls quadratic.
MAX_COMPARED = 64


class _Probe:
    """What a held call may still repeat: the earlier calls of its name (their arguments as
    their keys have them) that what it has given so far does not rule out."""

    def __init__(
        self, name: str, schema: Mapping[str, Any] | None, candidates: list[Key] | None
    ) -> None:
        """``candidates`` None: too many to compare as it comes (it is decided at its end)."""
        self.name = name
        self._writer = ArgumentWriter(schema)
        self._left: list[dict[str, Any]] | None = None if candidates is None else []
        for key in candidates or ():
            self.add(key)
        self._read = 0  # of the writer's given values
        self._text: tuple[str, int] = ("", 0)  # the text field being compared, and how far

    def add(self, key: Key) -> None:
        """Another call it may repeat (one kept while it was held)."""
        if self._left is None:
            return
        if len(self._left) >= MAX_COMPARED:
            self._left = None  # too many to compare as it comes: decided at its end
            return
        try:
            value = json.loads(key[1])
        except ValueError:
            value = None
        if isinstance(value, dict):
            self._left.append(value)
        else:
            self._left = None  # a call whose arguments are no object is compared only at the end

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


class _Called:
    """The calls of one name given on or answered in this reply. Each call's key is worked
    out once, when a later call of the name comes to be compared with it (typing the
    arguments is only worth it then), and kept in a set: a call is compared with all the
    earlier ones in one look-up, however many there are."""

    def __init__(self) -> None:
        self.keys: dict[Key, None] = {}  # the keys worked out, in the order of their calls
        self._unkeyed: list[ToolCall] = []

    def add(self, call: ToolCall, key: Key | None) -> None:
        if key is None:
            self._unkeyed.append(call)
        else:
            self.keys[key] = None

    def __len__(self) -> int:
        return len(self.keys) + len(self._unkeyed)

    def keyed(self, key_of: Callable[[ToolCall], Key]) -> dict[Key, None]:
        """Every call's key (each worked out once)."""
        for call in self._unkeyed:
            self.keys[key_of(call)] = None
        self._unkeyed.clear()
        return self.keys


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
        #: The calls given on or answered in this reply, by name.
        self._done: dict[str, _Called] = {}
        self._held: dict[int, list[Event]] = {}
        #: The held calls, by name then index: what each may still repeat.
        self._probes: dict[str, dict[int, _Probe]] = {}
        self._probed: dict[int, str] = {}  # a held call's index -> its name
        self.said = False  # text the user saw, or a call given on
        self.calls = 0
        self.stop = False
        self.retry = False
        self.ended = False  # the reply's Done was given on

    def answered(self, name: str, arguments: str) -> bool:
        """Is this call (arguments as JSON text) the one whose result ends the conversation?
        For the drift guard: a reply that opens with it and runs on is a repeat too."""
        return call_key(name, arguments, self._index.schema(name)) in self._answered

    def _called(self, name: str) -> bool:
        return name in self._answered_names or name in self._done

    def _seen(self, call: ToolCall) -> Key | None:
        """The key of ``call`` when an earlier call of this reply is the same, else None."""
        earlier = self._done.get(call.name)
        if not earlier:
            return None
        key = self._key(call)
        return key if key in earlier.keyed(self._key) else None

    def _keep(self, call: ToolCall, key: Key | None = None) -> None:
        self._done.setdefault(call.name, _Called()).add(call, key)
        probes = self._probes.get(call.name)
        if probes:  # a call still held may repeat this one
            if key is None:
                key = self._key(call)
            for probe in probes.values():
                probe.add(key)

    def _candidates(self, name: str) -> list[Key] | None:
        """The keys of the calls a call named ``name`` may repeat: the one just answered,
        and those of this reply (none worked out when there are more than can be compared
        as it comes: the call is then decided at its end)."""
        keys = [key for key in self._answered if key[0] == name]
        done = self._done.get(name)
        if done is not None:
            if len(keys) + len(done) > MAX_COMPARED:
                return None
            keys.extend(done.keyed(self._key))
        return keys

    def _unprobe(self, index: int) -> None:
        name = self._probed.pop(index, None)
        if name is not None:
            probes = self._probes[name]
            del probes[index]
            if not probes:
                del self._probes[name]

    def push(self, event: Event) -> list[Event]:
        """The events to give on now for ``event``."""
        if self.stop and not isinstance(event, (ev.Done, ev.Notice)):
            return []  # the reply ended at the repeat: what came after it is not given on
        if isinstance(event, ev.Done):
            self.ended = True
        if isinstance(event, ev.CallStart):
            if self._called(event.name):
                self._held[event.index] = [event]
                self._unprobe(event.index)
                self._probes.setdefault(event.name, {})[event.index] = _Probe(
                    event.name, self._index.schema(event.name), self._candidates(event.name)
                )
                self._probed[event.index] = event.name
                return []
            return [event]
        if isinstance(event, ev.CallArgsDelta) and event.index in self._held:
            self._held[event.index].append(event)
            probe = self._probes[self._probed[event.index]][event.index]
            if probe.feed(event.text):  # it cannot be a repeat: it passes
                self._unprobe(event.index)
                return self._held.pop(event.index)
            return []
        if isinstance(event, ev.CallAbort):
            self._unprobe(event.index)
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
        self._unprobe(event.index)
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
