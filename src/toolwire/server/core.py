"""One request core for every API the gateway speaks.

Chat Completions, Responses and Anthropic Messages differ only on the wire: each adapter
turns its request into one engine :class:`~toolwire.pipeline.Request` and renders the
same :func:`turn` — text, thinking, complete calls with their arguments typed by the
schema, notices, and how the turn finished. So healing, notices, ``strict``, tool choice
and parallel calls are decided here once, and the same upstream reply gives the same
calls through every API.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..events import (
    CallAbort,
    CallEnd,
    Done,
    Event,
    Notice,
    NoticeCode,
    ReasoningDelta,
    TextDelta,
)
from ..pipeline.end import arguments_text, prepare_call

__all__ = [
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


#: What :func:`turn` yields, in order; :class:`Finish` last.
Output = TextDelta | ReasoningDelta | WireCall | Told | Finish


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

    A call is given whole once it is complete, with the arguments the pipeline typed (see
    :mod:`toolwire.pipeline.end`): one the model abandons never reaches the client.
    Tool choice, parallel calls and the finish reason were settled by the pipeline; this
    only renders. Raises what the backend raises (:class:`~toolwire.errors.ToolwireError`).
    """
    sent = 0
    finish = Finish("stop")
    held: Told | None = None  # a CallAbort's notice, unless the reader's own follows it
    async for event in events:
        told = _told(event)
        if held is not None:
            if not (isinstance(event, Notice) and event.code == "call-abandoned"):
                yield held  # the reader said nothing of it itself: the client is told once
            held = None
        if isinstance(event, CallAbort):
            held = told
        elif told is not None:
            yield told
        if isinstance(event, CallEnd):
            call = event.call
            arguments = event.arguments
            if arguments is None:  # a backend whose events did not come through the pipeline
                event, _ = prepare_call(event, None)
                arguments = event.arguments or "{}"
            yield WireCall(sent, call.id, call.name, arguments, _object(arguments))
            sent += 1
        elif isinstance(event, (TextDelta, ReasoningDelta)):
            yield event
        elif isinstance(event, Done):
            finish = Finish(event.finish_reason, event.usage)
    if held is not None:
        yield held
    yield finish


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
        else:
            out.finish = item
    out.text, out.reasoning = "".join(text), "".join(reasoning)
    return out


class Started:
    """A reply's events with the first ones taken early: the notices the pipeline gives
    before it sends, and the first event of the reply itself (or its failure) — so a
    streamed reply's failure before it begins gets its own status, not a 200."""

    def __init__(self, events: AsyncGenerator[Event, None]) -> None:
        self._events = events
        self._held: list[Event] = []

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

    async def __aiter__(self) -> AsyncIterator[Event]:
        async with aclosing(self._events) as events:
            for event in self._held:
                yield event
            self._held = []
            async for event in events:
                yield event
