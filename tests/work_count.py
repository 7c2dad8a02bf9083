"""Work counted, not timed: what the tests of linear or bounded work measure.

A test that times work fails on a busy machine (a shared CI runner at load 7 runs the same
code several times slower, and unevenly) and may pass a regression on a fast, quiet one.
The tests of work that must stay linear or bounded count the work instead, in units that a
regression blows up whatever the machine: the calls it makes (here), the characters it hands
to the functions that read them, the steps it charges to a budget, the candidates it looks
up — each counted where the test knows the work is done. Times are for the benchmarks.

:func:`calls_made` counts the function calls, Python's and builtins', that one callable
makes in the calling thread, with :mod:`cProfile` (its counting is written in C, so it costs
little). A loop written in Python calls something on each turn, so work that grew with the
square of its input makes a count that grows with it; a loop inside one builtin (a ``str``
method scanning a text) is one call whatever it reads, which is why a test whose risk is
text read again and again counts characters where they are read.
"""

from __future__ import annotations

import asyncio
import cProfile
from collections.abc import Callable
from typing import TypeVar

import pytest

from toolwire.server import priority as loop_priority

__all__ = ["calls_made", "waits_asked"]

T = TypeVar("T")


def calls_made(work: Callable[[], T]) -> tuple[T, int]:
    """What ``work()`` returns, and the number of function calls it made in this thread."""
    profile = cProfile.Profile()
    profile.enable()
    try:
        result = work()
    finally:
        profile.disable()
    return result, sum(entry.callcount for entry in profile.getstats())


def waits_asked(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Each wait the event loop's meter makes a costly request take before a step
    (seconds), recorded as it is asked: what the meter decides, which a busy machine does
    not stretch as it stretches the time taken."""
    asked: list[float] = []
    sleep = loop_priority._sleep

    def recorded(seconds: float) -> asyncio.Future[None]:
        asked.append(seconds)
        return sleep(seconds)

    monkeypatch.setattr(loop_priority, "_sleep", recorded)
    return asked
