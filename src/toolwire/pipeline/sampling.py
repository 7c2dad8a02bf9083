"""How a client asks the engine to choose its tokens, settled once for every API and engine.

Each client API names these fields its own way (Messages' ``stop_sequences`` is Chat
Completions' ``stop``); :mod:`toolwire.server.passing` reads them into one :class:`Sampling`,
and each backend gives them to its engine in the engine's own dialect: an OpenAI-compatible
server under the names below, Ollama in its ``options``, the local model through
llama.cpp's samplers. A field an engine cannot honour is named in a ``field-not-honoured``
notice, never dropped in silence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from ..events import Notice

if TYPE_CHECKING:
    from .request import Request

__all__ = ["Sampling", "not_honoured"]


@dataclass(frozen=True)
class Sampling:
    """The sampling fields of one turn, as an OpenAI-compatible engine names them; None (or
    empty) where the client gave none, and then the engine's own default holds."""

    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    #: The same seed, prompt and settings give the same reply, on an engine that can.
    seed: int | None = None
    #: Texts that end the reply where the model writes them (never inside a call).
    stop: tuple[str, ...] = ()
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    #: A token's id (as text, as the APIs send it) and the bias added to its logit.
    logit_bias: Mapping[str, float] | None = None

    def given(self) -> dict[str, Any]:
        """The fields the client gave, by their OpenAI-compatible names (``stop`` a list)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value == ():
                continue
            out[f.name] = list(value) if f.name == "stop" else value
        return out


def not_honoured(
    request: Request,
    sampling_fields: Iterable[str] | None,
    engine_fields: Iterable[str] | None,
    takes_thinking: bool,
    engine: str,
) -> Notice | None:
    """The ``field-not-honoured`` notice for the fields of ``request`` an engine does not use,
    of those the client gave: its sampling fields not among ``sampling_fields``, its engine
    fields (``extra``) not among ``engine_fields`` (None: it uses every one), and its
    thinking switch where the engine takes none. None when it uses them all."""
    left: set[str] = set()
    if request.think is not None and not takes_thinking and "reasoning_effort" not in request.extra:
        left.add("thinking")  # (a reasoning_effort goes as it is: the engine's own switch)
    if sampling_fields is not None:
        left |= set(request.sampling.given()) - set(sampling_fields)
    if engine_fields is not None:
        left |= set(request.extra) - set(engine_fields)
    left |= set(request.withheld)
    if not left:
        return None
    shown = sorted(left)
    names = ", ".join(shown[:20]) + (f" and {len(shown) - 20} more" if len(shown) > 20 else "")
    return Notice("field-not-honoured", f"not applied on {engine}: {names[:400]}")
