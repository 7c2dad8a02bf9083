"""The reply pipeline: one place decides, for every transport, how a turn's tools reach the
model and how its reply becomes calls.

1. **Decide** (:func:`decide`): no tools → ``plain``; an engine with a tools API →
   ``native``, in the schema dialect the model needs; a model whose raw text we read →
   ``grammar`` when its template has a family, else ``words``. A model listed as taking no
   tools, one that said so before, or a conversation whose format is ``none`` gets its tools
   in ``words``. Each decision that is not the plain default is a :class:`Notice`.
2. **Read** (:func:`read`): the family's grammar or the lenient reader for tools in words
   turns text into calls; unless ``strict``, drift recovery reads a whole reply that is only a
   call written in another shape (bare JSON, a fence, an unclosed tag); a call to a tool
   the request did not declare is an ``undeclared-tool`` notice, never a call (with
   ``strict``, an error: :mod:`toolwire.pipeline.declared`); the turn ends in
   ``tool_calls`` when it made any. A turn that offered no tools (``plain``) reads no calls
   from its text, but a reply that is nothing but a call in one of drift recovery's shapes
   gets a ``call-without-tools`` notice at its end, ``strict`` or not (a notice, not a
   recovery): it stays text and nothing runs.
3. **Heal**: a refusal over tools, before the model said a word, is healed once, for this
   request — a refused schema keyword sends the tools again in the strict dialect; "takes no
   tools" gives them in words. Whether the transport's :class:`ModelMemory` keeps it as a
   lesson for later requests is decided in :mod:`toolwire.pipeline.lessons` (only from a
   probe of the gateway's own: a provider's error code describes the request). An engine that
   refuses the request's images or files is asked again with placeholders for them (for this
   request: the next may go to a model that takes them).
4. **Constrain** (an engine that can, unless ``strict`` or ``constrained=False``): a call
   the model begins is finished under a grammar of the declared tools and their schemas
   (:mod:`toolwire.formats.gbnf`); with ``tool_choice`` required, from the first token. A
   structured output (``Request.output``) is written under its schema's grammar from the
   first token — on a turn with tools (a call not required), under the grammar of a call or
   that answer (:mod:`toolwire.pipeline.structured`) — and every reply is checked against it.
5. **Repeats** (:mod:`toolwire.pipeline.repeats`), unless ``strict``: a call repeated in one
   reply ends the reply there (generation closed); the call whose result ends the
   conversation, written again, is dropped, and when it was all the model said, the model is
   asked once more without tools.

What the model is given of the messages — images and documents where the engine takes them,
else placeholders; a system message inside the conversation where the template reads it — is
decided once, in :mod:`toolwire.pipeline.content`, when the turn is planned.

Transports do I/O only (see :mod:`toolwire.pipeline.transport`), so the same reply gives the
same calls through every one of them.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, TypeVar, cast

from .. import events as ev
from ..budget import WorkBudget, charging
from ..errors import BackendError
from ..events import Event
from ..formats.base import ReplyStream
from ..formats.drift import DriftGuard, ToollessWatch
from ..formats.gbnf import Constraint, constraint_for
from ..formats.reasoning import ReasoningSplitter
from ..formats.registry import FORMAT_SETTINGS, get_family
from ..formats.words import Words
from ..prompted import tools_in_words, transcript_in_words
from ..schemas.refusals import read_refusal, refused_media
from .content import has_media, readable
from .declared import Declared
from .end import End
from .lessons import settle
from .limits import CallLimit
from .memory import Lesson
from .repeats import Repeats, without_tools
from .request import Plan, Request
from .sampling import not_honoured
from .stops import Stops
from .structured import OutputCheck, call_or_output, output_constraint

if TYPE_CHECKING:
    from .transport import Transport

T = TypeVar("T")

#: Events a reply passes on before it gives the event loop a turn (see :func:`reply`).
_EVENTS_PER_TURN = 64
#: Steps of the work budget a reply spends on the event loop before it gives it a turn: a
#: reply of many calls, each checked on the loop, would otherwise add their checks up.
_STEPS_PER_TURN = 500

__all__ = ["decide", "in_words", "plan_turn", "planned", "read", "reply"]


def decide(transport: Transport, request: Request, lesson: Lesson) -> tuple[Plan, list[ev.Notice]]:
    """How this turn reaches the model, and the notices that say so.

    A turn with no tools (``tool_choice`` ``none`` leaves none) is plain. A ``tool_format``
    naming a family is read from the text of every transport's reply: a native engine may
    leave its model's calls there.
    """
    if request.tool_format is not None and request.tool_format not in FORMAT_SETTINGS:
        get_family(request.tool_format)  # an unknown name is a FormatError, for every transport
    if not request.tools:  # no tools offered (the turn settled tool_choice none so)
        return Plan("plain"), []
    model = transport.model
    if transport.native_tools:
        # the turn's format, else the server's (the family its model writes calls in as text)
        setting = request.tool_format if request.tool_format is not None else transport.tool_format
        why = (
            "the conversation's tool format is none"
            if setting == "none"
            else "it is listed as taking no tools"
            if transport.words
            else f"it said before that it takes no tools ({lesson.origin()})"
            if lesson.words
            else ""
        )
        if why:
            return Plan("words"), [
                ev.Notice("tools-in-words", f"{model} gets its tools in words: {why}")
            ]
        family = None
        if setting not in (None, *FORMAT_SETTINGS):
            family = get_family(str(setting))
        notices = []
        dialect = transport.dialect
        if lesson.dialect is not None and lesson.dialect != transport.dialect:
            dialect = lesson.dialect
            notices.append(
                ev.Notice(
                    "schema-dialect",
                    f"{model} refused a schema before; its tools go in the {dialect} dialect "
                    f"({lesson.origin()})",
                )
            )
        return Plan("native", family=family, dialect=dialect), notices
    family = transport.family_for(request)
    if family is None:
        why = (
            "the conversation's tool format is none"
            if request.tool_format == "none"
            else "its template has no tool format"
        )
        return Plan("words"), [
            ev.Notice("tools-in-words", f"{model} gets its tools in words: {why}")
        ]
    return Plan("grammar", family=family), []


def plan_turn(
    transport: Transport,
    request: Request,
    *,
    text_only: bool = False,
    healed: Lesson | None = None,
) -> tuple[Plan, Request, list[ev.Notice]]:
    """The plan, the request as it will be sent (tools in words, or a named tool alone),
    and every notice that says why — the one place a turn is decided. ``text_only``: the
    engine refused the request's images or files; they go as placeholders. ``healed``: what
    a refusal of this request taught it alone, over what the model's memory holds."""
    lesson = transport.memory.recall(transport.endpoint, transport.model)
    if healed is not None:
        lesson = replace(
            lesson, dialect=healed.dialect or lesson.dialect, words=healed.words or lesson.words
        )
    plan, notices = decide(transport, request, lesson)
    fields = (transport.sampling_fields, transport.engine_fields, transport.takes_thinking)
    told = not_honoured(request, *fields, transport.model)
    notices += [told] if told is not None else []
    # images, documents and system messages as this model can be given them
    sent, seen = readable(transport, request, text_only=text_only)
    notices += seen
    if (plan.mode in ("grammar", "words") or plan.family is not None) and sent.sampling.stop:
        # the model's raw text holds its calls: a stop text inside one must not cut it, so
        # the pipeline cuts the reply's text (pipeline.stops), never the engine
        sent = replace(sent, sampling=replace(sent.sampling, stop=()))
    if plan.mode == "words":
        sent, too_long = in_words(transport, sent)
        if too_long is not None:
            notices.append(too_long)
            plan = Plan("plain")
    if plan.mode == "grammar" and transport.can_constrain and _constrains(request):
        # a named function or "required": a call is certain, so the grammar holds throughout
        constraint = constraint_for(
            plan.family, sent.tools, required=request.required, parallel=request.parallel_calls
        )
        if constraint is not None and request.output is not None and not request.required:
            # tools and a structured output: a call, or the answer in the schema
            constraint = cast(
                "Constraint", call_or_output(constraint, request.output) or constraint
            )
        plan = replace(plan, constraint=constraint)
    if plan.mode == "plain" and request.output is not None and _shapes(transport, request):
        # no tools: the answer is the output's JSON, under its schema's grammar throughout
        plan = replace(plan, constraint=cast("Constraint", output_constraint(request.output)))
    forced = plan.constraint is not None and plan.constraint.required
    if plan.mode in ("grammar", "words") and request.tool_choice == "required" and not forced:
        notices.append(
            ev.Notice(
                "tool-choice-not-enforced",
                f"{transport.model} is asked to call a tool, but only the prompt can ask it",
            )
        )
    return plan, sent, notices


def planned(transport: Transport, request: Request) -> tuple[Request, Plan]:
    """The request as it will be sent and its plan, as :func:`reply` makes them: for a caller
    that wants to see what a transport would send (a local model's prompt) without sending."""
    plan, sent, _ = plan_turn(transport, request)
    return sent, plan


def _constrains(request: Request) -> bool:
    """Are this turn's calls finished under a grammar? Unless ``strict`` (the model's own
    output, untouched) or ``constrained`` is off."""
    return request.constrained and not request.strict


def _shapes(transport: Transport, request: Request) -> bool:
    """Is a structured output written under its grammar? On an engine that can, unless
    ``constrained`` is off (the client asked for the format: toolwire's ``strict`` keeps it)."""
    return transport.can_constrain and request.constrained


def in_words(transport: Transport, request: Request) -> tuple[Request, ev.Notice | None]:
    """The request with its tools in words: listed in the system prompt, none sent; earlier
    calls and results written out as text. A notice when not even the names fit."""
    system, _ = tools_in_words(
        request.tools or (), transport.context_tokens, transport.count_tokens
    )
    notice = None
    if system is None:
        notice = ev.Notice(
            "no-tools",
            f"the model's window ({transport.context_tokens} tokens) cannot hold even the "
            "shortest tool list; it answers without tools",
        )
    worded = replace(
        request,
        messages=transcript_in_words(request.messages, system),
        tools=None,
        tool_choice=None,
    )
    return worded, notice


class _Renumber:
    """One numbering for the calls of a reply, whichever reader found them (an engine's own
    calls and calls read from its text may both be there)."""

    def __init__(self) -> None:
        self._map: dict[tuple[str, int], int] = {}

    def __call__(self, events: Sequence[Event], source: str) -> list[Event]:
        out: list[Event] = []
        for event in events:
            if isinstance(event, (ev.CallStart, ev.CallArgsDelta, ev.CallEnd, ev.CallAbort)):
                key = (source, event.index)
                if key not in self._map:
                    self._map[key] = len(self._map)
                if self._map[key] != event.index:  # a copy only when the number changes
                    event = replace(event, index=self._map[key])
            out.append(event)
        return out


async def read(
    raw: AsyncIterator[Event],
    plan: Plan,
    request: Request,
    *,
    reasoning_open: bool = False,
    answered: Callable[[str, str], bool] | None = None,
) -> AsyncGenerator[Event, None]:
    """A transport's raw events read as the plan says: text through the grammar (or the
    reader for words), thinking apart, drift recovery unless strict, and the turn's end.

    ``answered`` tells the drift guard which call was just answered: a reply opening with
    it is read as that call even when it runs on, so the repeat check can take it."""
    tools = request.tools
    parser: ReplyStream | None = None
    splitter: ReasoningSplitter | None = None
    if plan.mode == "words" and tools:
        parser = Words().stream(tools, reasoning_open=reasoning_open, strict=request.strict)
    elif plan.family is not None:
        parser = plan.family.stream(tools, reasoning_open=reasoning_open, strict=request.strict)
    elif plan.mode == "native":
        # an engine that leaves a thinking block in the text: it is still thinking
        splitter = ReasoningSplitter(opened=reasoning_open)
    guard: DriftGuard | ToollessWatch | None = None
    if plan.mode == "plain":
        # no tools offered: nothing is a call, and a reply written as one says so
        guard = ToollessWatch()
    elif tools and not request.strict and plan.mode in ("native", "grammar"):
        # an engine's own call shows at its start; a grammar's may still come to nothing
        guard = DriftGuard(tools, release_on_start=plan.mode == "native", answered=answered)
    number = _Renumber()
    # a turn that offered no tools declared none (tool_choice none keeps them in the request)
    declared = Declared(
        None if plan.mode == "plain" else request.index,
        strict=request.strict,
        unreadable=plan.mode == "words",  # the one reader that names a call it cannot read
    )
    async for event in raw:
        if isinstance(event, ev.Done):
            out = number(parser.finish(), "text") if parser is not None else []
            out += _split(splitter.finish()) if splitter is not None else []
            if guard is not None:
                out = guard.push(out) + guard.end(cut=event.finish_reason == "length")
        else:
            if isinstance(event, ev.TextDelta) and parser is not None:
                out = number(parser.feed(event.text), "text")
            elif isinstance(event, ev.TextDelta) and splitter is not None:
                out = _split(splitter.feed(event.text))
            else:
                out = number([event], "engine")
            out = guard.push(out) if guard is not None else out
        for item in declared.push(out):
            yield item
        if isinstance(event, ev.Done):
            yield event  # how the turn ends is decided at the end (pipeline.end)
            return


def _split(pieces: list[tuple[bool, str]]) -> list[Event]:
    return [
        ev.ReasoningDelta(text) if thinking else ev.TextDelta(text) for thinking, text in pieces
    ]


async def apart(budget: WorkBudget, work: Callable[[], T]) -> T:
    """``work()`` in a worker thread of the budget's pool, charging ``budget`` (and so giving
    the event loop its turn now and then: see :class:`~toolwire.budget.WorkBudget`), while
    the loop serves others."""

    def charged() -> T:
        with charging(budget):
            return work()

    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(budget.pool, context.run, charged)


async def reply(transport: Transport, request: Request) -> AsyncGenerator[Event, None]:
    """One turn through ``transport``: decided, sent, read, and healed when refused."""
    end = End(request)
    # an engine with its own API is another server's; a template's engine is our own
    check = OutputCheck(request, upstream=transport.native_tools)
    since_turn = 0
    budget = request.budget
    spent_at_turn = budget.spent
    async with aclosing(_attempts(transport, request)) as events:
        async for event in events:
            # a check that may be slow is made in a worker thread: the loop serves others
            if end.offloaded(event):
                outs = await apart(budget, partial(end.push, event))
            else:
                outs = end.push(event)
            for out in outs:
                if check.offloaded(out):
                    ends = await apart(budget, partial(check.push, out))
                else:
                    ends = check.push(out)
                for checked in ends:
                    yield checked
            # a reply already in hand (10,000 calls in one read) yields no turn of its own:
            # every other client waits unless the loop gets one now and then
            # and so does work done here, call after call, each too small for a thread
            since_turn += 1
            if since_turn >= _EVENTS_PER_TURN or budget.spent - spent_at_turn > _STEPS_PER_TURN:
                since_turn = 0
                spent_at_turn = budget.spent
                await asyncio.sleep(0)


async def _attempts(transport: Transport, request: Request) -> AsyncGenerator[Event, None]:
    """The turn's events before its end: sent, read, healed when refused, asked again
    when all it said was a repeat."""
    media_told = False
    healed: set[str] = set()
    own = Lesson()  # what refusals of this request taught it alone
    while True:
        text_only = "media" in healed
        if request.budget.inline:
            plan, sent, notices = plan_turn(transport, request, text_only=text_only, healed=own)
        else:  # a large request's tools and messages are shaped off the event loop
            plan, sent, notices = await apart(
                request.budget,
                partial(plan_turn, transport, request, text_only=text_only, healed=own),
            )
        if not healed:  # after healing, its own notice has said why
            for notice in notices:
                yield notice
        elif "media" in healed and not media_told:
            media_told = True  # the placeholders' notice says the engine refused them
            for notice in notices:
                if notice.code == "content-not-seen":
                    yield notice
        if request.budget.inline:
            prepared = transport.prepare(sent, plan)
        else:
            prepared = await apart(request.budget, partial(transport.prepare, sent, plan))
        heard = _Heard(transport.send(prepared))
        repeats: Repeats | None = None
        if request.tools and not request.strict:
            repeats = Repeats(request)
        try:
            events = read(
                heard,
                plan,
                request,
                reasoning_open=prepared.reasoning_open,
                answered=repeats.answered if repeats is not None else None,
            )
            limit = CallLimit(request.max_calls)
            stops = Stops(request.sampling.stop)
            async with aclosing(heard), aclosing(events) as stream:
                async for event in stream:
                    for kept in limit.push(event):
                        for out in repeats.push(kept) if repeats is not None else (kept,):
                            for cut in stops.push(out):
                                yield cut
                    if stops.closed:  # a stop text reached: generation is closed
                        return
                    # a live reply is closed at the repeat; one already over is read to
                    # its end, for its usage
                    if repeats is not None and repeats.stop and (repeats.retry or not heard.done):
                        break
                    if limit.closed:  # past the calls one reply passes on: generation is closed
                        return
            if repeats is None or not repeats.stop:
                return
            if not repeats.retry:  # the reply ends at the repeat: generation is closed
                if not repeats.ended:
                    for cut in stops.push(ev.Done("stop")):  # what the stops held, first
                        yield cut
                return
            # the repeated call was all it said: asked once more, without tools, to answer
            # (an answer that is the call again is named like any call on a turn without tools)
            request = without_tools(request)
            healed.add("repeat")
            continue
        except BackendError as exc:
            # healed only before the model said a word: nothing it wrote may be lost
            if (
                not heard.any
                and "media" not in healed
                and transport.takes_images
                and refused_media(exc)
                and has_media(request)
            ):
                healed.add("media")  # asked again with placeholders for what it cannot take
                continue
            refusal = read_refusal(exc) if plan.mode == "native" and not heard.any else None
            kind = refusal.kind if refusal is not None else None
            if (
                refusal is not None
                and kind == "schema"
                and plan.dialect != "strict"
                and (kind not in healed)
            ):
                healed.add(kind)
                own = replace(own, dialect="strict")
                told = await settle(transport, refusal, plan.dialect)
                yield ev.Notice(
                    "healed-schema",
                    f"{transport.model} refused a tool schema; sent again with plain schemas, "
                    f"{told}",
                )
                continue
            if refusal is not None and kind == "tools" and kind not in healed:
                healed.add(kind)
                own = replace(own, words=True)
                told = await settle(transport, refusal, plan.dialect)
                yield ev.Notice(
                    "healed-tools",
                    f"{transport.model} refused the request's tools; they are given in words, "
                    f"{told}",
                )
                continue
            raise


class _Heard:
    """A transport's raw events, noting whether any came: a refusal is healed only before
    the model said anything, even what the pipeline still holds back."""

    def __init__(self, events: AsyncGenerator[Event, None]) -> None:
        self._events = events
        self.any = False
        self.done = False  # the transport's reply is over (all that is left is in hand)

    def __aiter__(self) -> _Heard:
        return self

    async def __anext__(self) -> Event:
        event = await self._events.__anext__()
        if isinstance(event, ev.Done):
            self.done = True
        else:
            self.any = True
        return event

    async def aclose(self) -> None:
        await self._events.aclose()
