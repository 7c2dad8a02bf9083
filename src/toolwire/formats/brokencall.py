"""A block of calls that goes on past one broken call.

Kimi K2's section and MiniMax M1's ``<tool_calls>`` block hold several calls, each with its
own end (``<|tool_call_end|>``, the end of a line). One broken call (JSON cut short, a
malformed id, an object that is no call) should not take the good calls beside it down
with it: the broken call's text stays reply text, with a ``call-not-read`` notice naming
why, and the block reads on from the broken call's end. The block itself must still be
whole: text between calls that is no call, or a block the reply ends in the middle of, fails
the whole block as before (its text, broken calls included, goes back to the reply once).

The broken call's text is given back when the block ends, not when the call breaks: until
then the whole block may still fail, and its text must reach the reply exactly once.
"""

from __future__ import annotations

from typing import ClassVar

from .markerstream import DONE, Body, MarkerStream

__all__ = ["BlockStream", "ResyncBody"]


class ResyncBody(Body):
    """A body whose calls may each break alone. Subclasses set ``between`` (the state between
    calls) and ``resync`` (the state that skips a broken call's rest, and returns to
    ``between`` at the call's end)."""

    between: ClassVar[int]
    resync: ClassVar[int]

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        #: ``(text, why)`` of each broken call, to be given back as reply text.
        self.broken: list[tuple[str, str]] = []
        self._piece: list[str] | None = None  # the current call's text
        self._mark = 0  # how many calls were announced before the current one
        self._why = ""
        self._broke = False

    def feed(self, s: str, i: int) -> int:
        n = len(s)
        going = True
        while i < n and going:
            before = self.state
            j, going = self.step(s, i)
            if self._piece is None and before == self.between != self.state:
                self._piece = []
                self._mark = len(self.started)
            if self._piece is not None:
                self._piece.append(s[i:j])
                if self.state == self.between:  # the call ended, read or skipped
                    if before == self.resync:
                        self.broken.append(("".join(self._piece), self._why))
                    self._piece = None
            if self._broke:  # a broken call does not stop the block: read on
                self._broke = False
                going = self.status != DONE
            i = j
        return i

    def fail(self, i: int, reason: str) -> int:
        """Inside a call, only the call breaks; elsewhere the whole block fails."""
        if self._piece is None or self.state == self.resync:
            return super().fail(i, reason)
        broken = self.started[self._mark :]
        for index, cid in broken:
            self.stream._abort(index, cid, reason)
        # a call read whole before what broke it (its end token missing) is aborted too:
        # it must not also end as a call
        gone = {index for index, _cid in broken}
        self.calls = [(index, call) for index, call in self.calls if index not in gone]
        del self.started[self._mark :]
        self._why = reason
        self._broke = True
        self.state = self.resync
        self.on_broken()
        return i

    def close_broken(self, tail: str) -> None:
        """The reply ended inside a broken call: its text, ``tail`` too, goes with the block."""
        if self._piece is not None:
            self.broken.append(("".join(self._piece) + tail, self._why))
            self._piece = None

    def fail_block(self, i: int, reason: str) -> int:
        """Fail the whole block, even inside a call: the block itself is not consistent."""
        return Body.fail(self, i, reason)

    def on_broken(self) -> None:
        """Forget the broken call's half-read state (subclasses)."""


class BlockStream(MarkerStream):
    """A marker stream whose block gives its broken calls' text back once it is read."""

    def _close(self, body: Body) -> None:
        if body.status == DONE and isinstance(body, ResyncBody):
            opened = self._raw[0] if self._raw else self.marker
            for text, why in body.broken:
                self._notice(
                    "call-not-read",
                    f"a call in the block opening with {opened} is not a call ({why}); "
                    "it stays reply text",
                )
                self._text(text)
        super()._close(body)
