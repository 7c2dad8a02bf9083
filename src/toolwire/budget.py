"""The work one request may make toolwire compute: one budget, counted in steps.

A gateway shared by many clients computes things each request chooses the size of: its
tools' schemas are read, their names made unique, their ``$ref`` s followed, their patterns
compiled and matched, the calls the model writes checked against them, a structured output
checked against its schema. Each of those is linear in its input, but a request picks both
the input and the parameters (a pattern's size, a schema's fan-out, a list's length), so the
product can be anything. Every such piece of work is charged here, *before* it is done when
its cost is known beforehand (a pattern match costs its program's size times the text's
length), as it goes otherwise (each keyword a schema check evaluates), against one
:class:`WorkBudget` per request: sized by the request (a larger body may ask for more) under a
hard ceiling. Past it, :class:`WorkExceeded` names what was too costly: a 400 when the request
itself asked for it (its tools, its output schema), a ``check-skipped`` notice when a reply
needed it (the call passes unchecked, named; with ``strict`` it is refused).

A step is about twenty microseconds of this machine's work: one schema keyword evaluated
against one value (and one more for each member of the keyword's list or object), two
thousand pattern-instruction characters matched. A budget grows with what the request
brings: :meth:`WorkBudget.for_size` gives its body's share, and :meth:`WorkBudget.grant` adds
each call's share as the model writes it (the check of a long argument may cost what its
length says, never what its schema multiplies it to). So the work is linear in the request
and its reply, with a bounded constant, whatever they ask.

A request whose budget has no more than :data:`INLINE_STEPS` left is small enough to be
served on the event loop (tens of milliseconds at most, whatever it asks); one with more
does its heavy work (reading its tools, checking its calls) in a worker thread, so
``/health`` and every other client's stream go on meanwhile (:attr:`WorkBudget.inline`).

The budget is an object passed with the request (:class:`~toolwire.pipeline.Request`'s
``budget``). The one place it cannot be passed is inside jsonschema, whose keyword
functions take no argument of ours: :func:`charging` makes a budget the one those functions
charge (:func:`charge`) for the duration of one check, in a context variable, so the budget
of one request is never charged by another's check, even in another thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from contextvars import ContextVar, Token

from .errors import LimitError

__all__ = [
    "BYTES_PER_STEP",
    "CALL_STEPS",
    "CEILING_STEPS",
    "FLOOR_STEPS",
    "INLINE_STEPS",
    "TURN_STEPS",
    "YIELD_SECONDS",
    "WorkBudget",
    "WorkExceeded",
    "charge",
    "charging",
    "paid",
]

#: The budget of the smallest request (steps): what any request may ask for.
FLOOR_STEPS = 1_000
#: A request's body adds a step to its budget for this many bytes (declaring Claude Code's
#: twelve tools, 50 kB of a 100 kB body, takes 1,300 steps of the body's 12,800).
BYTES_PER_STEP = 8
#: What each call the model writes adds to the budget: these steps, and one per character
#: of its arguments (checking 3,000 objects, 38 kB, takes about 12,000).
CALL_STEPS = 300
#: No request's budget is larger (steps): about ten seconds of one core.
CEILING_STEPS = 500_000
#: A budget with no more than this left is spent on the event loop (steps): tens of
#: milliseconds at most.
INLINE_STEPS = 2_500
#: Steps a worker thread spends before it gives the event loop its turn (about a
#: millisecond: see :class:`WorkBudget`).
TURN_STEPS = 100
#: How long a worker thread sleeps at its turn (seconds): ``sleep(0)`` gives the lock up
#: and takes it straight back before a waiting thread wakes; a tenth of a millisecond lets
#: the event loop in (costly work runs about a tenth slower, and only in worker threads).
YIELD_SECONDS = 0.0001


class WorkExceeded(LimitError):
    """A request's work went past its budget: ``what`` says what was too costly."""

    def __init__(self, what: str, asked: int, limit: int) -> None:
        super().__init__(
            f"{what} would take {asked:,} steps of work, past this request's budget of "
            f"{limit:,} (a request's budget grows with its size, up to {CEILING_STEPS:,})"
        )
        self.what = what
        self.asked = asked
        self.limit = limit


class WorkBudget:
    """The steps one request may still spend (see the module's doc). Not shared: each
    request has its own, so what one client asks never spends another's.

    Work spent in a thread other than the one that made the budget (the event loop's)
    gives up the interpreter's lock every :data:`TURN_STEPS` steps: two threads busy with
    Python code otherwise keep the lock between them for tens of milliseconds at a time,
    and the event loop, which needs it for a moment at each wake, waits that long."""

    __slots__ = ("_done", "_home", "_pace", "_turn_at", "limit", "pool", "spent")

    def __init__(
        self,
        limit: int = CEILING_STEPS,
        pool: Executor | None = None,
        pace: Callable[[], None] | None = None,
    ) -> None:
        self.limit = max(0, min(limit, CEILING_STEPS))
        self.spent = 0
        #: Where the request's work is done off the event loop: the gateway's own bounded
        #: pool, so that no number of costly requests takes more than its threads (None:
        #: the event loop's default executor).
        self.pool = pool
        #: What a worker thread does at its turn (the pool's own pacing: it may wait longer
        #: while the event loop is busy); None: sleep :data:`YIELD_SECONDS`.
        self._pace = pace
        self._done = 0  # every step counted, paid or not: when to give others their turn
        self._home = threading.get_ident()
        self._turn_at = TURN_STEPS

    @classmethod
    def for_size(
        cls, size: int, pool: Executor | None = None, pace: Callable[[], None] | None = None
    ) -> WorkBudget:
        """The budget of a request of ``size`` bytes: the floor, and its body's share."""
        return cls(FLOOR_STEPS + max(0, size) // BYTES_PER_STEP, pool, pace)

    def grant(self, text: str) -> None:
        """Add the share of a call whose arguments are ``text`` (up to the ceiling)."""
        self.limit = min(CEILING_STEPS, self.limit + CALL_STEPS + len(text))

    @property
    def inline(self) -> bool:
        """Whether what is left is small enough to be spent on the event loop."""
        return self.left <= INLINE_STEPS

    @property
    def left(self) -> int:
        return max(0, self.limit - self.spent)

    def affords(self, steps: int) -> bool:
        """Whether ``steps`` more would stay within the budget (nothing is spent)."""
        return self.spent + steps <= self.limit

    def charge(self, steps: int, what: str) -> None:
        """Spend ``steps`` on ``what``; past the budget, :class:`WorkExceeded` (and the
        budget stays spent: whatever comes after it in the request is refused too)."""
        self.spent += steps
        if self.spent > self.limit:
            raise WorkExceeded(what, self.spent, self.limit)
        self._done += steps
        if self._done >= self._turn_at:
            self._turn()

    def paid(self, steps: int) -> None:
        """Count ``steps`` of work the request's size has paid for already (reading its
        tools one by one, shaping them for the engine): never refused, but in a worker
        thread it gives others their turn like any other work."""
        self.spent = min(self.spent + steps, self.limit)
        self._done += steps
        if self._done >= self._turn_at:
            self._turn()

    def _turn(self) -> None:
        self._turn_at = self._done + TURN_STEPS
        if threading.get_ident() != self._home:
            if self._pace is not None:
                self._pace()
            else:  # gives up the interpreter's lock: the loop takes its turn
                time.sleep(YIELD_SECONDS)


_ACTIVE: ContextVar[WorkBudget | None] = ContextVar("toolwire_work_budget", default=None)


class charging:  # lower case: it reads as a function, ``with charging(budget):``
    """Make ``budget`` the one :func:`charge` spends, for the ``with`` block (None: the
    one already active, if any, stays). A class, not a generator: it is entered for every
    piece of a streamed call, and :func:`contextlib.contextmanager` costs several times as
    much."""

    __slots__ = ("_budget", "_token")

    def __init__(self, budget: WorkBudget | None) -> None:
        self._budget = budget
        self._token: Token[WorkBudget | None] | None = None

    def __enter__(self) -> None:
        if self._budget is not None:
            self._token = _ACTIVE.set(self._budget)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _ACTIVE.reset(self._token)
            self._token = None


def paid(steps: int) -> None:
    """:meth:`WorkBudget.paid` on the budget :func:`charging` made active (none: nothing)."""
    budget = _ACTIVE.get()
    if budget is not None:
        budget.paid(steps)


def charge(steps: int, what: str) -> None:
    """Spend ``steps`` of the budget :func:`charging` made active (none: nothing is
    counted — a caller outside any request, such as a test of one check)."""
    budget = _ACTIVE.get()
    if budget is not None:
        budget.charge(steps, what)
