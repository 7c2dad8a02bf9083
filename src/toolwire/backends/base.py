"""What every backend takes and gives: a request for one model turn, a stream of events.

Each backend is written once, async; :func:`stream_sync` is the thin wrapper that lets sync
code iterate the same events.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from ..events import Event

__all__ = ["Backend", "Request", "stream_sync"]

T = TypeVar("T")


@dataclass(frozen=True)
class Request:
    """One model turn: the conversation so far (OpenAI-shaped messages) and the tools."""

    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]] | None = None
    #: ``auto``, ``none``, ``required`` or ``{"type": "function", "function": {"name": …}}``.
    tool_choice: str | Mapping[str, Any] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    #: Ask a thinking model to think (None: the model's default).
    think: bool | None = None
    #: The conversation's tool format (``auto``, a family, ``none``), for backends that
    #: parse the model's text themselves; None: the backend's own default.
    tool_format: str | None = None
    #: Strict: no drift recovery (a call in a shape the grammar does not read stays text).
    strict: bool = False
    #: Provider-specific fields passed through as they are.
    extra: Mapping[str, Any] = field(default_factory=dict)


class Backend(Protocol):
    """A model behind one interface: ``stream`` yields the turn's events, ending in Done."""

    name: str

    def stream(self, request: Request) -> AsyncGenerator[Event, None]: ...


def stream_sync(events: AsyncIterator[T]) -> Iterator[T]:
    """Iterate an async event stream from sync code, one event at a time.

    Runs its own event loop; closing the iterator early closes the stream (and with it the
    provider's connection).
    """
    loop = asyncio.new_event_loop()
    try:
        while True:
            try:
                yield loop.run_until_complete(events.__anext__())
            except StopAsyncIteration:
                return
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            loop.run_until_complete(aclose())
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
