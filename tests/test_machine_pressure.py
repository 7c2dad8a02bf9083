"""Costly work yields to the machine, not only to the event loop: the CPU pressure read from
the kernel, the worker thread's lower CPU priority, a large body's reading giving the loop
its turns."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path

import pytest

from toolwire.budget import WorkBudget, charging
from toolwire.server.pressure import STALLED, WINDOW, Pressure
from toolwire.server.priority import Meter, Priority, _Metered
from toolwire.server.validate import decode_body
from toolwire.server.work import WORKER_NICE, WorkPool

from .work_count import waits_asked

#: ``/proc/pressure/cpu`` as Linux writes it.
_PSI = (
    "some avg10=0.58 avg60=3.33 avg300=4.10 total={some}\n"
    "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
)


def _write(path: Path, stalled_us: int) -> None:
    path.write_text(_PSI.format(some=stalled_us))


def test_the_machine_is_contended_when_tasks_waited_for_a_cpu(tmp_path: Path) -> None:
    source = tmp_path / "cpu"
    _write(source, 1_000_000)
    pressure = Pressure(str(source))
    start = time.monotonic()
    assert pressure.look(start) is False  # nothing read yet since it was made
    # tasks waited half of the window: contended
    later = start + 10 * WINDOW
    _write(source, 1_000_000 + int(0.5 * 10 * WINDOW * 1e6))
    assert pressure.look(later) is True
    # within the window, the last answer stands (the file is not read again)
    _write(source, 0)
    assert pressure.look(later + WINDOW / 2) is True
    # then little waiting: not contended
    _write(source, 1_000_000 + int(0.5 * 10 * WINDOW * 1e6) + 10)
    assert pressure.look(later + 10 * WINDOW) is False
    # just past the share named stalled
    base = 1_000_000 + int(0.5 * 10 * WINDOW * 1e6) + 10
    _write(source, base + int(2 * STALLED * 10 * WINDOW * 1e6))
    assert pressure.look(later + 20 * WINDOW) is True


def test_without_the_kernel_s_figures_the_machine_is_never_contended(tmp_path: Path) -> None:
    missing = Pressure(str(tmp_path / "absent"))
    assert missing.look(time.monotonic() + 100) is False
    garbled = tmp_path / "garbled"
    garbled.write_text("nothing of the kind\n")
    assert Pressure(str(garbled)).look(time.monotonic() + 100) is False


class _Contended(Pressure):
    """A machine whose every core is wanted by other work."""

    def look(self, now: float) -> bool:
        return True


async def _costly(steps: int, each: float) -> int:
    for _ in range(steps):
        end = time.perf_counter() + each
        while time.perf_counter() < end:
            pass
        await asyncio.sleep(0)
    return steps


def test_a_costly_request_alone_on_the_loop_yields_to_a_contended_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the waits the meter makes the request take (seconds), not the time it took: a busy
    # machine stretches the time, quiet or contended as this test says it is
    waited = waits_asked(monkeypatch)

    def waits(machine: Pressure) -> float:
        async def main() -> None:
            await _Metered(_costly(200, 0.001), Meter(Priority(cheap=0.01, machine=machine)))

        waited.clear()
        asyncio.run(main())
        return sum(waited)

    quiet = waits(Pressure("/nonexistent/pressure"))
    contended = waits(_Contended("/nonexistent/pressure"))
    # its 0.2 s of work at full speed: no debt waited out (nine times its work)
    assert quiet < 2 * 0.2, quiet
    # a tenth of the time, past the cheap part: it waits several times its work
    assert contended > 2 * 0.2, (contended, quiet)


def test_the_worker_thread_runs_nicer_than_the_process() -> None:
    pool = WorkPool(machine=Pressure("/nonexistent/pressure"))
    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    try:
        seen = pool.put(
            "a", lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        ).result(10)
    finally:
        pool.shutdown()
    assert seen == min(19, before + WORKER_NICE)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before  # ours unchanged


def test_a_large_body_read_in_a_worker_gives_the_loop_its_turns() -> None:
    body = json.dumps(
        {"tools": [{"type": "function", "function": {"name": f"t{i}"}} for i in range(20_000)]}
    ).encode()
    turns: list[float] = []
    budget = WorkBudget(10_000_000, pace=lambda: turns.append(time.perf_counter()))

    def read() -> object:
        with charging(budget):
            return decode_body(body)

    data: list[object] = []
    worker = threading.Thread(target=lambda: data.append(read()))
    worker.start()
    worker.join(30)
    assert data and isinstance(data[0], dict) and len(data[0]["tools"]) == 20_000
    # 60,000 objects made and walked: a step each 16, a turn each 100 steps
    assert len(turns) >= 50, len(turns)
    assert budget.spent > 0
    # on the thread that made the budget (the event loop's), reading never pauses
    turns.clear()
    with charging(budget):
        decode_body(body)
    assert turns == []


@pytest.mark.skipif(not Path("/proc/pressure/cpu").exists(), reason="no PSI on this kernel")
def test_the_kernel_s_own_figures_are_read() -> None:
    pressure = Pressure()
    assert pressure._stalled is not None  # the real file parses
