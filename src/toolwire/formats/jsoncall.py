"""A call written as one JSON object ``{"name": …, "<args key>": {…}}``, read as it streams.

Shared by the families that write calls as JSON objects (Hermes inside tags, Llama 3 as the
whole reply, Mistral's list). The call is announced once its name is read; argument text is
passed on as written; the finished object is then read strictly as JSON and checked against
the family's :class:`~toolwire.formats.callshape.CallShape`. Nothing is typed: the call's
arguments are the object as the model wrote it.
"""

from __future__ import annotations

from ..messages import ToolCall
from .base import ReplyStream, loads_json
from .callshape import CallShape
from .jsonscan import ObjectScanner

__all__ = ["JsonCall"]


class JsonCall:
    """One JSON call object in progress inside ``stream``."""

    def __init__(self, stream: ReplyStream, shape: CallShape) -> None:
        self.stream = stream
        self.shape = shape
        self.args_key = shape.args_key
        self.scanner = ObjectScanner(
            name_key=shape.name_key,
            stream_key=None if shape.name_is_key else self.args_key,
            on_name=self._on_name,
            on_stream=self._on_args,
            key_is_name=shape.name_is_key,
        )
        self.index = -1
        self.id = ""
        self.name = ""
        self.rejected = ""  # set when the name alone already rules the call out
        self._held_args: list[str] = []
        self._args_text: list[str] = []

    @property
    def started(self) -> bool:
        return self.index >= 0

    def note_started(self, started: list[tuple[int, str]]) -> None:
        """Add ``(index, id)`` to ``started`` once the call is announced, for an abort later."""
        if self.started and (self.index, self.id) not in started[-1:]:
            started.append((self.index, self.id))

    def _on_name(self, name: str) -> None:
        if self.started or self.rejected:
            return
        problem = self.shape.name_problem(name, self.stream.tools)
        if problem:
            self.rejected = problem
            return
        self.name = name
        self.index, self.id = self.stream._new_call(name)
        for piece in self._held_args:
            self.stream._args(self.index, piece)
        self._held_args.clear()

    def _on_args(self, piece: str) -> None:
        self._args_text.append(piece)
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
        found = self.shape.read(obj, self.stream.tools)
        if isinstance(found, str):
            return None, found
        name, args = found
        if not self.started:
            self._on_name(name)
            if not self.started:
                return None, self.rejected or "the call has no name"
        if name != self.name:  # announced one name, the object says another
            return None, "the call names two tools"
        text = "".join(self._args_text).strip()
        return ToolCall(call_id or self.id, name, args, text), ""
