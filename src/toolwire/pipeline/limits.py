"""How many calls one reply may pass on: past :attr:`Request.max_calls`, a call is not
passed on, and the reply's end says how many were not (``calls-past-limit``).

A reply of ten thousand calls is something no client asked for and every step pays for —
reading it, the repeat check, typing by the schema, each API's rendering, the client's own
loop — and on a shared gateway it is CPU taken from every other client. So a call past the
limit is not passed on, and once every call passed on has ended the reply is closed, as at
a repeated call: generation stops there and the turn ends in the first ``max_calls`` calls.
(An engine that ends its calls only at the reply's end is read to its end.) The limit is
applied before any step that types a call.
"""

from __future__ import annotations

from .. import events as ev
from ..events import Event

__all__ = ["DEFAULT_MAX_CALLS", "CallLimit"]

#: As many calls as OpenAI lets one request declare tools.
DEFAULT_MAX_CALLS = 128

_CALLS = (ev.CallStart, ev.CallArgsDelta, ev.CallAbort, ev.CallEnd)


class CallLimit:
    """Push each event of a reply; what to pass on comes back. ``closed``: the reply went
    past the limit, every call passed on has ended, and its end is given: read no more."""

    def __init__(self, limit: int | None) -> None:
        self._limit = limit
        self._kept: set[int] = set()
        self._open: set[int] = set()  # calls passed on that have not ended yet
        self._past = False
        self.closed = False

    def push(self, event: Event) -> list[Event]:
        if self.closed:
            return []
        if isinstance(event, ev.Done) and self._past:
            self.closed = True
            return [self._told(), event]
        if self._limit is None or not isinstance(event, _CALLS):
            return [event]
        index = event.index
        if index not in self._kept:
            if self._past or len(self._kept) >= self._limit:
                self._past = True
                return self._close_if_done([])
            self._kept.add(index)
            self._open.add(index)
        if isinstance(event, (ev.CallEnd, ev.CallAbort)):
            self._open.discard(index)
        return self._close_if_done([event])

    def _close_if_done(self, out: list[Event]) -> list[Event]:
        if self._past and not self._open:
            self.closed = True
            return [*out, self._told(), ev.Done("tool_calls")]
        return out

    def _told(self) -> Event:
        return ev.Notice(
            "calls-past-limit",
            f"the reply went on past {self._limit} calls, the most one reply passes on: it "
            f"was closed after the first {self._limit}",
        )
