"""The drift guard: a reply held while it may be a call in a shape the model's own grammar
does not read, then recovered as calls (:mod:`.recovery`) or released as the text it was.

A call written as bare JSON after a line of prose, as the reply's last block
(``Sure.\n{"name": N, "arguments": {...}}``), is recovered when it calls a declared tool with
arguments that fit its schema (:mod:`toolwire.formats.trailing`), named ``trailing-call``: the
prose streams on as it comes and stays content, only the candidate block is held back. JSON in
the middle of prose stays prose.

While the reply is held, the first call a family's reader opens still streams as it comes
(its start and arguments pass at once); only its end, or its withdrawal, waits. When the
reader withdraws it (an unclosed tag) and recovery reads the same call from the held text,
the call streamed is ended with the recovered arguments, under its own index and id; when
recovery reads another, the streamed one stays withdrawn.

A turn that offered no tools recovers nothing, but the same shapes, to any name, are still
call markup: :class:`ToollessWatch` lets the text through as it comes and names such a
reply at its end (``call-without-tools``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import events as ev
from ..events import Event, NoticeCode
from ..messages import ToolCall
from .base import IdMaker, ToolIndex, random_call_id
from .recovery import MAX_CHARS, Recovery, opening_call, recover, written_calls
from .trailing import TrailingBlock, fit_calls

__all__ = ["DriftGuard", "ToollessWatch"]


class DriftGuard:
    """Watches a reply's events: when the reply may be a drifted call, its text is held until
    the reply ends, then either recovered as calls or released as the text it was.

    Text passes at once whenever the reply cannot be a whole-reply call (it does not open
    with ``{``, ``[``, a ``json`` fence or ``<tool_call>``), and whenever a real call shows.
    Reasoning passes untouched and is never read.
    """

    def __init__(
        self,
        tools: Sequence[Mapping[str, Any]] | None,
        *,
        make_id: IdMaker | None = None,
        release_on_start: bool = False,
        answered: Callable[[str, str], bool] | None = None,
    ) -> None:
        self._tools = tools
        # is (name, arguments JSON) the call whose result ends the conversation?
        self._answered = answered
        self._make_id = make_id or random_call_id
        self._held: list[Event] = []
        self._texts: list[str] = []
        # the reply's opening, all that decides whether it may be a call (kept short, so
        # holding a long reply costs linear time)
        self._head = ""
        self._holding = ToolIndex.of(tools).known
        self._saw_call = False
        self._next = 0
        # a native call (an engine's own tool_calls) shows at its start; a family's call
        # may still turn out unread (an unclosed tag), so there only its end counts
        self._release_on = (ev.CallStart, ev.CallEnd) if release_on_start else (ev.CallEnd,)
        #: The reply opened as prose: its last block, which may be a call, held back.
        self._trail: TrailingBlock | None = None
        #: The family's call the held reply opened with, streamed as it came: (index, id,
        #: name); and whether the family withdrew it.
        self._opened: tuple[int, str, str] | None = None
        self._withdrawn = False

    def _trailing(self, events: Sequence[Event]) -> list[Event]:
        """Events after the reply showed prose: text passes but for the last block (which may
        be a call); anything else lets the held text go first. A real call ends the watch."""
        trail = self._trail
        out: list[Event] = []
        for event in events:
            if trail is None:
                out.append(event)
                continue
            if isinstance(event, ev.TextDelta):
                text = trail.feed(event.text)
                if text:
                    out.append(ev.TextDelta(text))
                continue
            if isinstance(event, ev.ReasoningDelta):
                out.append(event)
                continue
            held = trail.flush()
            if held:
                out.append(ev.TextDelta(held))
            if isinstance(event, (ev.CallStart, ev.CallArgsDelta, ev.CallEnd, ev.CallAbort)):
                self._next = max(self._next, event.index + 1)
            if isinstance(event, self._release_on):  # a real call: nothing to recover
                trail = self._trail = None
            out.append(event)
        return out

    def _end_trailing(self) -> list[Event]:
        trail, self._trail = self._trail, None
        if trail is None:
            return []
        text, block = trail.end()
        found = recover(block, self._tools) if block else None
        calls = [ToolCall("", name, args, raw) for name, args, raw in (found or ([], ""))[0]]
        events: list[Event] = [ev.TextDelta(text)] if text else []
        if found is None or not fit_calls(calls, ToolIndex.of(self._tools)):
            return events + ([ev.TextDelta(block)] if block else [])
        names = ", ".join(dict.fromkeys(call.name[:100] for call in calls))[:300]
        events.append(
            ev.Notice(
                "recovered-trailing-call",
                f"read the call to {names} the reply ends with, after its prose",
            )
        )
        events += found.notices()
        for call in calls:
            index = self._next
            self._next += 1
            cid = self._make_id(index)
            events += [
                ev.CallStart(index, cid, call.name),
                ev.CallArgsDelta(index, call.arguments_text),
                ev.CallEnd(index, ToolCall(cid, call.name, call.arguments, call.arguments_text)),
            ]
        return events

    def push(self, events: Sequence[Event]) -> list[Event]:
        if not self._holding:
            return self._trailing(events)
        out: list[Event] = []
        for position, event in enumerate(events):
            if isinstance(event, ev.ReasoningDelta):  # never read, never held
                out.append(event)
                continue
            if self._passes(event):  # the call the reply opens with, streamed as it comes
                if isinstance(event, ev.CallStart) and all(
                    isinstance(e, ev.TextDelta) and not e.text.strip() for e in self._held
                ):
                    out += self._held  # the white space before it
                    self._held = []
                out.append(event)
                continue
            if isinstance(event, self._release_on):  # a real call: nothing to recover
                self._saw_call = True
            if isinstance(event, ev.TextDelta):
                self._texts.append(event.text)
                if len(self._head) < _HEAD:
                    self._head = (self._head + event.text).lstrip()[:_HEAD]
            self._held.append(event)
            if self._saw_call or not _may_be_a_call(self._head):
                self._holding = False
                held, self._held = self._held, []
                if not self._saw_call:  # prose: its last block may still be a call
                    self._trail = TrailingBlock()
                return out + self._trailing([*held, *events[position + 1 :]])
        return out

    def _passes(self, event: Event) -> bool:
        """Does this event of a family's call pass while the reply is held?

        The first call a family's reader opens streams as it comes (its start, its
        arguments) although it may still come to nothing (an unclosed tag, which drift
        recovery may read at the end): its end, or its withdrawal, decides as before."""
        if isinstance(event, ev.CallStart) and self._opened is None and not self._saw_call:
            self._opened = (event.index, event.id, event.name)
            self._next = max(self._next, event.index + 1)
            return True
        opened = self._opened
        if opened is None or not isinstance(event, (ev.CallArgsDelta, ev.CallEnd, ev.CallAbort)):
            return False
        if event.index != opened[0] or self._withdrawn:
            return False
        if isinstance(event, ev.CallAbort):
            self._withdrawn = True
            return False  # held: recovery may yet read the call it began
        return isinstance(event, ev.CallArgsDelta)

    def end(self, *, cut: bool = False) -> list[Event]:
        """The reply is over: recovered calls, or the held text as it was.

        ``cut``: the engine stopped the reply at its token limit.
        """
        if not self._holding:
            return self._end_trailing()
        self._holding = False
        held, self._held = self._held, []
        found = (
            None
            if self._saw_call
            else recover("".join(self._texts), self._tools, cut=cut, repeats=True)
        )
        if found is None:
            opening = None if self._saw_call else opening_call("".join(self._texts), self._tools)
            if opening is not None and self._answered and self._answered(opening[0], opening[2]):
                # the call just answered, written again and run on (often with its result
                # echoed after it): a repeat, whatever follows; the repeat check takes it
                found = Recovery([opening], "opening-call")
            elif opening is not None:  # raw call markup is never shown silently
                held.append(
                    ev.Notice(
                        "call-not-read",
                        f"the reply opens with a call to {opening[0]} but goes on after it; "
                        "it stays text and nothing was run",
                    )
                )
                return held
            else:
                return held + self._undeclared(cut)
        calls, shape, _ = found
        # what the family made of the drifted text (text, or a call it started and gave up)
        # gives way to the calls recovered from it
        dropped = (ev.TextDelta, ev.CallStart, ev.CallArgsDelta, ev.CallAbort)
        events: list[Event] = [
            e
            for e in held
            if not isinstance(e, dropped)
            and not (isinstance(e, ev.Notice) and e.code == "call-not-read")
        ]
        why = (
            "the call the reply opens with, the same as the one just answered; what followed "
            "it was dropped"
            if shape == "opening-call"
            else f"a call the model wrote as {shape}"
        )
        events.append(ev.Notice(ev.recovered(shape), f"read {why}"))
        events += found.notices()
        opened, self._opened = self._opened, None
        if opened is not None and calls[0][0] == opened[2]:
            # the call streamed as it came is the one recovered: it ends here
            name, arguments, raw = calls.pop(0)
            events.append(ev.CallEnd(opened[0], ToolCall(opened[1], name, arguments, raw)))
        elif opened is not None:
            events.insert(0, ev.CallAbort(opened[0], opened[1], "another call was read"))
        for name, arguments, raw in calls:
            index = self._next
            self._next += 1
            cid = self._make_id(index)
            events += [
                ev.CallStart(index, cid, name),
                ev.CallArgsDelta(index, raw),
                ev.CallEnd(index, ToolCall(cid, name, arguments, raw)),
            ]
        return events

    def _undeclared(self, cut: bool) -> list[Event]:
        """An ``undeclared-tool`` notice when the held reply is, as a whole, a call to a tool
        the request does not declare (a model calling opencode's ``bash`` as
        ``runShellCommand``): it stays text, and says so."""
        text = "" if self._saw_call else "".join(self._texts)
        return _still_text(text, cut, "undeclared-tool", "which the request does not declare")


class ToollessWatch:
    """Watches the text of a turn that offered no tools: a reply that is, as a whole, a call
    (in any shape :func:`recover_calls` reads, to any name) stays text — nothing is a call,
    nothing runs — and :meth:`end` names it in a ``call-without-tools`` notice, so raw call
    markup is never shown silently.

    Nothing is held back: every event passes at once, and the notice comes at the reply's
    end. The text is kept only while the reply may still be a call (its opening decides) and
    within the recovery's size bound, so the work stays linear. Reasoning is never read.
    """

    def __init__(self) -> None:
        self._texts: list[str] = []
        self._size = 0
        self._head = ""
        self._watching = True

    def push(self, events: Sequence[Event]) -> list[Event]:
        """The events, all passed on; their text noted while the reply may be a call."""
        for event in events:
            if not self._watching or not isinstance(event, ev.TextDelta):
                continue
            self._texts.append(event.text)
            self._size += len(event.text)
            if len(self._head) < _HEAD:
                self._head = (self._head + event.text).lstrip()[:_HEAD]
            if self._size > MAX_CHARS or not _may_be_a_call(self._head):
                self._watching = False
                self._texts = []
        return list(events)

    def end(self, *, cut: bool = False) -> list[Event]:
        """The reply is over: a ``call-without-tools`` notice when it was a call, else none.

        ``cut``: the engine stopped the reply at its token limit."""
        if not self._watching:
            return []
        self._watching = False
        text, self._texts = "".join(self._texts), []
        return _still_text(text, cut, "call-without-tools", "but this turn offered no tools")


def _still_text(text: str, cut: bool, code: NoticeCode, why: str) -> list[Event]:
    """The notice ``code`` when ``text`` is, as a whole, a call (in a shape drift recovery
    reads, to any name) that stays text: it names the tools it called and says ``why``."""
    found = written_calls(text, cut=cut) if text.strip() else None
    if found is None:
        return []
    names, shape = found
    called = ", ".join(dict.fromkeys(name[:100] for name in names))[:300]
    return [
        ev.Notice(
            code,
            f"the reply is a call to {called} (written as {shape}), {why}; it stays text and "
            "nothing was run",
        )
    ]


_OPENINGS = ("{", "[", "```json", "```JSON", "```\n", "<tool_call>")


_HEAD = 12


def _may_be_a_call(text: str) -> bool:
    """Could a reply that starts like this still be nothing but a call?"""
    head = text.lstrip()[:_HEAD]
    if not head:
        return True
    return any(o.startswith(head) or head.startswith(o) for o in _OPENINGS)
