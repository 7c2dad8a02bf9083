"""Whether other work on the machine is waiting for a CPU: costly requests then yield.

The gateway's low priority for costly work (:mod:`.priority` on the event loop,
:mod:`.work` in its worker thread) first looked at the event loop alone: while cheap
requests need the loop, costly ones take a tenth of it. But the gateway is rarely alone on
its machine: a local model's engine, the upstream it fronts, other services share the
cores. A gateway whose loop has time to spare still takes a core that those need when it
spends it on a costly request, and every client of that engine waits. So costly work also
yields while any task on the machine waits for a CPU.

Linux says so exactly (pressure stall information, ``/proc/pressure/cpu``: the time at
least one runnable task waited for a CPU, in microseconds). It is read at most every
:data:`WINDOW` seconds (a read costs some ten microseconds). Where it is not kept (an older
kernel, a container without it), the machine is never called contended, and costly work
yields to the event loop alone, as before.
"""

from __future__ import annotations

import contextlib
import time

__all__ = ["STALLED", "WINDOW", "Pressure"]

#: How often (seconds) the machine's pressure is read.
WINDOW = 0.02
#: The machine is contended when some task waited for a CPU more than this share of the
#: time since the last read.
STALLED = 0.1
_SOURCE = "/proc/pressure/cpu"


def _stalled_us(text: bytes) -> int | None:
    """The ``some`` line's ``total`` (microseconds) of ``/proc/pressure/cpu``."""
    for line in text.splitlines():
        if line.startswith(b"some "):
            for field in line.split():
                if field.startswith(b"total="):
                    with contextlib.suppress(ValueError):
                        return int(field[6:])
    return None


class Pressure:
    """The machine's CPU contention, read on demand (one per app; not thread-safe: each
    thread that asks has one of its own, or asks from one thread only)."""

    __slots__ = ("_at", "_source", "_stalled", "contended")

    def __init__(self, source: str = _SOURCE) -> None:
        self._source = source
        #: Whether some task waited for a CPU more than :data:`STALLED` of the last window.
        self.contended = False
        self._at = time.monotonic()
        self._stalled = self._read()

    def _read(self) -> int | None:
        try:
            with open(self._source, "rb") as f:
                return _stalled_us(f.read(512))
        except OSError:
            return None

    def look(self, now: float) -> bool:
        """:attr:`contended`, read again when :data:`WINDOW` has passed (``now`` on the
        ``time.monotonic`` clock)."""
        if self._stalled is None or now - self._at < WINDOW:
            return self.contended
        stalled = self._read()
        if stalled is None:
            self._stalled, self.contended = None, False
            return False
        waited = (stalled - self._stalled) / 1e6
        self.contended = waited > STALLED * (now - self._at)
        self._at, self._stalled = now, stalled
        return self.contended
