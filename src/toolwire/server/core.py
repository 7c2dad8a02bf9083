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

from ..arguments import prepare_arguments
from ..arguments.read import ReadError, read_json
from ..errors import ArgumentsError
from ..events import CallAbort, CallEnd, Done, Event, Notice, ReasoningDelta, TextDelta
from ..messages import ToolCall
from ..pipeline import Request

__all__ = [
    "Finish",
    "Output",
    "Started",
    "Told",
    "Whole",
    "WireCall",
    "arguments_json",
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

    code: str
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


def _schemas(request: Request) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for tool in request.tools or ():
        fn = tool["function"]
        params = fn.get("parameters")
        if isinstance(fn.get("name"), str):
            out[fn["name"]] = params if isinstance(params, Mapping) else {"type": "object"}
    return out


def arguments_json(
    call: ToolCall, schema: Mapping[str, Any] | None, *, strict: bool = False
) -> tuple[str, Notice | None]:
    """The call's arguments as the JSON text a client will run the tool with, and a notice
    when they are not exactly what the model wrote.

    Read forgivingly and typed by the tool's schema where that works and drops nothing
    (``"3"`` for an integer becomes ``3``, single quotes and trailing commas are repaired;
    with ``strict``, nothing is). Where it does not, the value as read, or else the model's
    own text unchanged: a client must never run a tool with arguments the model did not
    send, so an unreadable call is not made an empty one.
    """
    raw: str | dict[str, Any] = (
        call.arguments_text if call.arguments_text.strip() else call.arguments
    )
    if schema is not None:
        try:
            done = prepare_arguments(
                raw, schema, name=call.name, strict=strict, text_values=call.text_values
            )
        except ArgumentsError as exc:
            problem = Notice("arguments-invalid", exc.explanation)
        else:
            # typed only where nothing is lost: a field the schema does not list is the
            # client's to judge, not ours to drop
            if not done.dropped:
                notice = None
                if done.repairs:
                    notice = Notice(
                        "arguments-repaired",
                        f"the arguments of {call.name} ({call.id}) were repaired: "
                        + ", ".join(done.repairs),
                    )
                return arguments_text(done.arguments), notice
            problem = Notice(
                "arguments-unknown-fields",
                f"the arguments of {call.name} ({call.id}) have fields its schema does not "
                f"list ({', '.join(done.dropped)}); sent as the model wrote them",
            )
    else:
        problem = Notice("unknown-tool", f"{call.name} is not among the request's tools")
    if isinstance(raw, dict):
        return arguments_text(raw), problem
    try:
        value = read_json(raw, strict=strict).value
    except ReadError:
        return raw, problem
    return (arguments_text(value) if isinstance(value, dict) else raw), problem


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


async def turn(
    events: AsyncIterable[Event], request: Request, *, parallel: bool
) -> AsyncIterator[Output]:
    """The turn's outputs as every API renders them.

    A call is given whole once it is complete: one the model abandons never reaches the
    client, and its arguments are the repaired ones. With ``parallel`` false, calls after
    the first are not given (a ``calls-dropped`` notice names each). Raises what the
    backend raises (:class:`~toolwire.errors.ToolwireError`).
    """
    schemas = _schemas(request)
    sent = 0
    finish = Finish("stop")
    async for event in events:
        told = _told(event)
        if told is not None:
            yield told
        if isinstance(event, CallEnd):
            call = event.call
            if parallel or not sent:
                arguments, notice = arguments_json(
                    call, schemas.get(call.name), strict=request.strict
                )
                if notice is not None:
                    yield Told(notice.code, notice.message)
                yield WireCall(sent, call.id, call.name, arguments, _object(arguments))
                sent += 1
            else:
                yield Told(
                    "calls-dropped",
                    f"parallel_tool_calls is false: {call.name} ({call.id}) was not sent",
                )
        elif isinstance(event, (TextDelta, ReasoningDelta)):
            yield event
        elif isinstance(event, Done):
            finish = Finish("tool_calls" if sent else event.finish_reason, event.usage)
    yield finish


@dataclass
class Whole:
    """A turn read to its end, for a reply that is not streamed."""

    text: str = ""
    reasoning: str = ""
    calls: list[WireCall] = field(default_factory=list)
    notices: list[Told] = field(default_factory=list)
    finish: Finish = field(default_factory=lambda: Finish("stop"))


async def whole(events: AsyncIterable[Event], request: Request, *, parallel: bool) -> Whole:
    """:func:`turn` read to its end."""
    out = Whole()
    text: list[str] = []
    reasoning: list[str] = []
    async for item in turn(events, request, parallel=parallel):
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
