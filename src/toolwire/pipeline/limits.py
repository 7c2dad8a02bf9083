"""How many calls one reply may pass on: past :attr:`Request.max_calls`, a call is not
passed on, and the reply's end says how many were not (``calls-past-limit``).

A reply of ten thousand calls is something no client asked for and every step after the
reader pays for — the repeat check, typing by the schema, each API's rendering, the client's
own loop — and on a shared gateway it is CPU taken from every other client. The calls are
read (the reader is linear and the reply's size is bounded), and only the first
``max_calls`` go on: the limit is applied before any step that types a call.
"""

from __future__ import annotations

from .. import events as ev
from ..events import Event

__all__ = ["DEFAULT_MAX_CALLS", "CallLimit"]

#: As many calls as OpenAI lets one request declare tools.
DEFAULT_MAX_CALLS = 128

_CALLS = (ev.CallStart, ev.CallArgsDelta, ev.CallAbort, ev.CallEnd)


class CallLimit:
    """Push each event of a reply; what to pass on comes back."""

    def __init__(self, limit: int | None) -> None:
        self._limit = limit
        self._kept: set[int] = set()
        self._over: set[int] = set()

    def push(self, event: Event) -> list[Event]:
        if isinstance(event, ev.Done) and self._over:
            told = ev.Notice(
                "calls-past-limit",
                f"the reply held more than {self._limit} calls: {len(self._over)} after the "
                f"first {self._limit} were not passed on",
            )
            self._over = set()
            return [told, event]
        if self._limit is None or not isinstance(event, _CALLS):
            return [event]
        index = event.index
        if index in self._kept:
            return [event]
        if index not in self._over and len(self._kept) < self._limit:
            self._kept.add(index)
            return [event]
        self._over.add(index)
        return []
