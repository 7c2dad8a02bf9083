"""What the process learns about a model, kept in an object you can pass, bound and reset.

A provider that refuses a tool schema keyword, or says a model takes no tools, may teach a
lesson worth keeping: the next request goes in the strict dialect, or with the tools in
words, before the model says a word. But a refusal answers the client's request — its
words can quote it, and even a provider's error code describes it, not the model — so a
lesson is learned only from a probe the gateway sends itself, refused the same way (source
``probe``, see :mod:`toolwire.pipeline.lessons`). A lesson set by the operator or by code calling
:meth:`ModelMemory.learn` is ``given``. Every lesson carries its source and when it ends
(``until``, seconds since the epoch): a learned one lasts :attr:`ModelMemory.ttl` (an hour
by default), a given one as long as it is given (``ttl`` None: for good). :meth:`recall`
gives nothing for an expired lesson. The clock is the memory's own (``clock``), so a test
moves it instead of waiting. A lesson is one per model: learning more of it renews its
source and end, as the newest lesson says.

Lessons are keyed by (endpoint, model), so the same model name on two servers learns
apart; the memory holds a bounded number of models (the least recently used is forgotten
first); it can be reset, and saved to and loaded from JSON. Given a ``store`` (a
:class:`LessonStore`, such as :class:`toolwire.store.ConversationStore`), it starts with
the lessons kept there and keeps each new one there as it is learned, so the next process
starts knowing them (an expired one is not loaded, nor one an older version learned from a
provider's error code, source ``code``: a client's request could teach those).

The memory also keeps who is probing which model (:class:`ProbeGate`): at most one probe in
flight per (endpoint, model), and none sooner than ``probe_every`` seconds after the last.

Every backend takes a ``memory``; without one it uses the library's default, which
:func:`default_memory` returns (and ``default_memory().reset()`` clears). The gateway gives
its backends a memory of their own.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..errors import UsageError

__all__ = ["Lesson", "LessonStore", "ModelMemory", "ProbeGate", "default_memory"]

#: The dialects a lesson may name (see :mod:`toolwire.schemas`).
_DIALECTS = ("strict", "permissive", "gemini", "anthropic")
#: Where a lesson came from: a probe the gateway sent, or given.
SOURCES = ("probe", "given")
#: The source of lessons an older version learned from a provider's error code: not loaded.
_UNTRUSTED = "code"
#: How long a learned lesson lasts, in seconds, by default.
DEFAULT_TTL = 3600.0
#: The shortest time between two probes of one model, in seconds, by default.
DEFAULT_PROBE_EVERY = 300.0


@dataclass(frozen=True)
class Lesson:
    """What one model taught, where that came from and until when."""

    #: The schema dialect it needs (it refused a keyword of the one it was sent), or None.
    dialect: str | None = None
    #: It takes no tools: they go in words.
    words: bool = False
    #: ``probe`` or ``given`` (None for the empty lesson).
    source: str | None = None
    #: When it ends (seconds since the epoch), or None for a lesson that does not.
    until: float | None = None

    def origin(self) -> str:
        """Where the lesson came from and until when, in words (for a notice)."""
        probed = self.source == "probe"
        where = "learned from a probe the gateway sent" if probed else "given"
        if self.until is None:
            return where
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.until))
        return f"{where}, until {when}"


class LessonStore(Protocol):
    """Where a memory keeps its lessons between processes (entries as :meth:`ModelMemory.to_json`
    gives them)."""

    def load_lessons(self) -> list[dict[str, Any]]:
        """The lessons kept, least recently taught first."""

    def save_lesson(self, lesson: dict[str, Any], *, keep: int) -> None:
        """Keep one model's whole lesson, and at most ``keep`` lessons in all."""

    def forget_lessons(self, endpoint: str | None = None, model: str | None = None) -> None:
        """Forget one model's lesson, or with no arguments every lesson."""


class ProbeGate:
    """Who may probe a model now: one probe in flight per key, and none sooner than
    ``every`` seconds after the last one began."""

    def __init__(self, every: float, clock: Callable[[], float]) -> None:
        self.every = every
        self._clock = clock
        self._flying: set[tuple[str, str]] = set()
        self._last: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: tuple[str, str]) -> bool:
        """May this key be probed now? True takes the gate until :meth:`give_back`."""
        with self._lock:
            now = self._clock()
            last = self._last.get(key)
            if key in self._flying or (last is not None and now - last < self.every):
                return False
            self._flying.add(key)
            self._last[key] = now
            self._last.move_to_end(key)
            while len(self._last) > 4096:  # bounded: the oldest times are forgotten
                self._last.popitem(last=False)
            return True

    def give_back(self, key: tuple[str, str]) -> None:
        """The probe of this key is over."""
        with self._lock:
            self._flying.discard(key)


class ModelMemory:
    """Lessons by (endpoint, model); at most ``max_models`` of them, least recent forgotten;
    with a ``store``, kept there too; ``ttl`` the seconds a learned lesson lasts, ``clock``
    the time now, ``probe_every`` the shortest time between probes of a model (see the
    module)."""

    def __init__(
        self,
        max_models: int = 1024,
        *,
        store: LessonStore | None = None,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.time,
        probe_every: float = DEFAULT_PROBE_EVERY,
    ) -> None:
        if isinstance(max_models, bool) or not isinstance(max_models, int) or max_models < 1:
            raise UsageError(f"max_models must be a whole number of at least 1, not {max_models!r}")
        for name, value in (("ttl", ttl), ("probe_every", probe_every)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise UsageError(f"{name} must be a number of seconds of at least 0, not {value!r}")
        self.max_models = max_models
        self.ttl = float(ttl)
        self.clock = clock
        self.probes = ProbeGate(float(probe_every), clock)
        self._lessons: OrderedDict[tuple[str, str], Lesson] = OrderedDict()
        self._lock = threading.Lock()  # a gateway's requests share one memory
        self.store: LessonStore | None = None  # set after loading: what it holds is kept
        if store is not None:
            self._take(store.load_lessons())
        self.store = store

    def recall(self, endpoint: str, model: str) -> Lesson:
        """What this model taught at this endpoint (an empty lesson when nothing, or when
        the lesson has ended)."""
        with self._lock:
            lesson = self._lessons.get((endpoint, model))
            if lesson is None:
                return Lesson()
            if lesson.until is not None and lesson.until <= self.clock():
                del self._lessons[(endpoint, model)]
                return Lesson()
            self._lessons.move_to_end((endpoint, model))
            return lesson

    def learn(
        self,
        endpoint: str,
        model: str,
        *,
        dialect: str | None = None,
        words: bool | None = None,
        source: str = "given",
        ttl: float | None = None,
        until: float | None = None,
    ) -> Lesson:
        """Add to what this model taught; returns the whole lesson now held. ``source``:
        ``probe`` (learned: it lasts ``ttl`` seconds, by default the memory's
        :attr:`ttl`) or ``given`` (for good, unless a ``ttl`` is given); ``until``: its end
        as a time, instead of a ``ttl``."""
        if dialect is not None and dialect not in _DIALECTS:
            raise UsageError(f"unknown schema dialect {dialect!r}; known: {', '.join(_DIALECTS)}")
        if source not in SOURCES:
            raise UsageError(f"unknown lesson source {source!r}; known: {', '.join(SOURCES)}")
        if until is None:
            if ttl is None and source != "given":
                ttl = self.ttl
            until = self.clock() + ttl if ttl is not None else None
        with self._lock:
            old = self._lessons.pop((endpoint, model), Lesson())
            if old.until is not None and old.until <= self.clock():
                old = Lesson()  # an ended lesson teaches nothing more
            new = Lesson(
                dialect=dialect if dialect is not None else old.dialect,
                words=words if words is not None else old.words,
                source=source,
                until=until,
            )
            self._lessons[(endpoint, model)] = new
            while len(self._lessons) > self.max_models:
                self._lessons.popitem(last=False)
        if self.store is not None:
            self.store.save_lesson(_entry(endpoint, model, new), keep=self.max_models)
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
            return [_entry(e, m, lesson) for (e, m), lesson in self._lessons.items()]

    @classmethod
    def from_json(cls, data: Any, max_models: int = 1024) -> ModelMemory:
        """A memory holding the lessons :meth:`to_json` gave; entries that do not fit are
        refused with a :class:`~toolwire.errors.UsageError` naming the entry. An entry with
        no ``source`` is ``given`` (a file an operator wrote)."""
        memory = cls(max_models)
        memory._take(data)
        return memory

    def _take(self, data: Any) -> None:
        """Learn the lessons :meth:`to_json` gave, refusing any that do not fit; those that
        have ended are left out."""
        if not isinstance(data, list):
            raise UsageError("a model memory is a JSON list of lessons")
        for i, entry in enumerate(data):
            until = entry.get("until") if isinstance(entry, dict) else None
            ok = (
                isinstance(entry, dict)
                and isinstance(entry.get("endpoint"), str)
                and isinstance(entry.get("model"), str)
                and (entry.get("dialect") is None or entry.get("dialect") in _DIALECTS)
                and isinstance(entry.get("words", False), bool)
                and entry.get("source", "given") in (*SOURCES, _UNTRUSTED)
                and (
                    until is None
                    or (isinstance(until, (int, float)) and not isinstance(until, bool))
                )
                and (entry.get("code") is None or isinstance(entry.get("code"), str))
            )
            if not ok:
                raise UsageError(f"model memory entry {i} is not a lesson")
            if until is not None and until <= self.clock():
                continue
            if entry.get("source") == _UNTRUSTED:
                continue  # learned from a code a client's request could draw: not trusted
            self.learn(
                entry["endpoint"],
                entry["model"],
                dialect=entry.get("dialect"),
                words=entry.get("words", False),
                source=entry.get("source", "given"),
                until=float(until) if until is not None else None,
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


def _entry(endpoint: str, model: str, lesson: Lesson) -> dict[str, Any]:
    """One lesson as a JSON value (as :meth:`ModelMemory.to_json` and a store keep it)."""
    return {
        "endpoint": endpoint,
        "model": model,
        "dialect": lesson.dialect,
        "words": lesson.words,
        "source": lesson.source or "given",
        "until": lesson.until,
        "code": None,  # the store's column, of the lessons older versions learned from codes
    }


_DEFAULT = ModelMemory()


def default_memory() -> ModelMemory:
    """The library's memory, used by every backend made without one of its own (the
    gateway gives its backends their own: see the module)."""
    return _DEFAULT
