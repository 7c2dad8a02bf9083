"""One request core for every API the gateway speaks.

Chat Completions, Responses and Anthropic Messages differ only on the wire: each adapter
turns its request into one engine :class:`~toolwire.pipeline.Request` and renders the
same :func:`turn` — text, thinking, calls with their arguments typed by the schema,
notices, and how the turn finished. So healing, notices, ``strict``, tool choice and
parallel calls are decided here once, and the same upstream reply gives the same calls
through every API.

A call the pipeline streams comes as :class:`CallOpened` with its first certain byte (so a
call none of whose arguments ever is — text, a list — never opens on the wire, and goes
whole or not at all), :class:`CallPiece` s (the pieces :mod:`toolwire.pipeline.end`
decided: they concatenate to the call's final arguments) and its :class:`WireCall`
(``streamed``), or :class:`CallWithdrawn` when it turned out not to be a call after its
bytes went out. One call streams at a time: what comes while it is begun (text, another
call) waits until it ends, so every API can render it as one block.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Mapping
from contextlib import aclosing, suppress
from dataclasses import dataclass, field
from typing import Any, cast

import orjson

from ..events import (
    CallAbort,
    CallArgsDelta,
    CallEnd,
    CallStart,
    Done,
    Event,
    Notice,
    NoticeCode,
    ReasoningDelta,
    TextDelta,
)
from ..pipeline.end import arguments_text, prepare_call

__all__ = [
    "CallOpened",
    "CallPiece",
    "CallWithdrawn",
    "Finish",
    "Output",
    "Started",
    "Told",
    "Whole",
    "WireCall",
    "arguments_text",
    "dumps",
    "turn",
    "whole",
    "with_keepalives",
]


@dataclass(frozen=True)
class WireCall:
    """A complete call as every API sends it: ``arguments`` is JSON text, ``value`` the
    object it reads as (None when the model's text could not be read as one)."""

    index: int
    id: str
    name: str
    arguments: str
    value: dict[str, Any] | None
    #: Its arguments went out as :class:`CallPiece` s (which concatenate to ``arguments``).
    streamed: bool = False


@dataclass(frozen=True)
class CallOpened:
    """A call began: its name is known and its arguments follow as :class:`CallPiece` s."""

    index: int
    id: str
    name: str


@dataclass(frozen=True)
class CallPiece:
    """More of an open call's arguments, as JSON text that will not change."""

    index: int
    text: str


@dataclass(frozen=True)
class CallWithdrawn:
    """An open call that is not one after all (cut short, its arguments no object): its
    ``sent`` text never closes as JSON, and a notice says why."""

    index: int
    id: str
    name: str
    sent: str


@dataclass(frozen=True)
class Told:
    """A notice for the client: a decision or repair the pipeline made."""

    code: NoticeCode
    message: str

    def wire(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True)
class Finish:
    """How the turn ended: ``stop``, ``length`` or ``tool_calls``; the engine's usage."""

    reason: str
    usage: Mapping[str, int] | None = None
    #: The client's stop text that ended the turn, when one did.
    stop_sequence: str | None = None


#: What :func:`turn` yields, in order; :class:`Finish` last.
Output = (
    TextDelta | ReasoningDelta | CallOpened | CallPiece | CallWithdrawn | WireCall | Told | Finish
)


def dumps(value: Any) -> str:
    """JSON text of a reply (its envelope, each streamed event) that can always be sent as
    UTF-8: by orjson, on the hot path; where orjson refuses (a lone surrogate, an integer
    past 64 bits), as :func:`arguments_text` writes it."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        return arguments_text(value)


def _object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _told(event: Event) -> Told | None:
    """What the client is told of a pipeline event, if anything."""
    if isinstance(event, Notice):
        return Told(event.code, event.message)
    if isinstance(event, CallAbort):
        return Told(
            "call-abandoned", f"a call the model began ({event.id}) was not one: {event.reason}"
        )
    return None


async def turn(events: AsyncIterable[Event]) -> AsyncIterator[Output]:
    """The turn's outputs as every API renders them.

    A call streams as the pipeline streams it (see :mod:`toolwire.pipeline.end`), one at a
    time; one that never began (a backend's whole call) is given whole at its end. Tool
    choice, parallel calls and the finish reason were settled by the pipeline; this only
    renders. Raises what the backend raises (:class:`~toolwire.errors.ToolwireError`).
    """
    order = _Serial()
    async for event in events:
        for out in order.push(event):
            yield out
    for out in order.end():
        yield out


_CALL_EVENTS = (CallStart, CallArgsDelta, CallEnd, CallAbort)


class _Serial:
    """The pipeline's events in the order every API can render: while a call is open, only
    its own events and notices pass; the rest waits, in order, until it ends."""

    def __init__(self) -> None:
        self._wire: dict[int, int] = {}  # a call's index in the pipeline -> on the wire
        self._names: dict[int, tuple[str, str]] = {}
        self._sent: dict[int, list[str]] = {}
        self._open: int | None = None
        self._waiting = _Waiting()
        self._next = 0
        self._finish = Finish("stop")
        self._held: Told | None = None  # a CallAbort's notice, unless the reader's follows

    def push(self, event: Event) -> list[Output]:
        if self._open is None or self._belongs(event):
            return self._drain(self._handle(event))
        self._waiting.add(event)
        return []

    def end(self) -> list[Output]:
        out: list[Output] = []
        if self._open is not None:  # never ended: withdrawn, and what waited follows
            out += self._drain(self._withdraw(self._open))
        if self._held is not None:
            out.append(self._held)
            self._held = None
        out.append(self._finish)
        return out

    def _belongs(self, event: Event) -> bool:
        if isinstance(event, Notice):
            return True
        return isinstance(event, _CALL_EVENTS) and event.index == self._open

    def _drain(self, out: list[Output]) -> list[Output]:
        """What waited, now that no call is open (until one opens again): with no call open,
        the oldest event; with one open, its own events and notices, oldest first. Each
        waiting event is looked at once, so a reply of many interleaved calls stays linear."""
        while True:
            if self._open is None:
                event = self._waiting.oldest()
            else:
                event = self._waiting.oldest_of(self._open)
            if event is None:
                return out
            out += self._handle(event)

    def _handle(self, event: Event) -> list[Output]:
        out: list[Output] = []
        told = _told(event)
        if self._held is not None:
            if not (isinstance(event, Notice) and event.code == "call-abandoned"):
                out.append(self._held)  # the reader said nothing of it: the client is told once
            self._held = None
        if isinstance(event, CallAbort):
            self._held = told
        elif told is not None:
            out.append(told)
        if isinstance(event, CallStart):
            self._names[event.index] = (event.id, event.name)
            self._open = event.index
        elif isinstance(event, CallArgsDelta):
            if event.index in self._names and event.text:
                if event.index not in self._sent:  # its first certain byte: it opens
                    self._wire[event.index] = self._next
                    self._next += 1
                    self._sent[event.index] = []
                    cid, name = self._names[event.index]
                    out.append(CallOpened(self._wire[event.index], cid, name))
                self._sent[event.index].append(event.text)
                out.append(CallPiece(self._wire[event.index], event.text))
        elif isinstance(event, CallAbort):
            out += self._withdraw(event.index)
        elif isinstance(event, CallEnd):
            out += self._call(event)
        elif isinstance(event, (TextDelta, ReasoningDelta)):
            out.append(event)
        elif isinstance(event, Done):
            self._finish = Finish(event.finish_reason, event.usage, event.stop_sequence)
        return out

    def _withdraw(self, index: int) -> list[Output]:
        """A begun call withdrawn: on the wire only if it opened there."""
        if self._open == index:
            self._open = None
        named = self._names.pop(index, None)
        if named is None or index not in self._sent:
            return []
        sent = "".join(self._sent.pop(index))
        return [CallWithdrawn(self._wire.pop(index), named[0], named[1], sent)]

    def _call(self, event: CallEnd) -> list[Output]:
        call = event.call
        arguments = event.arguments
        if arguments is None:  # a backend whose events did not come through the pipeline
            event, _ = prepare_call(event, None)
            arguments = event.arguments or "{}"
        out: list[Output] = []
        if self._open == event.index:
            self._open = None
        if event.index in self._sent:
            sent = "".join(self._sent[event.index])
            if arguments.startswith(sent):
                wire = self._wire.pop(event.index)
                del self._names[event.index], self._sent[event.index]
                if len(arguments) > len(sent):  # only a call that skipped the pipeline's end
                    out.append(CallPiece(wire, arguments[len(sent) :]))
                value = _object(arguments)
                return [*out, WireCall(wire, call.id, call.name, arguments, value, True)]
            out += self._withdraw(event.index)
        self._names.pop(event.index, None)
        wire = self._next
        self._next += 1
        return [*out, WireCall(wire, call.id, call.name, arguments, _object(arguments))]


class _Waiting:
    """Events held while a call is open, in arrival order, and by what may pass first: a
    call's own events, and notices (which pass whatever is open). An event taken by one
    view is skipped by the other."""

    def __init__(self) -> None:
        self._all: deque[list[Any]] = deque()  # [sequence, event, taken]
        self._calls: dict[int, deque[list[Any]]] = {}
        self._notices: deque[list[Any]] = deque()
        self._count = 0

    def add(self, event: Event) -> None:
        entry = [self._count, event, False]
        self._count += 1
        self._all.append(entry)
        if isinstance(event, Notice):
            self._notices.append(entry)
        elif isinstance(event, _CALL_EVENTS):
            self._calls.setdefault(event.index, deque()).append(entry)

    def oldest(self) -> Event | None:
        """The oldest event still waiting, taken."""
        while self._all:
            entry = self._all.popleft()
            if not entry[2]:
                entry[2] = True
                return cast(Event, entry[1])
        return None

    def oldest_of(self, index: int) -> Event | None:
        """The oldest waiting event of call ``index`` or notice, taken."""
        mine = self._calls.get(index)
        for queue in (mine, self._notices):
            while queue and queue[0][2]:
                queue.popleft()
        if mine is not None and not mine:
            del self._calls[index]
            mine = None
        heads = [q[0] for q in (mine, self._notices) if q]
        if not heads:
            return None
        entry = min(heads, key=lambda e: e[0])
        entry[2] = True
        return cast(Event, entry[1])


@dataclass
class Whole:
    """A turn read to its end, for a reply that is not streamed."""

    text: str = ""
    reasoning: str = ""
    calls: list[WireCall] = field(default_factory=list)
    notices: list[Told] = field(default_factory=list)
    finish: Finish = field(default_factory=lambda: Finish("stop"))


async def whole(events: AsyncIterable[Event]) -> Whole:
    """:func:`turn` read to its end."""
    out = Whole()
    text: list[str] = []
    reasoning: list[str] = []
    async for item in turn(events):
        if isinstance(item, TextDelta):
            text.append(item.text)
        elif isinstance(item, ReasoningDelta):
            reasoning.append(item.text)
        elif isinstance(item, WireCall):
            out.calls.append(item)
        elif isinstance(item, Told):
            out.notices.append(item)
        elif isinstance(item, Finish):
            out.finish = item
    out.text, out.reasoning = "".join(text), "".join(reasoning)
    return out


class Started:
    """A reply's events with the first ones taken early: the notices the pipeline gives
    before it sends, and the first event of the reply itself (or its failure) — so a
    streamed reply's failure before it begins gets its own status, not a 200.

    :meth:`begin` takes them in a task of their own, which the handler waits on only for a
    while (then the 200 and keep-alives go out while the model is still silent); iterating
    waits for it, and a failure it met is raised there, as a mid-stream one is."""

    def __init__(self, events: AsyncGenerator[Event, None]) -> None:
        self._events = events
        self._held: list[Event] = []
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Take events up to the first that is not a notice; a failure is raised here."""
        try:
            async for event in self._events:
                self._held.append(event)
                if not isinstance(event, Notice):
                    return
        except BaseException:
            await self._events.aclose()
            raise

    def begin(self) -> asyncio.Task[None]:
        """:meth:`start` in a task of its own, awaited by the first iteration."""
        self._task = asyncio.ensure_future(self.start())
        return self._task

    async def __aiter__(self) -> AsyncIterator[Event]:
        task = self._task
        try:
            if task is not None:
                await task
        finally:
            if task is not None and not task.done():  # the client went away meanwhile
                task.cancel()
                with suppress(BaseException):
                    await task
        async with aclosing(self._events) as events:
            for event in self._held:
                yield event
            self._held = []
            async for event in events:
                yield event


async def with_keepalives(
    stream: AsyncIterator[str], every: float, line: str
) -> AsyncIterator[str]:
    """``stream``'s pieces, and ``line`` whenever ``every`` seconds pass without one (while
    the model reads a long prompt, or writes a long call that is held): a client that
    gives up on silence keeps waiting, and one that reads only events skips the line."""
    pending: asyncio.Task[str] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(stream))
            done, _ = await asyncio.wait({pending}, timeout=every)
            if not done:
                yield line
                continue
            task, pending = pending, None
            try:
                piece = task.result()
            except StopAsyncIteration:
                return
            yield piece
    finally:
        if pending is not None:
            pending.cancel()
            with suppress(BaseException):
                await pending
        closer = getattr(stream, "aclose", None)
        if closer is not None:
            await closer()
