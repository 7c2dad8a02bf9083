"""The reply pipeline: one place decides, for every transport, how a turn's tools reach the
model and how its reply becomes calls.

1. **Decide** (:func:`decide`): no tools → ``plain``; an engine with a tools API →
   ``native``, in the schema dialect the model needs; a model whose raw text we read →
   ``grammar`` when its template has a family, else ``words``. A model listed as taking no
   tools, one that said so before, or a conversation whose format is ``none`` gets its tools
   in ``words``. Each decision that is not the plain default is a :class:`Notice`.
2. **Read** (:func:`read`): the family's grammar or the lenient reader for tools in words
   turns text into calls; unless ``strict``, drift recovery reads a whole reply that is only a
   call written in another shape (bare JSON, a fence, an unclosed tag); the turn ends in
   ``tool_calls`` when it made any.
3. **Heal**: a refusal over tools, before the model said a word, is healed once — a refused
   schema keyword sends the tools again in the strict dialect; "takes no tools" gives them in
   words — and the lesson is kept in the transport's :class:`ModelMemory`.

Transports do I/O only (see :mod:`toolwire.pipeline.transport`), so the same reply gives the
same calls through every one of them.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import replace
from typing import TYPE_CHECKING

from ..errors import BackendError
from ..events import CallEnd, Done, Event, Notice, TextDelta
from ..formats.base import ReplyStream
from ..formats.drift import DriftGuard
from ..formats.words import Words
from ..prompted import tools_in_words, transcript_in_words
from ..schemas import classify_refusal
from .memory import Lesson
from .request import Plan, Request

if TYPE_CHECKING:
    from .transport import Transport

__all__ = ["decide", "in_words", "read", "reply"]


def decide(transport: Transport, request: Request, lesson: Lesson) -> tuple[Plan, list[Notice]]:
    """How this turn reaches the model, and the notices that say so."""
    if not request.tools:
        return Plan("plain"), []
    model = transport.model
    if transport.native_tools:
        why = (
            "the conversation's tool format is none"
            if request.tool_format == "none"
            else "it is listed as taking no tools"
            if transport.words
            else "it said before that it takes no tools"
            if lesson.words
            else ""
        )
        if why:
            return Plan("words"), [
                Notice("tools-in-words", f"{model} gets its tools in words: {why}")
            ]
        if lesson.dialect is not None and lesson.dialect != transport.dialect:
            notice = Notice(
                "schema-dialect",
                f"{model} refused a schema before; its tools go in the {lesson.dialect} dialect",
            )
            return Plan("native", dialect=lesson.dialect), [notice]
        return Plan("native", dialect=transport.dialect), []
    family = transport.family_for(request)
    if family is None:
        why = (
            "the conversation's tool format is none"
            if request.tool_format == "none"
            else "its template has no tool format"
        )
        return Plan("words"), [Notice("tools-in-words", f"{model} gets its tools in words: {why}")]
    return Plan("grammar", family=family), []


def in_words(transport: Transport, request: Request) -> tuple[Request, Notice | None]:
    """The request with its tools in words: listed in the system prompt, none sent; earlier
    calls and results written out as text. A notice when not even the names fit."""
    system, _ = tools_in_words(
        request.tools or (), transport.context_tokens, transport.count_tokens
    )
    notice = None
    if system is None:
        notice = Notice(
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


async def read(
    raw: AsyncIterator[Event], plan: Plan, request: Request, *, reasoning_open: bool = False
) -> AsyncGenerator[Event, None]:
    """A transport's raw events read as the plan says: text through the grammar or the
    reader for words, drift recovery unless strict, and the turn's end."""
    tools = request.tools
    parser: ReplyStream | None = None
    if plan.mode == "words" and tools:
        parser = Words().stream(tools, reasoning_open=reasoning_open)
    elif plan.mode == "grammar" and plan.family is not None:
        parser = plan.family.stream(tools, reasoning_open=reasoning_open)
    guard: DriftGuard | None = None
    if tools and not request.strict and plan.mode in ("native", "grammar"):
        # an engine's own call shows at its start; a grammar's may still come to nothing
        guard = DriftGuard(tools, release_on_start=plan.mode == "native")
    calls = 0
    async for event in raw:
        if isinstance(event, Done):
            out = parser.finish() if parser is not None else []
            if guard is not None:
                out = guard.push(out) + guard.end(cut=event.finish_reason == "length")
        elif parser is not None and isinstance(event, TextDelta):
            out = parser.feed(event.text)
            out = guard.push(out) if guard is not None else out
        else:
            out = guard.push([event]) if guard is not None else [event]
        for item in out:
            calls += isinstance(item, CallEnd)
            yield item
        if isinstance(event, Done):
            yield Done("tool_calls" if calls else event.finish_reason, event.usage)
            return


async def reply(transport: Transport, request: Request) -> AsyncGenerator[Event, None]:
    """One turn through ``transport``: decided, sent, read, and healed when refused."""
    memory = transport.memory
    key = (transport.endpoint, transport.model)
    healed: set[str] = set()
    while True:
        plan, notices = decide(transport, request, memory.recall(*key))
        if not healed:  # after healing, its own notice has said why
            for notice in notices:
                yield notice
        sent = request
        if plan.mode == "words":
            sent, too_long = in_words(transport, request)
            if too_long is not None:
                yield too_long
                plan = Plan("plain")
        prepared = transport.prepare(sent, plan)
        started = False
        try:
            events = read(
                transport.send(prepared), plan, request, reasoning_open=prepared.reasoning_open
            )
            async with aclosing(events) as stream:
                async for event in stream:
                    started = True
                    yield event
            return
        except BackendError as exc:
            kind = classify_refusal(exc) if plan.mode == "native" and not started else None
            if kind == "schema" and plan.dialect != "strict" and kind not in healed:
                healed.add(kind)
                memory.learn(*key, dialect="strict")
                yield Notice(
                    "healed-schema",
                    f"{transport.model} refused a tool schema; sent again with plain schemas",
                )
                continue
            if kind == "tools" and kind not in healed:
                healed.add(kind)
                memory.learn(*key, words=True)
                yield Notice(
                    "healed-tools",
                    f"{transport.model} takes no tools; they are given in words instead",
                )
                continue
            raise
