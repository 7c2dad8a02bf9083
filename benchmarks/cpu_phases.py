"""Where the CPU of each phase of a benchmark went, by process, read from ``/proc``.

Used by ``benchmarks/shared_gateway.py``: the gateway's processes (its process group, the
workers included), the upstream's, this process's (the honest clients) and the attackers'.
A phase's figures are the differences between two marks.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Where"]

_TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pids: set[int], group: int) -> float:
    """The CPU seconds (user and system) the processes ``pids`` and those of process group
    ``group`` used so far, from ``/proc``."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(entry.name) in pids or int(fields[2]) == group:
                total += int(fields[11]) + int(fields[12])
    return total / _TICK


@dataclass
class Where:
    """Where the CPU of one phase went: the gateway's processes, the upstream's, this one's
    (the honest clients) and the attackers'."""

    gateway: int
    upstream: int
    attackers: int = 0
    marks: list[tuple[float, ...]] = field(default_factory=list)

    def mark(self) -> None:
        me = os.getpid()
        self.marks.append(
            (
                time.perf_counter(),
                _cpu(set(), self.gateway),
                _cpu({self.upstream}, -1),
                _cpu({me}, -1),
                _cpu({self.attackers}, -1) if self.attackers else 0.0,
            )
        )

    def spent(self, phase: int) -> str:
        a, b = self.marks[phase], self.marks[phase + 1]
        wall, gw, up, me, them = (y - x for x, y in zip(a, b, strict=True))
        return (
            f"wall {wall:5.1f} s, CPU s: gateway {gw:5.1f}, upstream {up:5.1f}, "
            f"honest clients {me:5.1f}, attackers {them:5.1f}"
        )
