"""A call written as one JSON object ``{"name": …, "<args key>": {…}}``, read as it streams.

Shared by the families that write calls as JSON objects (Hermes inside tags, Llama 3 as the
whole reply, Mistral's list). The call is announced once its name is read; argument text is
passed on as written; the finished object is then checked strictly against the family's
allowed keys and typed by the tool's schema.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..messages import ToolCall
from .base import ReplyStream, loads_json, type_arguments
from .jsonscan import ObjectScanner

__all__ = ["JsonCall"]


class JsonCall:
    """One JSON call object in progress inside ``stream``."""

    def __init__(
        self,
        stream: ReplyStream,
        *,
        args_key: str,
        allowed: frozenset[str],
        check: Callable[[dict[str, Any]], str] | None = None,
        accept_name: Callable[[str], bool] | None = None,
    ) -> None:
        self.stream = stream
        self.args_key = args_key
        self.allowed = allowed
        self.check = check
        self.accept_name = accept_name
        self.scanner = ObjectScanner(
            stream_key=args_key, on_name=self._on_name, on_stream=self._on_args
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

    def _on_name(self, name: str) -> None:
        if self.started or self.rejected:
            return
        if not name:
            self.rejected = "the call has an empty name"
            return
        if self.accept_name is not None and not self.accept_name(name):
            self.rejected = f"{name!r} is not a declared tool"
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
            return None, f'the call gives "{self.args_key}" more than once'
        try:
            obj = loads_json(self.scanner.text())
        except (ValueError, RecursionError) as exc:
            return None, f"the call is not valid JSON ({exc})"
        if not isinstance(obj, dict):
            return None, "the call is not a JSON object"
        extra = set(obj) - self.allowed
        if extra:
            return None, f"unexpected keys {sorted(extra)}"
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            return None, "the call has no name"
        args = obj.get(self.args_key)
        if not isinstance(args, dict):
            return None, f'"{self.args_key}" must be an object'
        if self.check is not None:
            problem = self.check(obj)
            if problem:
                return None, problem
        if not self.started:
            self._on_name(name)
            if not self.started:
                return None, self.rejected or "the call has no name"
        if name != self.name:  # announced one name, the object says another
            return None, "the call names two tools"
        typed = type_arguments(args, name, self.stream.tools)
        return (
            ToolCall(call_id or self.id, name, typed, "".join(self._args_text).strip()),
            "",
        )
