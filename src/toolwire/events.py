"""The events a reply becomes, whichever backend or grammar produced it.

A consumer that only appends what it is given gets the reply right: text and reasoning
arrive as deltas; a call arrives as a start (its name known), argument deltas, and an end
carrying the typed call. A call that turns out not to be one (truncated, malformed) is
withdrawn with :class:`CallAbort`, and its text then follows as an ordinary text delta, so
nothing the model wrote is lost and nothing half-read is run.
"""

from __future__ import annotations

from dataclasses import dataclass

from .messages import ToolCall

__all__ = [
    "CallAbort",
    "CallArgsDelta",
    "CallEnd",
    "CallStart",
    "Done",
    "Event",
    "Notice",
    "ReasoningDelta",
    "TextDelta",
    "ToolResult",
    "ToolRun",
]


@dataclass(frozen=True)
class TextDelta:
    """Reply text meant for the user."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """Text the model wrote inside its thinking markers; never read for calls."""

    text: str


@dataclass(frozen=True)
class CallStart:
    """A call opened and its name is known. ``index`` counts calls within one reply."""

    index: int
    id: str
    name: str


@dataclass(frozen=True)
class CallArgsDelta:
    """More of the call's arguments as JSON text; the pieces concatenate."""

    index: int
    text: str


@dataclass(frozen=True)
class CallEnd:
    """The call is complete and checked against its family's grammar."""

    index: int
    call: ToolCall


@dataclass(frozen=True)
class CallAbort:
    """A started call was not a call after all; its text follows as a :class:`TextDelta`."""

    index: int
    id: str
    reason: str


@dataclass(frozen=True)
class Notice:
    """Something the user should know that is not part of the reply (e.g. a recovery)."""

    code: str
    message: str


@dataclass(frozen=True)
class Done:
    """The model's turn ended: why (``stop``, ``tool_calls``, ``length``…) and the usage."""

    finish_reason: str
    usage: dict[str, int] | None = None


@dataclass(frozen=True)
class ToolRun:
    """The loop is about to run a call: its arguments are typed and checked."""

    call: ToolCall


@dataclass(frozen=True)
class ToolResult:
    """What a call gave back, as the model will read it.

    ``status`` is ``ok``, or why it failed: ``invalid`` (arguments), ``unknown-tool``,
    ``denied`` (read-only), ``error`` (the tool raised), ``unavailable`` (try later),
    ``timeout`` or ``unknown-outcome`` (a side effect may or may not have happened).
    """

    call_id: str
    name: str
    content: str
    status: str = "ok"


Event = (
    Done
    | ToolRun
    | ToolResult
    | TextDelta
    | ReasoningDelta
    | CallStart
    | CallArgsDelta
    | CallEnd
    | CallAbort
    | Notice
)
