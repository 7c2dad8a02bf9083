"""Reading a remote model's text as calls: tools given in words, and drift recovery.

Both wrap the events a remote backend streams. In words, the text goes through the lenient
reader and the calls it finds take its place; otherwise a drift guard holds text that may
be a whole-reply call and recovers it when the turn ends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..events import CallEnd, Done, Event, Notice, TextDelta
from ..formats.drift import DriftGuard
from ..formats.words import Words
from ..prompted import tools_in_words, transcript_in_words
from .base import Request

__all__ = ["in_words", "read_in_words", "recover_drift"]


def in_words(request: Request, context_tokens: int) -> tuple[Request, Notice | None]:
    """The request with its tools in words: listed in the system prompt, none sent."""
    system, _ = tools_in_words(request.tools or (), context_tokens)
    notice = (
        Notice("no-tools", "the model's window cannot hold even the shortest tool list")
        if system is None
        else None
    )
    worded = replace(
        request,
        messages=transcript_in_words(request.messages, system),
        tools=None,
        tool_choice=None,
    )
    return worded, notice


async def read_in_words(
    events: AsyncIterator[Event], tools: Sequence[Mapping[str, Any]]
) -> AsyncIterator[Event]:
    """The model's text read as calls in words; the turn ends in calls when it made any."""
    reader = Words().stream(tools)
    calls = 0
    async for event in events:
        if isinstance(event, TextDelta):
            made = reader.feed(event.text)
        elif isinstance(event, Done):
            made = reader.finish()
        else:
            made = [event]
        for out in made:
            calls += isinstance(out, CallEnd)
            yield out
        if isinstance(event, Done):
            yield Done("tool_calls" if calls else event.finish_reason, event.usage)


async def recover_drift(
    events: AsyncIterator[Event], tools: Sequence[Mapping[str, Any]]
) -> AsyncIterator[Event]:
    """Native events, with calls the server left in the text recovered before the end."""
    guard = DriftGuard(tools, release_on_start=True)
    async for event in events:
        if isinstance(event, Done):
            for held in guard.end(cut=event.finish_reason == "length"):
                yield held
            yield Done("tool_calls", event.usage) if guard.recovered else event
        else:
            for passed in guard.push([event]):
                yield passed
