"""A call written as one JSON object ``{"name": …, "<args key>": {…}}``, read as it streams.

Shared by the families that write calls as JSON objects (Hermes inside tags, Llama 3 as the
whole reply, Mistral's list). The call is announced once its name is read; argument text is
passed on as written; the finished object is then read strictly as JSON and checked against
the family's :class:`~toolwire.formats.callshape.CallShape`. Nothing is typed: the call's
arguments are the object as the model wrote it.

Two things a shape may add:

- the model's own call id (``id_key``): kept when usable. A call is announced with the id
  the model wrote before the name (Cohere writes ``tool_call_id`` first); a family whose
  models write it after the arguments (Mistral Nemo) asks for the call to be announced when
  its object is complete, so the id announced is the model's;
- arguments written as a string holding their JSON (``args_in_string``): unless strict, the
  string is decoded, its text passed on as the call's argument text once the object is
  complete, and the repair named in a ``recovered-arguments-string`` notice.

Unless strict, a raw line break or tab inside one of the object's strings (a model writing
code into an argument) is read as its escape (:mod:`toolwire.formats.jsonscan`), so the
argument text streamed is JSON already; the reader that ends the call names the repair with
:func:`raw_controls_notice` (``recovered-raw-controls``), once the call is read whole. A
reader that reads a call's object whole (drift recovery, a family's block) reads it with
:func:`read_call_json`, the same tolerance decided once, and names it in the same words
(:func:`raw_controls_message`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..events import NoticeCode
from ..messages import ToolCall
from .base import ReplyStream, loads_json
from .callshape import CallShape
from .jsonscan import ObjectScanner

__all__ = ["JsonCall", "raw_controls_message", "raw_controls_notice", "read_call_json"]

#: The raw control characters a call's JSON strings may hold, unless strict.
_RAW_CONTROLS = re.compile(r"[\n\r\t]")


def read_call_json(text: str, *, strict: bool = False) -> tuple[Any, bool]:
    """A call's JSON, read whole as every reader of calls reads it: strict JSON, and unless
    ``strict`` a raw line break, carriage return or tab inside its strings read as its escape
    (``recovered-raw-controls``; any other control character is still refused). The value,
    and whether the raw controls were read. ``ValueError`` (or ``RecursionError``) for text
    that is not JSON so."""
    try:
        return loads_json(text), False
    except (ValueError, RecursionError):
        if strict or not _RAW_CONTROLS.search(text):
            raise
    return loads_json(text, raw_controls=True), True


def raw_controls_message(name: str) -> str:
    """The words of the ``recovered-raw-controls`` notice for the call(s) to ``name``."""
    return (
        f"the call to {name} wrote raw line breaks or tabs inside its JSON strings; "
        "they were read as their escapes"
    )


def raw_controls_notice(stream: ReplyStream, name: str) -> None:
    """Name the repair of a call whose JSON strings held raw line breaks or tabs."""
    stream._notice("recovered-raw-controls", raw_controls_message(name))


class _Scanner(ObjectScanner):
    """The call's scanner, with a second one that sees whether the id comes before the name
    (fed the same text first, so the order found never depends on how the text was cut)."""

    def __init__(self, order: ObjectScanner | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._order = order

    def feed(self, s: str, i: int) -> int:
        order = self._order
        if order is not None and not (order.done or order.failed):
            order.feed(s, i)
        return super().feed(s, i)


class JsonCall:
    """One JSON call object in progress inside ``stream``."""

    def __init__(
        self,
        stream: ReplyStream,
        shape: CallShape,
        *,
        announce_at_end: bool = False,
        call_id: str = "",
        told: list[tuple[NoticeCode, str]] | None = None,
    ) -> None:
        self.stream = stream
        #: Where the repairs of the call are told once its block is read (a block given
        #: back tells none); without one, on the stream at once.
        self.told = told
        self.shape = shape
        self.args_key = shape.args_key
        self.announce_at_end = announce_at_end
        #: A string that holds a raw line break may not run across the stream's marker.
        stops = stream.call_stops
        order = None
        if shape.id_key and not announce_at_end:
            order = ObjectScanner(
                name_key=shape.id_key,
                stream_key=shape.name_key,
                on_name=self._on_id,
                on_stream=self._on_name_text,
                raw_controls=not stream.strict,
            )
        if order is not None:
            order.stops = stops
        kwargs: dict[str, Any] = dict(
            name_key=shape.name_key,
            stream_key=None
            if shape.name_is_key
            else (shape.args_keys if shape.args_alike else self.args_key),
            on_name=self._on_name,
            on_stream=self._on_args,
            key_is_name=shape.name_is_key,
            raw_controls=not stream.strict,
        )
        # (a scanner of its own where an id may come before the name; else the plain one,
        # a call less for every piece of the reply)
        self.scanner = _Scanner(order, **kwargs) if order is not None else ObjectScanner(**kwargs)
        self.scanner.stops = stops
        self.index = -1
        #: ``(index, id)`` is in the body's started calls (see note_started).
        self.noted = False
        self.id = ""
        self.name = ""
        self.rejected = ""  # set when the name alone already rules the call out
        self._early_id = call_id  # the model's id, written before the name
        self._name_seen = False
        #: The arguments are a string (their first character is a quote): held to the end.
        self._args_string: bool | None = None
        self._held_args: list[str] = []
        self._args_text: list[str] = []

    @property
    def raw_controls(self) -> bool:
        """Did the object's strings hold raw line breaks or tabs (read as their escapes)?"""
        return self.scanner.raw_count > 0

    @property
    def started(self) -> bool:
        return self.index >= 0

    def note_started(self, started: list[tuple[int, str]]) -> None:
        """Add ``(index, id)`` to ``started`` once the call is announced, for an abort later."""
        if self.noted or self.index < 0:
            return
        self.noted = True
        if (self.index, self.id) not in started[-1:]:
            started.append((self.index, self.id))

    def _on_id(self, value: str) -> None:
        if not self._name_seen and not self._early_id:
            self._early_id = self.shape.call_id({self.shape.id_key: value})

    def _on_name_text(self, piece: str) -> None:
        self._name_seen = True

    def _on_name(self, name: str) -> None:
        if self.started or self.rejected:
            return
        problem = self.shape.name_problem(name, self.stream.tools)
        if problem:
            self.rejected = problem
            return
        self.name = name
        if not self.announce_at_end:
            self._announce(self._early_id)

    def _announce(self, call_id: str) -> None:
        self.index, self.id = self.stream._new_call(self.name, call_id or None)
        for piece in self._held_args:
            self.stream._args(self.index, piece)
        self._held_args.clear()

    def _on_args(self, piece: str) -> None:
        self._args_text.append(piece)
        if self._args_string is None:
            self._args_string = piece.lstrip().startswith('"')
        if self._args_string:
            return  # a string: its decoded text is passed on once the object is complete
        if self.started:
            self.stream._args(self.index, piece)
        elif not self.rejected:
            self._held_args.append(piece)

    def finish(self, call_id: str | None = None) -> tuple[ToolCall | None, str]:
        """Check the complete object: the call, or ``None`` and the reason it is not one."""
        if self.rejected:
            return None, self.rejected
        if self.scanner.stream_key_count > 1:
            key = self.name if self.shape.name_is_key else self.args_key
            return None, f'the call gives "{key}" more than once'
        try:
            obj = loads_json(self.scanner.text())
        except (ValueError, RecursionError) as exc:
            return None, f"the call is not valid JSON ({exc})"
        found = self.shape.read(obj, self.stream.tools, strict=self.stream.strict)
        if isinstance(found, str):
            return None, found
        name, args = found
        if not self.started:
            self._on_name(name)
            if not self.started and not self.rejected:
                self._announce(self.shape.call_id(obj))
            if not self.started:
                return None, self.rejected or "the call has no name"
        if name != self.name:  # announced one name, the object says another
            return None, "the call names two tools"
        text = "".join(self._args_text).strip()
        if self.shape.args_repair and self.shape.args_repair in obj:
            self._tell(
                "recovered-arguments-key",
                f"read the arguments of {name} under {self.shape.args_repair!r}",
            )
        if self._args_string:
            raw = next((obj[k] for k in self.shape.args_keys if k in obj), None)
            text = raw.strip() if isinstance(raw, str) else json.dumps(args, ensure_ascii=False)
            self.stream._args(self.index, text)
            self._tell(
                "recovered-arguments-string",
                f"read the arguments of {name}, written as a string holding their JSON",
            )
        return ToolCall(call_id or self.id, name, args, text), ""

    def _tell(self, code: NoticeCode, message: str) -> None:
        if self.told is None:
            self.stream._notice(code, message)
        elif (code, message) not in self.told:
            self.told.append((code, message))
