"""Where the gateway does a costly request's work: one worker thread, fair between keys,
yielding to the event loop, with a bounded queue.

A request whose work budget is too large for the event loop (:mod:`toolwire.budget`) has
its body read, its tools planned and its calls checked here, in the gateway's one worker
thread. Three rules keep that work from costing other clients more than its share:

- **Fair between keys.** Each key (each client address, on a gateway without keys) has a
  lane of its own; the worker takes one piece of work from each lane in turn. A key with a
  hundred costly requests queued delays another key's by one piece of work, not by a hundred.
- **Low priority while the event loop is busy.** The worker thread shares the interpreter's
  lock with the event loop, which serves every cheap request and every stream. At each turn
  (about a millisecond of work, see :class:`~toolwire.budget.WorkBudget`) the worker reads
  the event loop thread's own CPU clock: if the loop ran since the last turn, the worker
  sleeps long enough to hold the lock no more than :data:`BUSY_SHARE` of the time; if the
  loop was idle, it goes on at full speed. Costly requests are slower while others are
  served; cheap requests are not slowed by costly ones.
- **A bounded queue.** A costly request is refused before its work is queued when its key
  already has :data:`LANE_WAITING` pieces of work waiting (429), or the worker has
  :data:`QUEUE_WAITING` in all (503), both with ``Retry-After``: past that, a request would
  only wait for minutes and hold its connection and body meanwhile. Work for a reply already
  under way (checking the calls an upstream wrote) is never refused: the upstream has
  answered, and its reply is not lost.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any, TypeVar

from ..budget import YIELD_SECONDS, WorkBudget, charging
from .pressure import Pressure

__all__ = [
    "BUSY_SHARE",
    "LANE_WAITING",
    "QUEUE_WAITING",
    "WORKER_NICE",
    "Busy",
    "Lane",
    "Work",
    "WorkPool",
    "pause_for",
]

T = TypeVar("T")

#: The share of the interpreter the worker thread takes, at most, while the event loop is
#: busy (the rest of the time it sleeps): a tenth.
BUSY_SHARE = 0.1
#: How much nicer the worker thread is than the process (its CPU priority below the event
#: loop's and other programs', on Linux, where a thread has its own).
WORKER_NICE = 10
#: The event loop counts as busy when it used more than this share of one core since the
#: worker's last turn.
BUSY_LOOP = 0.02
#: The longest the worker sleeps at one turn (seconds): however long its last piece of work
#: held the lock (one JSON body decoded in C holds it throughout), it comes back this soon.
LONGEST_PAUSE = 0.25
#: Pieces of work one lane may have waiting before its key's next costly request is refused.
LANE_WAITING = 8
#: Pieces of work the worker may have waiting, all lanes, before any costly request is refused.
QUEUE_WAITING = 64
#: What a refused request is told to wait (seconds).
RETRY_AFTER = 1


class Busy(Exception):
    """A costly request refused before its work was queued: ``status`` 429 (its key has too
    much waiting) or 503 (the worker has)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = RETRY_AFTER


@dataclass
class _Piece:
    future: Future[Any]
    fn: Callable[..., Any]
    args: tuple[Any, ...]


class WorkPool:
    """One worker thread taking pieces of work from its lanes in turn (see the module's
    doc). Made by :class:`Work`; its thread starts with the first piece."""

    def __init__(self, share: float = BUSY_SHARE, machine: Pressure | None = None) -> None:
        self._share = share
        #: The machine's CPU contention, read by the worker thread (see :meth:`turn`).
        self._machine = machine if machine is not None else Pressure()
        self._lanes: collections.OrderedDict[str, collections.deque[_Piece]] = (
            collections.OrderedDict()
        )
        self._waiting = 0
        self._ready = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._loop_clock: int | None = None  # the event loop thread's CPU clock
        self._mark = (0.0, 0.0)  # (wall, loop CPU) at the worker's last turn
        self._resumed = 0.0  # when the worker last woke from its turn

    # -- the event loop's side

    def watch(self, ident: int) -> None:
        """Read the event loop's business from the thread ``ident`` (the loop's own)."""
        if self._loop_clock is None:
            with contextlib.suppress(AttributeError, OSError):  # not every OS has the clock
                self._loop_clock = time.pthread_getcpuclockid(ident)
                self._mark = (time.monotonic(), time.clock_gettime(self._loop_clock))

    def admit(self, lane: str) -> None:
        """Refuse (:class:`Busy`) a new costly request of ``lane`` if its work would wait
        too long; else nothing."""
        with self._ready:
            if len(self._lanes.get(lane, ())) >= LANE_WAITING:
                raise Busy(
                    f"this key has {LANE_WAITING} costly requests' work waiting already; "
                    f"retry in {RETRY_AFTER} s",
                    429,
                )
            if self._waiting >= QUEUE_WAITING:
                raise Busy(
                    f"the gateway's costly-request queue is full; retry in {RETRY_AFTER} s",
                    503,
                )

    def put(self, lane: str, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Queue ``fn(*args)`` in ``lane``: its future."""
        future: Future[T] = Future()
        with self._ready:
            if self._closed:
                raise RuntimeError("the gateway's worker has stopped")
            self._lanes.setdefault(lane, collections.deque()).append(_Piece(future, fn, args))
            self._waiting += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="toolwire-work", daemon=True
                )
                self._thread.start()
            self._ready.notify()
        return future

    def shutdown(self) -> None:
        with self._ready:
            self._closed = True
            self._ready.notify_all()

    @property
    def waiting(self) -> int:
        """Pieces of work waiting, all lanes."""
        return self._waiting

    # -- the worker's side

    def _next(self) -> _Piece | None:
        with self._ready:
            while not self._lanes and not self._closed:
                self._ready.wait()
            if not self._lanes:
                return None
            lane, pieces = next(iter(self._lanes.items()))
            piece = pieces.popleft()
            self._waiting -= 1
            del self._lanes[lane]
            if pieces:  # the lane goes to the back: every other lane's piece comes first
                self._lanes[lane] = pieces
            return piece

    def _serve(self) -> None:
        # the worker's CPU comes after every other thread's on the machine (the event loop's
        # and other processes'): nice, where the OS lets a thread have its own
        with contextlib.suppress(AttributeError, OSError):
            me = threading.get_native_id()
            os.setpriority(
                os.PRIO_PROCESS, me, min(19, os.getpriority(os.PRIO_PROCESS, me) + WORKER_NICE)
            )
        self._resumed = time.monotonic()
        while (piece := self._next()) is not None:
            if not piece.future.set_running_or_notify_cancel():
                continue
            try:
                result = piece.fn(*piece.args)
            except BaseException as exc:  # the awaiting request re-raises it
                piece.future.set_exception(exc)
            else:
                piece.future.set_result(result)
            del piece
            self.turn()

    def turn(self) -> None:
        """The worker's turn: give the interpreter's lock up, for longer while the event
        loop is busy (see the module's doc). In any other thread: nothing."""
        if threading.current_thread() is not self._thread:
            return
        now = time.monotonic()
        pause = YIELD_SECONDS
        if self._loop_clock is not None:
            loop_cpu = time.clock_gettime(self._loop_clock)
            wall, cpu = self._mark
            ran = loop_cpu - cpu
            if self._machine.look(now):  # other work waits for a CPU: as if the loop ran
                ran = max(ran, now - wall)
            pause = pause_for(now - self._resumed, ran, now - wall, self._share)
            self._mark = (now, loop_cpu)
        time.sleep(pause)
        self._resumed = time.monotonic()


def pause_for(worked: float, loop_ran: float, since: float, share: float = BUSY_SHARE) -> float:
    """How long the worker sleeps at its turn (seconds), having ``worked`` since it last
    woke, while the event loop ran ``loop_ran`` seconds of CPU in the ``since`` seconds
    since the worker's last turn: long enough that its work is ``share`` of the time when
    the loop is busy, :data:`~toolwire.budget.YIELD_SECONDS` when it is idle."""
    if since <= 0 or loop_ran <= BUSY_LOOP * since:
        return YIELD_SECONDS
    return min(LONGEST_PAUSE, max(YIELD_SECONDS, worked * (1 - share) / share))


class Lane(Executor):
    """One key's lane of the pool, as an executor (``loop.run_in_executor(lane, …)``)."""

    def __init__(self, pool: WorkPool, name: str) -> None:
        self.pool = pool
        self.name = name

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        if kwargs:
            raise TypeError("a lane takes positional arguments only")
        return self.pool.put(self.name, fn, *args)

    def turn(self) -> None:
        self.pool.turn()


class Work:
    """Where a request's work is done: on the event loop when its budget is small enough,
    else in the gateway's worker, in its key's lane. One per app: no gateway's requests
    wait on another's."""

    def __init__(self, share: float = BUSY_SHARE) -> None:
        self.pool = WorkPool(share)

    def budget(self, size: int, lane: str) -> WorkBudget:
        """The work budget of a request of ``size`` bytes from ``lane`` (its key's name, or
        its address), spent in that lane. Called on the event loop: the pool learns which
        thread is the loop's."""
        self.pool.watch(threading.get_ident())
        chosen = Lane(self.pool, lane)
        return WorkBudget.for_size(size, chosen, chosen.turn)

    def admit(self, budget: WorkBudget) -> None:
        """Refuse (:class:`Busy`) a request whose costly work would wait too long."""
        if not budget.inline and isinstance(budget.pool, Lane):
            self.pool.admit(budget.pool.name)

    async def apart(self, budget: WorkBudget, work: Callable[[], T]) -> T:
        """``work()`` in the budget's lane, charged to ``budget``."""

        def apart() -> T:
            with charging(budget):
                return work()

        return await asyncio.get_running_loop().run_in_executor(budget.pool, apart)

    async def run(self, budget: WorkBudget, work: Callable[[], Awaitable[T]]) -> T:
        """``work()`` charged to ``budget``: awaited here when the budget is small enough
        for the event loop, else run to its end on an event loop of its own in the worker
        (it may await the store; it holds no object of this loop)."""
        if budget.inline:
            with charging(budget):
                return await work()

        def apart() -> T:
            with charging(budget):
                return asyncio.run(_awaited(work))

        return await asyncio.get_running_loop().run_in_executor(budget.pool, apart)


async def _awaited(work: Callable[[], Awaitable[T]]) -> T:
    return await work()
