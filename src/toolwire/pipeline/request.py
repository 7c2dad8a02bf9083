"""What a model turn is asked with, and how the pipeline decided to reach the model.

:class:`Request` is what callers give every backend; :class:`Plan` is the pipeline's one
decision for the turn; :class:`Prepared` is what a transport made ready to send.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

from ..budget import WorkBudget
from ..errors import UsageError
from ..events import Event
from ..formats.base import Family, ToolIndex
from ..formats.gbnf import Constraint
from .limits import DEFAULT_MAX_CALLS
from .sampling import Sampling

__all__ = ["Backend", "Mode", "OutputFormat", "Plan", "Prepared", "Request", "stream_sync"]

T = TypeVar("T")


@dataclass(frozen=True)
class Request:
    """One model turn, typed once at its entrance (a client API, the loop, the CLI): the
    conversation so far (OpenAI-shaped messages), the tools, and how to read the reply.

    Made, it has settled what every later step would otherwise decide again: ``index``
    holds the tools by name (built once); a ``tool_choice`` naming a function leaves that
    tool alone in ``tools`` (and a call to it required); ``none`` leaves no tools at all. So
    no transport, surface or reader filters a tool list or reads ``tool_choice`` itself.
    """

    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]] | None = None
    #: ``auto``, ``none``, ``required`` or ``{"type": "function", "function": {"name": …}}``.
    tool_choice: str | Mapping[str, Any] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    #: Ask a thinking model to think (None: the model's default).
    think: bool | None = None
    #: The conversation's tool format (``auto``, a family, ``none``: tools in words);
    #: None: the backend's own default.
    tool_format: str | None = None
    #: Strict: no recovery of calls left in text, and arguments taken only as sent.
    strict: bool = False
    #: Constrained: on an engine that can, a call the model starts is finished under a
    #: grammar of the declared tools (see :mod:`toolwire.formats.gbnf`); off with ``strict``.
    constrained: bool = True
    #: Whether the caller reads the reply as it is made. One that takes it whole (the
    #: gateway's requests that are not streamed) lets a remote engine send it whole, which
    #: costs both sides less; the events are the same either way.
    stream: bool = True
    #: False: at most one call is passed on (``parallel_tool_calls: false``); the others
    #: are ``calls-dropped`` notices, and a grammar that can asks for one call only.
    parallel_calls: bool = True
    #: The most calls one reply passes on (see :mod:`toolwire.pipeline.limits`); None: no
    #: limit.
    max_calls: int | None = DEFAULT_MAX_CALLS
    #: Structured output: the reply's text must be JSON of this shape, as every API asks it
    #: (Chat Completions ``response_format``, Responses ``text.format``, Messages
    #: ``output_config.format``), settled into one: :class:`OutputFormat`. None: free text.
    output: OutputFormat | None = None
    #: How the engine chooses its tokens (top_p, seed, stop…): each backend gives them to
    #: its engine in its own dialect, and names what it cannot honour.
    sampling: Sampling = field(default_factory=Sampling)
    #: The engine's own fields, passed to it as they are (``chat_template_kwargs``, a
    #: field no API lists): see :mod:`toolwire.server.passing`. Never one toolwire sets.
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: Fields of the client's the gateway kept from the engine (see
    #: :data:`toolwire.server.passing.WITHHELD`): named in a ``field-not-honoured`` notice.
    withheld: tuple[str, ...] = ()
    #: The work this turn may make toolwire compute (checking its calls, its output), see
    #: :mod:`toolwire.budget`; the gateway sizes it by the request, others get the ceiling.
    budget: WorkBudget = field(default_factory=WorkBudget, repr=False, compare=False)
    #: The tools by name (see :class:`~toolwire.formats.base.ToolIndex`), built once.
    index: ToolIndex = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        limit = self.max_calls
        whole = isinstance(limit, int) and not isinstance(limit, bool)
        if limit is not None and not (whole and limit >= 1):
            raise UsageError(f"max_calls must be a whole number of at least 1, not {limit!r}")
        tools, choice = _settled(self.tools, self.tool_choice)
        if tools is not self.tools:
            object.__setattr__(self, "tools", tools)
        if choice is not self.tool_choice:
            object.__setattr__(self, "tool_choice", choice)
        object.__setattr__(self, "index", ToolIndex(tools) if tools else ToolIndex(None))

    @property
    def required(self) -> bool:
        """Must the reply be a call? (``tool_choice`` ``required``, or a named function.)"""
        return bool(self.tools) and (
            self.tool_choice == "required" or isinstance(self.tool_choice, Mapping)
        )


@dataclass(frozen=True)
class OutputFormat:
    """What a structured output asks of the reply's text, whichever API asked it.

    ``kind`` ``json_schema``: JSON valid under ``schema`` (``name`` as the client gave it;
    ``strict`` as the client asked: a reply that does not fit is then an error, not a
    notice). ``json_object``: any JSON object (``schema`` is None).
    """

    kind: Literal["json_schema", "json_object"]
    schema: Mapping[str, Any] | None = None
    name: str = "output"
    strict: bool = False


def _settled(
    tools: Sequence[Mapping[str, Any]] | None, choice: str | Mapping[str, Any] | None
) -> tuple[Sequence[Mapping[str, Any]] | None, str | Mapping[str, Any] | None]:
    """The tools a turn offers and its choice, settled: ``none`` offers none; a named
    function is offered alone (when it is among the tools; else all stay, for the surface
    that checks requests to refuse)."""
    if choice == "none" or not tools:
        return None, None
    if isinstance(choice, Mapping):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, Mapping) else choice.get("name")
        named = [t for t in tools if isinstance(name, str) and ToolIndex([t]).has(name)]
        if named and len(named) < len(tools):
            return named, choice
    return tools, choice


#: How a turn reaches the model: ``plain`` (no tools), ``native`` (the engine's own tools
#: API), ``grammar`` (the model's template and its family's grammar), ``words`` (the tools
#: listed in the prompt, calls read leniently).
Mode = Literal["plain", "native", "grammar", "words"]


@dataclass(frozen=True)
class Plan:
    """The pipeline's decision for one turn; transports follow it and decide nothing."""

    mode: Mode
    #: ``grammar``: the family the model writes calls in.
    family: Family | None = None
    #: ``native``: the schema dialect the tools are shown in.
    dialect: str = "permissive"
    #: ``grammar`` on an engine that can: how the model's calls are constrained.
    constraint: Constraint | None = None


@dataclass(frozen=True)
class Prepared:
    """A turn made ready to send: the request as it will go (pruned, in words…), the
    transport's own payload, and whether the prompt leaves the model inside its thinking."""

    request: Request
    payload: Any
    reasoning_open: bool = False
    #: The plan's constraint, for an engine that applies it.
    constraint: Constraint | None = None


class Backend(Protocol):
    """A model behind one interface: ``stream`` yields the turn's events, ending in Done."""

    @property
    def name(self) -> str: ...

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
