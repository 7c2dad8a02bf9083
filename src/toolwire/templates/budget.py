"""The work one template operation may do: loop steps, wall-clock time and memory.

A hostile template can burn time or memory in many ways; each guard in the sandbox asks the
budget before the work, and the budget says no for the whole operation at once. One budget
covers one operation: a render, or a whole format detection with its dozens of renders, so
that rendering more often never buys a template more time. The caller makes the budget and
passes it down (:meth:`~toolwire.templates.ChatTemplate.render` takes ``budget=``); nothing
lives in a module global, and two operations in two threads never share one.

Memory is counted as the bytes of every value a template builds through a guarded operation
(strings joined or repeated, filter and call results, formatted text, slices, captured
output), whether or not the value is still alive: Python gives no cheap way to know what a
template still holds, and what it has built bounds what it can hold. One case is known: a
``namespace`` attribute that is replaced and held nowhere else is freed, and its bytes come
back, so that a template building its prompt with ``ns.out = ns.out ~ part`` pays for the
prompt it holds, not for every prefix it went through.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from jinja2.runtime import Context

from toolwire.errors import TemplateLimitError

__all__ = [
    "BUDGET_KEY",
    "MAX_ITERATIONS",
    "MAX_RENDER_BYTES",
    "MAX_RENDER_SECONDS",
    "TemplateBudget",
    "budget_of",
]

#: Loop iterations (each ``for`` item and each item drawn from ``range``) one operation may run.
MAX_ITERATIONS = 1_000_000
#: Wall-clock seconds one operation may take. Published templates render in about a
#: millisecond, and a whole format detection (some forty renders) in well under a second.
MAX_RENDER_SECONDS = 1.0
#: Seconds a render is given beyond :data:`MAX_RENDER_SECONDS` per message and per
#: character of the conversation, up to :data:`MAX_SCALED_SECONDS`: a template's honest
#: work grows with its input (the slowest published ones take about 12 ms a message), a
#: hostile template's does not need to, so a small input keeps a tight budget.
SECONDS_PER_MESSAGE = 0.015
SECONDS_PER_CHARACTER = 1 / 200_000
MAX_SCALED_SECONDS = 30.0
#: Bytes of values one operation may build in all (see the module docstring). A prompt at
#: the output limit costs a few times its size; the rest is room.
MAX_RENDER_BYTES = 64 * 1024 * 1024

#: The render context's key for the budget: not a name a template can write.
BUDGET_KEY = "toolwire budget"


class TemplateBudget:
    """What one template operation may still spend; pass the same object to every render
    the operation makes (a detection's renders, then the prompt's).

    The clock runs while a template renders (:meth:`running`), not while the caller compiles
    or compares renderings, so an operation's own work never eats the template's time. Each
    guard calls :meth:`spend` (loop steps) or :meth:`charge` (bytes) before the work it
    guards, and both read the clock, so that no guarded step starts past the time allowed.
    Once spent, a budget refuses everything: :attr:`exhausted` tells a caller to stop trying.
    A budget belongs to one operation in one thread.
    """

    __slots__ = (
        "_deadline",
        "_since",
        "_used",
        "bytes_left",
        "iterations_left",
        "max_bytes",
        "max_iterations",
        "seconds",
        "spent_reason",
    )

    def __init__(
        self,
        *,
        iterations: int | None = None,
        seconds: float | None = None,
        memory: int | None = None,
    ) -> None:
        self.max_iterations = MAX_ITERATIONS if iterations is None else iterations
        self.seconds = MAX_RENDER_SECONDS if seconds is None else seconds
        self.max_bytes = MAX_RENDER_BYTES if memory is None else memory
        self.iterations_left = self.max_iterations
        self.bytes_left = self.max_bytes
        self._used = 0.0
        self._since: float | None = None
        #: When the running clock passes the time allowed (infinite while it is stopped:
        #: no template code runs then); minus infinity once the budget is spent.
        self._deadline = math.inf
        #: Why the budget is spent, once it is; every later refusal repeats it.
        self.spent_reason = ""

    @classmethod
    def for_input(cls, messages: Sequence[Mapping[str, Any]]) -> TemplateBudget:
        """The default budget for rendering ``messages``: the time grows with the
        conversation (see :data:`SECONDS_PER_MESSAGE`), the other limits stay fixed."""
        characters = sum(len(str(m.get("content") or "")) for m in messages)
        seconds = (
            MAX_RENDER_SECONDS
            + SECONDS_PER_MESSAGE * len(messages)
            + SECONDS_PER_CHARACTER * characters
        )
        return cls(seconds=min(seconds, MAX_SCALED_SECONDS))

    def __repr__(self) -> str:
        left = max(0.0, self.seconds - self.used)
        return (
            f"TemplateBudget(iterations_left={self.iterations_left:,}, "
            f"bytes_left={self.bytes_left:,}, seconds_left={left:.3f})"
        )

    @property
    def used(self) -> float:
        """Seconds spent rendering so far."""
        if self._since is None:
            return self._used
        return self._used + time.monotonic() - self._since

    @property
    def exhausted(self) -> bool:
        """True once any part of the budget is spent (or its time is up)."""
        return bool(self.spent_reason) or self.used > self.seconds

    @contextmanager
    def running(self) -> Iterator[TemplateBudget]:
        """Run the clock for the block: a render."""
        if self._since is not None:  # already running (a render inside a render)
            yield self
            return
        self._since = time.monotonic()
        if not self.spent_reason:
            self._deadline = self._since + self.seconds - self._used
        try:
            yield self
        finally:
            self._used += time.monotonic() - self._since
            self._since = None
            if not self.spent_reason:
                self._deadline = math.inf

    def _refuse(self, reason: str) -> TemplateLimitError:
        if not self.spent_reason:
            self.spent_reason = reason
            self._deadline = -math.inf  # every later check refuses at once
        return TemplateLimitError(self.spent_reason)

    def check_time(self) -> None:
        """Refuse once its time is up (or the budget was spent another way). Called at
        every guarded step, so it costs one clock read and one comparison."""
        if time.monotonic() > self._deadline or self.spent_reason:
            raise self._refuse(f"chat template ran for more than {self.seconds} s in one operation")

    def spend(self, units: int = 1) -> None:
        """Spend ``units`` loop steps."""
        self.iterations_left -= units
        if self.iterations_left < 0:
            raise self._refuse(
                f"chat template ran more than {self.max_iterations:,} loop iterations "
                "in one operation"
            )
        self.check_time()

    def charge(self, size: int, what: str) -> None:
        """Spend ``size`` bytes on ``what``, before it is built."""
        self.bytes_left -= size
        if self.bytes_left < 0:
            raise self._refuse(
                f"chat template built more than {self.max_bytes:,} bytes of values in one "
                f"operation (the last: {what})"
            )
        self.check_time()

    def refund(self, size: int) -> None:
        """Give back ``size`` bytes of a value that is being freed (never past the start)."""
        self.bytes_left = min(self.max_bytes, self.bytes_left + size)


def budget_of(context: Context | Any) -> TemplateBudget:
    """The budget a render put in its context. A template compiled by the sandbox cannot
    run without one: a render that forgot it would run unbounded."""
    found = context.get(BUDGET_KEY) if isinstance(context, Context) else None
    if not isinstance(found, TemplateBudget):
        raise TemplateLimitError("chat template rendered without a budget")
    return found
