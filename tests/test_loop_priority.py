"""The event loop's low priority (:mod:`toolwire.server.priority`): a request past its cheap
share of the loop takes, with every other costly one, a tenth of the loop while cheap
requests need it, and all of it when they do not; its steps' results, errors and
cancellation pass through unchanged."""

from __future__ import annotations

import asyncio
import time

import pytest

from toolwire.server.pressure import Pressure
from toolwire.server.priority import SHARE, Meter, Priority, _Metered, metered

from .work_count import waits_asked


def _busy(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU: a step's work."""
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


async def _costly(steps: int, each: float, done: list[float]) -> int:
    for _ in range(steps):
        _busy(each)
        done.append(each)
        await asyncio.sleep(0)
    return steps


async def _cheap_load(seconds: float, each: float) -> float:
    """Many cheap requests' steps, for ``seconds``: the CPU they got."""
    got = 0.0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        _busy(each)
        got += each
        await asyncio.sleep(0)
    return got


def test_a_costly_request_takes_a_tenth_of_a_busy_loop() -> None:
    async def main(meter: Meter | None) -> tuple[float, float]:
        costly: list[float] = []
        work = _costly(100_000, 0.001, costly)
        task = asyncio.ensure_future(_Metered(work, meter) if meter else work)
        cheap = await _cheap_load(1.0, 0.0002)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return sum(costly), cheap

    metered_costly, metered_cheap = asyncio.run(main(Meter(Priority(cheap=0.01))))
    plain_costly, plain_cheap = asyncio.run(main(None))
    share = metered_costly / (metered_costly + metered_cheap)
    plain_share = plain_costly / (plain_costly + plain_cheap)
    assert plain_share > 0.6, plain_share  # unmetered, the costly one takes most of the loop
    assert share < 2 * SHARE, share  # metered, about a tenth
    assert metered_cheap > 1.5 * plain_cheap


def test_alone_on_the_loop_a_costly_request_goes_at_full_speed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waited = waits_asked(monkeypatch)

    async def main() -> int:
        quiet = Pressure("/nonexistent/pressure")  # a machine with cores to spare
        return await _Metered(_costly(300, 0.001, []), Meter(Priority(cheap=0.01, machine=quiet)))

    steps = asyncio.run(main())
    assert steps == 300  # its result passes through
    # no debt waited out (nine times its work: 2.7 s); what waits there are is the loop's
    # own bookkeeping between steps, taken for other requests' use (a few percent)
    assert sum(waited) < 2 * 0.3, (len(waited), sum(waited))


def test_errors_and_cancellation_reach_the_request_through_a_wait() -> None:
    cleaned: list[str] = []

    async def failing() -> None:
        _busy(0.02)
        await asyncio.sleep(0)
        raise ValueError("its own error")

    async def held() -> None:
        try:
            for _ in range(1_000):
                _busy(0.002)
                await asyncio.sleep(0)
        finally:
            cleaned.append("closed")

    async def main() -> None:
        priority = Priority(cheap=0.001)
        with pytest.raises(ValueError, match="its own error"):
            await _Metered(failing(), Meter(priority))
        priority.busy, priority.until = True, time.perf_counter() + 60  # a debt: it waits
        task = asyncio.ensure_future(_Metered(held(), Meter(priority)))
        load = asyncio.ensure_future(_cheap_load(0.3, 0.0005))  # the loop busy meanwhile
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await load

    asyncio.run(main())
    assert cleaned == ["closed"]


def test_outside_a_request_nothing_is_metered() -> None:
    async def main() -> tuple[bool, int]:
        async def one() -> int:
            return 1

        work = one()
        wrapped = metered(work)
        result = await wrapped
        return wrapped is work, result

    assert asyncio.run(main()) == (True, 1)
