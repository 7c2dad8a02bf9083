"""Calls to tools the request never declared: read for every transport, never passed on.

A model (or an upstream server) may call a tool it was not offered: one it saw earlier in
the conversation, one it made up, or any at all when no tools were offered. Passed on, such
a call reads to the caller as if it were declared, and a gateway's client would run
whatever its own code maps the name to. So the reply pipeline holds every call from its
start, and a call whose name is not among the request's tools becomes an
``undeclared-tool`` notice naming it; with ``strict`` it is an error instead
(:class:`~toolwire.errors.BackendError` of kind ``undeclared-tool``). The calls that remain
are numbered as passed at the pipeline's end (:mod:`toolwire.pipeline.end`), so a consumer
sees no gap.

The reader for tools in words names a call it could not read
:data:`~toolwire.formats.words.UNREADABLE`: on a turn read by that reader (``words``), that
one passes (its result teaches the model how to call). On any other turn no reader of ours
makes such a call, so one named so is the model's own (or the upstream's), and a call to a
tool the client never declared like any other: held back, or with ``strict`` an error. A
call that is aborted (:class:`~toolwire.events.CallAbort`, its text following as text)
was never a call, and is not named.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import events as ev
from ..errors import BackendError
from ..events import Event
from ..formats.base import ToolIndex
from ..formats.words import UNREADABLE

__all__ = ["Declared"]


def _names(tools: ToolIndex | None, unreadable: bool) -> frozenset[str]:
    """The declared names, and, when the reader for words reads the turn (``unreadable``),
    its own name for a call it could not read (whose result tells the model how to call)."""
    if tools is None or not len(tools):
        return frozenset()
    return frozenset((UNREADABLE, *tools.names)) if unreadable else frozenset(tools.names)


_CALLS = (ev.CallStart, ev.CallArgsDelta, ev.CallAbort, ev.CallEnd)


class Declared:
    """Passes the events of a reply, leaving out calls to tools not in ``tools``;
    ``unreadable``: the turn is read by the reader for words, whose unreadable calls pass."""

    def __init__(self, tools: ToolIndex | None, *, strict: bool, unreadable: bool = False) -> None:
        self._names = _names(tools, unreadable)
        self._strict = strict
        self._held: set[int] = set()  # calls started under an undeclared name
        self._passed: set[int] = set()  # calls started under a declared name

    def push(self, events: Sequence[Event]) -> list[Event]:
        """The events to pass on, in order."""
        out: list[Event] = []
        for event in events:
            if not isinstance(event, _CALLS):
                out.append(event)
            elif isinstance(event, ev.CallStart):
                if event.name not in self._names:
                    self._held.add(event.index)
                    continue
                self._passed.add(event.index)
                out.append(event)
            elif isinstance(event, ev.CallArgsDelta):
                if event.index not in self._held:
                    out.append(event)
            elif isinstance(event, ev.CallAbort):
                if event.index in self._held:  # never passed: nothing to withdraw
                    self._held.discard(event.index)
                else:
                    out.append(event)
            else:
                out.extend(self._end(event))
        return out

    def _end(self, event: ev.CallEnd) -> list[Event]:
        call = event.call
        if call.name in self._names and event.index not in self._held:
            return [event]
        name = call.name[:100]
        if self._strict:
            raise BackendError(
                f"the model called {name!r}, a tool the request did not declare",
                kind="undeclared-tool",
            )
        out: list[Event] = []
        if event.index in self._passed:  # started under a declared name: withdrawn
            out.append(ev.CallAbort(event.index, call.id, "undeclared tool"))
        self._held.discard(event.index)
        offered = ", ".join(sorted(self._names))[:300] or "none"
        out.append(
            ev.Notice(
                "undeclared-tool",
                f"the model called {name}, which the request did not declare (its tools: "
                f"{offered}); the call was not passed on",
            )
        )
        return out
