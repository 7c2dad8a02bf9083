"""What the process learns about a model, kept in an object you can pass, bound and reset.

A provider that refuses a tool schema keyword, or says a model takes no tools, teaches a
lesson worth keeping: the next request goes in the strict dialect, or with the tools in
words, before the model says a word. Lessons are keyed by (endpoint, model), so the same
model name on two servers learns apart; the memory holds a bounded number of models (the
least recently used is forgotten first); it can be reset, and saved to and loaded from
JSON. Given a ``store`` (a :class:`LessonStore`, such as
:class:`toolwire.store.ConversationStore`), it starts with the lessons kept there and keeps
each new one there as it is learned, so the next process starts knowing them.

Every backend takes a ``memory``; without one it uses the process's default, which
:func:`default_memory` returns (and ``default_memory().reset()`` clears).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..errors import UsageError

__all__ = ["Lesson", "LessonStore", "ModelMemory", "default_memory"]

#: The dialects a lesson may name (see :mod:`toolwire.schemas`).
_DIALECTS = ("strict", "permissive", "gemini", "anthropic")


@dataclass(frozen=True)
class Lesson:
    """What one model taught."""

    #: The schema dialect it needs (it refused a keyword of the one it was sent), or None.
    dialect: str | None = None
    #: It takes no tools: they go in words.
    words: bool = False


class LessonStore(Protocol):
    """Where a memory keeps its lessons between processes (entries as :meth:`ModelMemory.to_json`
    gives them)."""

    def load_lessons(self) -> list[dict[str, Any]]:
        """The lessons kept, least recently taught first."""

    def save_lesson(self, lesson: dict[str, Any], *, keep: int) -> None:
        """Keep one model's whole lesson, and at most ``keep`` lessons in all."""

    def forget_lessons(self, endpoint: str | None = None, model: str | None = None) -> None:
        """Forget one model's lesson, or with no arguments every lesson."""


class ModelMemory:
    """Lessons by (endpoint, model); at most ``max_models`` of them, least recent forgotten;
    with a ``store``, kept there too (see the module)."""

    def __init__(self, max_models: int = 1024, *, store: LessonStore | None = None) -> None:
        if isinstance(max_models, bool) or not isinstance(max_models, int) or max_models < 1:
            raise UsageError(f"max_models must be a whole number of at least 1, not {max_models!r}")
        self.max_models = max_models
        self._lessons: OrderedDict[tuple[str, str], Lesson] = OrderedDict()
        self._lock = threading.Lock()  # a gateway's requests share one memory
        self.store: LessonStore | None = None  # set after loading: what it holds is kept
        if store is not None:
            self._take(store.load_lessons())
        self.store = store

    def recall(self, endpoint: str, model: str) -> Lesson:
        """What this model taught at this endpoint (an empty lesson when nothing)."""
        with self._lock:
            lesson = self._lessons.get((endpoint, model))
            if lesson is None:
                return Lesson()
            self._lessons.move_to_end((endpoint, model))
            return lesson

    def learn(
        self, endpoint: str, model: str, *, dialect: str | None = None, words: bool | None = None
    ) -> Lesson:
        """Add to what this model taught; returns the whole lesson now held."""
        if dialect is not None and dialect not in _DIALECTS:
            raise UsageError(f"unknown schema dialect {dialect!r}; known: {', '.join(_DIALECTS)}")
        with self._lock:
            old = self._lessons.pop((endpoint, model), Lesson())
            new = Lesson(
                dialect=dialect if dialect is not None else old.dialect,
                words=words if words is not None else old.words,
            )
            self._lessons[(endpoint, model)] = new
            while len(self._lessons) > self.max_models:
                self._lessons.popitem(last=False)
        if self.store is not None:
            entry = {"endpoint": endpoint, "model": model, "dialect": new.dialect}
            self.store.save_lesson({**entry, "words": new.words}, keep=self.max_models)
        return new

    def forget(self, endpoint: str, model: str) -> None:
        """Forget one model's lesson."""
        with self._lock:
            self._lessons.pop((endpoint, model), None)
        if self.store is not None:
            self.store.forget_lessons(endpoint, model)

    def reset(self) -> None:
        """Forget everything."""
        with self._lock:
            self._lessons.clear()
        if self.store is not None:
            self.store.forget_lessons()

    def __len__(self) -> int:
        return len(self._lessons)

    # -- persistence

    def to_json(self) -> list[dict[str, Any]]:
        """The lessons as JSON values, least recent first."""
        with self._lock:
            return [
                {"endpoint": e, "model": m, "dialect": lesson.dialect, "words": lesson.words}
                for (e, m), lesson in self._lessons.items()
            ]

    @classmethod
    def from_json(cls, data: Any, max_models: int = 1024) -> ModelMemory:
        """A memory holding the lessons :meth:`to_json` gave; entries that do not fit are
        refused with a :class:`~toolwire.errors.UsageError` naming the entry."""
        memory = cls(max_models)
        memory._take(data)
        return memory

    def _take(self, data: Any) -> None:
        """Learn the lessons :meth:`to_json` gave, refusing any that do not fit."""
        if not isinstance(data, list):
            raise UsageError("a model memory is a JSON list of lessons")
        for i, entry in enumerate(data):
            ok = (
                isinstance(entry, dict)
                and isinstance(entry.get("endpoint"), str)
                and isinstance(entry.get("model"), str)
                and (entry.get("dialect") is None or entry.get("dialect") in _DIALECTS)
                and isinstance(entry.get("words", False), bool)
            )
            if not ok:
                raise UsageError(f"model memory entry {i} is not a lesson")
            self.learn(
                entry["endpoint"],
                entry["model"],
                dialect=entry.get("dialect"),
                words=entry.get("words", False),
            )

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path, max_models: int = 1024) -> ModelMemory:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read a model memory from {path}: {exc}") from None
        return cls.from_json(data, max_models)


_DEFAULT = ModelMemory()


def default_memory() -> ModelMemory:
    """The process's memory, used by every backend made without one of its own."""
    return _DEFAULT
