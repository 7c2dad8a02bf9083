"""The event loop's low priority: a request that has used more of the loop than a cheap one
does runs, from then on, in the loop's spare time.

One event loop serves every client. Each request's own steps on it (reading its body,
reading its upstream's stream, shaping and sending its events) are timed as they run
(:class:`Meter`, one per request, found by its tasks through a context variable). A
request's first :data:`CHEAP_SECONDS` of loop time are served like any other's; past them
(a reply of ten thousand calls, a body of megabytes read piece by piece, a stream of
megabytes) the request is costly. While cheap requests need the loop (every few
milliseconds the loop thread's CPU clock tells how much of the time costly requests left
them the cheap ones used), every step a costly request takes adds to a debt shared by all
costly requests (:class:`Priority`, one per app): nine times the step's own time, and a
costly request's next step waits while the debt stands, so that costly requests together
hold the loop a tenth of the time. When cheap requests leave the loop idle, the debt is
forgiven and costly requests run at full speed.
Cheap requests (every honest request seen: a few milliseconds each) never wait.

The steps are timed by wrapping the awaitable that runs the request (the app's middleware)
and the one that sends a streamed reply (its own task, started by the response): the same
suspension points the event loop sees, nothing added inside the pipeline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Generator
from contextvars import ContextVar
from typing import Any, TypeVar

from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send

from .pressure import Pressure

__all__ = ["CHEAP_SECONDS", "SHARE", "Meter", "Priority", "metered"]

T = TypeVar("T")

#: Loop time (seconds) a request uses before it counts as costly: ten times what an honest
#: streamed request takes (about 2 ms on the machines this was measured on).
CHEAP_SECONDS = 0.02
#: The share of the loop costly requests take, together, while others need it.
SHARE = 0.1
#: The longest one wait lasts (seconds); then the debt is looked at again.
SLICE = 0.005
#: How often (seconds) the loop's thread clock is read to tell whether cheap requests need it.
WINDOW = 0.005
#: The loop is busy when cheap requests used more than this share of the time costly ones
#: left them.
BUSY = 0.5


class Priority:
    """The debt costly requests owe the event loop (one per app; see the module's doc).
    Used on the loop's thread only: it reads that thread's CPU clock."""

    __slots__ = ("_costly", "_cpu", "_factor", "_machine", "_wall", "busy", "cheap", "until")

    def __init__(
        self, cheap: float = CHEAP_SECONDS, share: float = SHARE, machine: Pressure | None = None
    ) -> None:
        self.cheap = cheap
        #: The machine's CPU contention (:mod:`.pressure`): costly requests yield to it too.
        self._machine = machine if machine is not None else Pressure()
        self._factor = (1 - share) / share
        #: Until when (``perf_counter``) costly requests wait.
        self.until = 0.0
        #: Whether cheap requests used the loop in the last look (else no one waits).
        self.busy = False
        self._wall, self._cpu, self._costly = time.perf_counter(), time.thread_time(), 0.0

    def owe(self, used: float) -> None:
        """A costly request's step took ``used`` seconds of the loop."""
        self._costly += used
        if self.busy:
            self.until = max(self.until, time.perf_counter()) + used * self._factor

    def wait(self) -> float:
        """How long a costly request's next step waits (seconds, 0: none)."""
        now = time.perf_counter()
        if now - self._wall >= WINDOW:
            self._look(now)
        left = self.until - now
        return min(left, SLICE) if self.busy and left > 0 else 0.0

    def _look(self, now: float) -> None:
        """Whether, of the loop's time costly requests did not take since the last look,
        the cheap ones used more than :data:`BUSY`, or other work on the machine waits for
        a CPU (:class:`~.pressure.Pressure`); if neither, the debt is forgiven."""
        cpu = time.thread_time()
        cheap = (cpu - self._cpu) - self._costly
        self.busy = cheap > BUSY * max(0.0, (now - self._wall) - self._costly)
        self.busy = self._machine.look(time.monotonic()) or self.busy
        if not self.busy:
            self.until = 0.0
        self._wall, self._cpu, self._costly = now, cpu, 0.0

    def middleware(self) -> Middleware:
        return Middleware(_Prioritised, priority=self)


class Meter:
    """The loop time one request's steps took (seconds), and its app's :class:`Priority`."""

    __slots__ = ("active", "priority", "used")

    def __init__(self, priority: Priority) -> None:
        self.priority = priority
        self.used = 0.0
        #: Whether one of its steps is being timed now (an awaitable awaited within it is
        #: timed already).
        self.active = False


_METER: ContextVar[Meter | None] = ContextVar("toolwire_loop_meter", default=None)


def metered(work: Awaitable[T]) -> Awaitable[T]:
    """``work``, its steps timed against the current request's :class:`Meter` (none: as
    it is)."""
    meter = _METER.get()
    return work if meter is None or meter.active else _Metered(work, meter)


class _Metered:
    """An awaitable that times each step of another and, once its request is costly, waits
    out the debt before a step (see the module's doc)."""

    __slots__ = ("_held", "_inner", "_meter", "_paused")

    def __init__(self, work: Awaitable[Any], meter: Meter) -> None:
        self._inner: Generator[Any, Any, Any] = work.__await__()
        self._meter = meter
        self._held: Any = None
        self._paused = False

    def __await__(self) -> Generator[Any, Any, Any]:
        return self

    def __iter__(self) -> _Metered:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def send(self, value: Any) -> Any:
        meter = self._meter
        priority = meter.priority
        if self._paused:  # back from a wait: the step's own value, and the debt looked at again
            value = self._held
        if meter.used > priority.cheap:
            # one wait lasts a slice at most, and is taken again while the debt stands: a
            # step that goes after one slice whatever it owes took, on a busy machine (its
            # steps four times longer than their CPU time), a third of the loop, not a tenth
            pause = priority.wait()
            if pause > 0:
                self._held, self._paused = value, True
                return _sleep(pause)
        self._paused, self._held = False, None
        meter.active = True
        start = time.perf_counter()
        try:
            return self._inner.send(value)
        finally:
            self._spent(time.perf_counter() - start)

    def throw(self, *exc: Any) -> Any:
        self._paused, self._held = False, None  # cancelled while waiting: on to the work
        self._meter.active = True
        start = time.perf_counter()
        try:
            return self._inner.throw(*exc)
        finally:
            self._spent(time.perf_counter() - start)

    def close(self) -> None:
        self._inner.close()

    def _spent(self, used: float) -> None:
        meter = self._meter
        meter.active = False
        meter.used += used
        if meter.used > meter.priority.cheap:
            meter.priority.owe(used)


def _sleep(seconds: float) -> asyncio.Future[None]:
    """A future the task waits on for ``seconds`` (what ``asyncio.sleep`` awaits)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()
    loop.call_later(seconds, _wake, future)
    future._asyncio_future_blocking = True  # a future yielded to its task, as ``await`` does
    return future


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _Prioritised:
    """The app, each HTTP request's steps timed by a meter of its own."""

    def __init__(self, app: ASGIApp, priority: Priority) -> None:
        self._app = app
        self._priority = priority

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        token = _METER.set(Meter(self._priority))
        try:
            await _Metered(self._app(scope, receive, send), _METER.get())  # type: ignore[arg-type]
        finally:
            _METER.reset(token)
