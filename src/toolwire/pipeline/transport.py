"""The seam between the pipeline and I/O: what every transport provides.

A transport (OpenAI-compatible HTTP, Ollama's ``/api/chat``, a GGUF model in-process) does
I/O only: it makes a turn ready as the plan says (:meth:`Transport.prepare`) and sends it,
yielding raw events (:meth:`Transport.send`). It never decides how tools reach the model,
never reads calls out of text and never heals a refusal: :func:`~toolwire.pipeline.reply`
does all of that once, for every transport, and :meth:`Transport.stream` runs it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator
from typing import ClassVar

from ..events import Event
from ..formats.base import Family
from .memory import ModelMemory
from .reply import reply
from .request import Plan, Prepared, Request

__all__ = ["Transport"]


class Transport(ABC):
    """A model reached over some I/O. Subclasses set the attributes below in ``__init__``."""

    name: ClassVar[str]
    #: True when the engine takes tools in its own API and returns calls itself; False when
    #: it returns the model's raw text (the pipeline then reads the family's grammar).
    native_tools: ClassVar[bool]
    #: The model's name, and where it is served: together they key what it teaches.
    model: str
    endpoint: str
    #: The model's window, for sizing a tool list given in words.
    context_tokens: int
    #: A model listed as taking no tools: it always gets them in words.
    words: bool = False
    #: How tool schemas are shown to this provider (see :mod:`toolwire.schemas`).
    dialect: str = "permissive"
    #: What the process learned about models (see :mod:`toolwire.pipeline.memory`).
    memory: ModelMemory
    #: True when the engine can finish a call under a grammar (see :mod:`toolwire.formats.gbnf`).
    can_constrain: bool = False
    #: True when the engine takes images as Chat Completions ``image_url`` parts, and files
    #: (a PDF) as ``file`` parts; else each is a placeholder the model reads (see
    #: :mod:`toolwire.pipeline.content`).
    takes_images: bool = False
    takes_files: bool = False
    #: The sampling fields the engine honours, and the engine fields it uses (None: every
    #: one, passed as sent: :mod:`toolwire.server.passing`); the others a turn asks for are
    #: named in a ``field-not-honoured`` notice.
    sampling_fields: frozenset[str] | None = None
    engine_fields: frozenset[str] | None = None
    #: Whether the engine takes a turn's thinking switch (``Request.think``).
    takes_thinking: bool = True
    #: An engine with its own tools API: the family its model writes calls in as text, when
    #: the engine leaves them in the content (a turn's own ``tool_format`` wins).
    tool_format: str | None = None

    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` takes; a rough count (4 characters a token) unless the transport
        has the model's own tokenizer."""
        return len(text) // 4 + 1

    def system_in_place(self) -> bool:
        """Does the model read a system message where the conversation has it, not only
        first? An engine's own API takes the messages as Chat Completions has them: yes. A
        transport that renders a chat template says what its template does."""
        return True

    def family_for(self, request: Request) -> Family | None:
        """The grammar the model's raw text is written in (text transports only)."""
        del request
        return None

    @abstractmethod
    def prepare(self, request: Request, plan: Plan) -> Prepared:
        """The turn ready to send, as ``plan`` says (tools natively, in the template, none)."""

    @abstractmethod
    def send(self, prepared: Prepared) -> AsyncGenerator[Event, None]:
        """Send the turn; yield its raw events (text, reasoning, native calls), then Done.

        Failures leave as :class:`~toolwire.errors.BackendError` only.
        """

    def stream(self, request: Request) -> AsyncGenerator[Event, None]:
        """The turn's events, through the one reply pipeline."""
        return reply(self, request)
