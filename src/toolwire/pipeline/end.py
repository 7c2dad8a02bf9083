"""The reply pipeline's end: each call typed once, the finish reason decided once, and the
strict gate — for every transport, and so for the loop and every client API alike.

**Typing** (:func:`prepare_call`). A call's arguments are read forgivingly and typed by its
tool's schema (``"3"`` for an integer becomes ``3``; single quotes, trailing commas are
repaired; each repair named in an ``arguments-repaired`` notice). The one policy for a
field the schema does not list (a closed schema: properties named, ``additionalProperties``
not true): it is **dropped**, and an ``arguments-unknown-fields`` notice names it. The
schema is the tool's contract — a tool is one function plus its schema — so the loop (which
calls the function) and a gateway client (which runs its own tool) get the same
arguments. With ``strict`` nothing is repaired or dropped: such a call is invalid. Arguments
that do not fit are never made up: the call keeps the model's own text, ``invalid`` holds
the explanation a model can act on, and an ``arguments-invalid`` notice says so.

**Streamed arguments.** A call's arguments are given on as they come, as pieces of the
text it will end with (:class:`~toolwire.arguments.streamed.ArgumentWriter`): a
``CallArgsDelta`` carries only bytes typing cannot change, and at the call's end the rest
comes before its ``CallEnd``, so a call's deltas always concatenate to ``CallEnd.arguments``
— whichever surface renders them, typed or (for a call that does not fit) as written. The
one case where what went out cannot be extended (a key the model gave twice, whose last
value is the one kept) withdraws the streamed call (``CallAbort``, its bytes never closed as
JSON) and passes it again whole under a new number and id, with a ``call-resent`` notice.

**Parallel calls.** A turn with ``parallel_calls`` false passes its first call; each later
one is held from its start and becomes a ``calls-dropped`` notice. Calls are numbered from 0
as passed.

**Calls no tool can run.** A call whose arguments do not read as a JSON object at all is
withdrawn (``CallAbort``, its text following as text) with a ``call-not-read`` notice, in
every API alike: no client can be given such a call (a Messages ``tool_use`` input must be
an object), so none is.

**Work.** Each call's check is charged to the request's work budget
(:mod:`toolwire.budget`), which the call's own length adds to: a check past it is not
finished — the call passes as written, unchecked, with a ``check-skipped`` notice (with
``strict``, it is invalid). A turn whose budget is too large to spend on the event loop has
its calls typed in a worker thread (:meth:`End.offloaded`).

**The finish reason**: ``tool_calls`` when a call was passed on, else the engine's — never
``tool_calls`` for a turn whose calls were all refused, dropped or repeats.

**The strict gate.** With ``strict``, a notice whose code names a tolerance
(:data:`~toolwire.events.TOLERANCES`: a call recovered from a stray shape, an engine's
``tool_calls`` object read as a list…) is an error, whichever layer met it — a transport's
wire tolerances included: :class:`~toolwire.errors.BackendError` of kind ``strict``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .. import events as ev
from ..arguments import prepare_arguments
from ..arguments.read import ReadError, read_json
from ..arguments.schema import unchecked_patterns
from ..arguments.streamed import ArgumentWriter
from ..budget import CALL_STEPS, INLINE_STEPS, WorkBudget, WorkExceeded, charging
from ..errors import ArgumentsError, BackendError
from ..events import Event
from ..formats.base import ToolIndex, random_call_id
from ..formats.words import UNREADABLE
from .request import Request

__all__ = ["End", "arguments_text", "prepare_call"]


def arguments_text(value: Any) -> str:
    """JSON text that can always be sent as UTF-8, written as the standard library writes
    it (``{"city": "Paris"}``): the text of a call's arguments.

    JSON may carry the escape of a lone surrogate (``"\\ud800"``); decoded, it cannot be
    encoded again as UTF-8, so such a value is sent with its escapes kept instead.
    """
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value)
    return text


def prepare_call(
    event: ev.CallEnd,
    schema: Mapping[str, Any] | None,
    *,
    strict: bool = False,
    budget: WorkBudget | None = None,
) -> tuple[ev.CallEnd, list[ev.Notice]]:
    """``event`` with its arguments typed once by ``schema`` (see the module's doc), and
    the notices that say what that took, if anything. No schema (a call the words reader
    could not read, whose result teaches the model how to call): the call as written.
    ``budget``: the request's work budget, which this call's length adds to first."""
    call = event.call
    raw: str | dict[str, Any] = (
        call.arguments_text if call.arguments_text.strip() else call.arguments
    )
    if schema is None:
        return replace(event, arguments=_as_written(raw, strict)), []
    if budget is not None:
        budget.grant(call.arguments_text)
    try:
        with charging(budget):
            done = prepare_arguments(
                raw, schema, name=call.name, strict=strict, text_values=call.text_values
            )
    except WorkExceeded as exc:
        return _skipped(event, raw, strict, exc)
    except ArgumentsError as exc:
        invalid = ev.Notice("arguments-invalid", exc.explanation)
        written = replace(event, arguments=_as_written(raw, strict), invalid=exc.explanation)
        return written, [invalid, *_unchecked(call.name, call.id, schema)]
    notices: list[ev.Notice] = []
    repaired = f"; repaired: {', '.join(done.repairs)}" if done.repairs else ""
    if done.unknown:
        notices.append(
            ev.Notice(
                "arguments-unknown-fields",
                f"the arguments of {call.name} ({call.id}) have fields its schema does not "
                f"list ({', '.join(done.unknown)[:300]}); they were dropped{repaired}",
            )
        )
    elif done.repairs:
        notices.append(
            ev.Notice(
                "arguments-repaired",
                f"the arguments of {call.name} ({call.id}) were repaired: "
                + ", ".join(done.repairs),
            )
        )
    notices += _unchecked(call.name, call.id, schema, done.unchecked)
    typed = replace(call, arguments=done.arguments)
    return replace(event, call=typed, arguments=arguments_text(done.arguments)), notices


def _skipped(
    event: ev.CallEnd, raw: str | dict[str, Any], strict: bool, exc: WorkExceeded
) -> tuple[ev.CallEnd, list[ev.Notice]]:
    """A call whose check went past the request's work budget: passed as written, said so;
    with ``strict``, invalid (nothing unchecked passes as checked)."""
    call = event.call
    why = f"the arguments of {call.name} ({call.id}) were not checked against its schema: {exc}"
    written = _as_written(raw, strict)
    if strict:
        explanation = (
            f"The arguments for {call.name} could not be checked: checking them would take "
            "more work than this request may spend. Call it with simpler arguments."
        )
        return replace(event, arguments=written, invalid=explanation), [
            ev.Notice("arguments-invalid", why)
        ]
    return replace(event, arguments=written), [ev.Notice("check-skipped", why)]


def _unchecked(
    name: str, cid: str, schema: Mapping[str, Any], places: tuple[str, ...] | None = None
) -> list[ev.Notice]:
    """The ``pattern-not-checked`` notice of a call whose schema has such patterns."""
    if places is None:
        try:
            places = unchecked_patterns(schema)
        except (TypeError, ValueError):
            return []
    if not places:
        return []
    listed = ", ".join(places[:5]) + (f" and {len(places) - 5} more" if len(places) > 5 else "")
    return [
        ev.Notice(
            "pattern-not-checked",
            f"the arguments of {name} ({cid}) were not checked against the pattern at "
            f"{listed[:300]}: it cannot be matched in linear time (a back-reference, a "
            "look-around, too long, or too large a program)",
        )
    ]


def _as_written(raw: str | dict[str, Any], strict: bool) -> str:
    """The arguments as the model wrote them: its text, or the object read from it (never
    an empty object made up for text that could not be read)."""
    if isinstance(raw, dict):
        return arguments_text(raw)
    try:
        value = read_json(raw, strict=strict).value
    except ReadError:
        return raw
    return arguments_text(value) if isinstance(value, dict) else raw


_CALLS = (ev.CallStart, ev.CallArgsDelta, ev.CallAbort, ev.CallEnd)


class End:
    """The last step of every reply (see the module's doc): push each event as it comes;
    what to give on comes back. Only the calls passed on are typed, once each: a repeat
    dropped before (:mod:`toolwire.pipeline.repeats`) costs nothing and says nothing here."""

    def __init__(self, request: Request) -> None:
        self._index: ToolIndex = request.index
        self._strict = request.strict
        self._parallel = request.parallel_calls
        self._number: dict[int, int] = {}  # a call's index as read -> as passed
        self._dropped: set[int] = set()  # calls held back: parallel calls are off
        self._kept: set[int] = set()  # calls passed on, begun or ended
        self._next = 0
        self._writers: dict[int, ArgumentWriter] = {}  # a passed call's streamed arguments
        self._budget = request.budget
        self.calls = 0  # calls passed on whole

    def offloaded(self, event: Event) -> bool:
        """Whether pushing ``event`` may spend more than the event loop should: a call to
        type when the request's budget (with the call's share) is past the inline bound."""
        if not isinstance(event, ev.CallEnd) or event.arguments is not None:
            return False
        share = CALL_STEPS + len(event.call.arguments_text)
        return self._budget.left + share > INLINE_STEPS

    def push(self, event: Event) -> list[Event]:
        if isinstance(event, ev.Notice):
            if self._strict and event.code in ev.TOLERANCES:
                raise BackendError(f"strict: {event.message[:300]} ({event.code})", kind="strict")
            return [event]
        if isinstance(event, ev.Done):
            finish = event.finish_reason
            if self.calls:
                finish = "tool_calls"
            elif finish == "tool_calls":  # the engine said calls, and none was passed on
                finish = "stop"
            return [event if finish == event.finish_reason else ev.Done(finish, event.usage)]
        if not isinstance(event, _CALLS):
            return [event]
        index = event.index
        if index in self._dropped:
            return self._drop(event) if isinstance(event, ev.CallEnd) else []
        if index not in self._number:
            if not self._parallel and self._kept:
                self._dropped.add(index)
                return self._drop(event) if isinstance(event, ev.CallEnd) else []
            self._number[index] = self._next
            self._next += 1
        number = self._number[index]
        if isinstance(event, ev.CallStart):
            name = event.name
            schema = self._index.schema(name)  # None for the words reader's unreadable call
            self._writers[index] = ArgumentWriter(schema, strict=self._strict)
        elif isinstance(event, ev.CallArgsDelta):
            writer = self._writers.get(index)
            # a piece is typed on the event loop: within a slice no larger than the loop
            # may spend (past it, the piece waits for the call's end), counted in the budget
            piece_budget = WorkBudget(min(INLINE_STEPS, self._budget.left))
            with charging(piece_budget):
                piece = writer.feed(event.text) if writer is not None else ""
            self._budget.paid(piece_budget.spent)
            return [ev.CallArgsDelta(number, piece)] if piece else []
        typing: list[Event] = []
        if isinstance(event, ev.CallEnd) and event.arguments is None:
            name = event.call.name
            schema = self._index.schema(name)  # None for the words reader's unreadable call
            event, notices = prepare_call(event, schema, strict=self._strict, budget=self._budget)
            typing = list(notices)
        writer = self._writers.pop(index, None) if not isinstance(event, ev.CallStart) else None
        if isinstance(event, ev.CallEnd) and _not_an_object(event):
            del self._number[index]
            self._kept.discard(index)
            call = event.call
            return [
                ev.Notice(
                    "call-not-read",
                    f"the arguments of {call.name} ({call.id}) are not an object; the call "
                    "stays text",
                ),
                ev.CallAbort(number, call.id, "its arguments are not an object"),
                ev.TextDelta(call.arguments_text or event.arguments or ""),
            ]
        if isinstance(event, ev.CallAbort):  # withdrawn: not a call parallel_calls counts
            self._number.pop(index)
            self._kept.discard(index)
        else:
            self._kept.add(index)
            self.calls += isinstance(event, ev.CallEnd)
        if isinstance(event, ev.CallEnd) and writer is not None:
            return [*typing, *self._rest(event, number, writer)]
        return [*typing, _numbered(event, number)]

    def _rest(self, event: ev.CallEnd, number: int, writer: ArgumentWriter) -> list[Event]:
        """A streamed call's end: the rest of its text, then the call; or, when the text it
        ends with does not extend what went out, the streamed one withdrawn and the call
        passed again whole (see the module's doc)."""
        arguments = event.arguments or ""
        rest = writer.finish(arguments)
        if rest is not None:
            piece: list[Event] = [ev.CallArgsDelta(number, rest)] if rest else []
            return [*piece, _numbered(event, number)]
        call = event.call
        again = self._next
        self._next += 1
        cid = random_call_id(again)
        return [
            ev.Notice(
                "call-resent",
                f"the arguments of {call.name} ({call.id}) changed after they were streamed "
                f"(typing kept another value); the streamed call was withdrawn and the call "
                f"sent again whole as {cid}",
            ),
            ev.CallAbort(number, call.id, "its arguments changed after they were streamed"),
            ev.CallStart(again, cid, call.name),
            ev.CallArgsDelta(again, arguments),
            replace(event, index=again, call=replace(call, id=cid)),
        ]

    def _drop(self, event: ev.CallEnd) -> list[Event]:
        self._dropped.discard(event.index)
        call = event.call
        return [
            ev.Notice(
                "calls-dropped",
                f"parallel_tool_calls is false: {call.name} ({call.id}) was not passed on",
            )
        ]


def _not_an_object(event: ev.CallEnd) -> bool:
    """Arguments no tool can be run with, in any API: text that does not read as a JSON
    object (the reader for words names its unreadable calls itself: those pass)."""
    if event.invalid is None or event.call.name == UNREADABLE:
        return False
    try:
        return not isinstance(json.loads(event.arguments or ""), dict)
    except (ValueError, RecursionError):
        return True


def _numbered(event: Any, number: int) -> Event:
    result: Event = event if event.index == number else replace(event, index=number)
    return result
