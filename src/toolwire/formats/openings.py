"""Calls that open with one of several markers and name their tool before a JSON object of
arguments: the machinery Functionary and Kimi K2 share.

:class:`OpeningsStream` takes several opening markers, and gives back without a notice the
text of a body that failed only because it was plainly no call markup; :class:`ArgsBody`
reads a call whose name comes first and whose arguments are one JSON object;
:func:`end_after_call` ends a reply where a block of complete calls may go on or end.
"""

from __future__ import annotations

from typing import ClassVar

from ..messages import ToolCall
from .jsonscan import ObjectScanner
from .markerstream import DONE, OPEN, WS, Body, MarkerStream
from .scan import Markers

__all__ = ["ArgsBody", "OpeningsStream", "end_after_call"]


class OpeningsStream(MarkerStream):
    """A marker stream whose calls open with any of ``openings`` (the first names it in
    notices); a body that sets ``quiet`` before failing gives its text back without a notice,
    for text that only began like a call (prose after ``Action:``, a reply with no recipient)."""

    openings: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: object) -> None:
        if "openings" in cls.__dict__:
            cls.marker = cls.openings[0]
        super().__init_subclass__(**kwargs)
        if "openings" in cls.__dict__:
            cls._opening = Markers(cls.openings)

    def _give_back(self, body: Body) -> None:
        opened = self._raw[0] if self._raw else ""
        quiet = getattr(body, "quiet", False) and not body.started
        if not quiet and opened not in self.openings[1:]:
            super()._give_back(body)
            return
        for index, cid in body.started:
            self._abort(index, cid, body.reason)
        if not quiet:  # name the opening this text had, not the family's first one
            self._notice(
                "call-not-read",
                f"text opening with {opened} is not a call ({body.reason}); it stays reply text",
            )
        self._text("".join(self._raw))
        self._body = None
        self._raw = []


class ArgsBody(Body):
    """A body that reads calls written as a name, then a JSON object of arguments."""

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.quiet = False
        self.name = ""
        self.index = -1
        self.call_id = ""
        self.scanner = ObjectScanner()

    @property
    def opened(self) -> str:
        """The opening marker this body follows ("" for a body the stream started with)."""
        raw = self.stream._raw
        return raw[0] if raw else ""

    def start_args(self, name: str, call_id: str | None = None) -> None:
        """Announce the call ``name``; its arguments object starts at the next character."""
        self.name = name
        self.index, self.call_id = self.announce(name, call_id)
        self.scanner = ObjectScanner()

    def read_args(self, s: str, i: int) -> tuple[int, bool]:
        """Feed the arguments object: ``(where it stopped, whether the call is complete)``.
        A complete call joins ``calls``; a broken one fails the body."""
        i = self.feed_args(self.scanner, self.index, s, i)
        if self.status != OPEN or not self.scanner.done:
            return i, False
        text = self.scanner.text()
        args = self.json_args(text, i)
        if args is None:
            return i, False
        self.calls.append((self.index, ToolCall(self.call_id, self.name, args, text.strip())))
        return i, True

    def object_start(self, s: str, i: int, problem: str) -> tuple[int, bool]:
        """Skip whitespace before the arguments object; ``(i, True)`` once ``s[i]`` is its
        ``{`` (the caller then announces the call), else the body fails or waits."""
        if s[i] in WS:
            return i + 1, False
        if s[i] != "{":
            self.fail(i, problem)
        return i, s[i] == "{"


def end_after_call(body: Body) -> None:
    """The reply ended where a block of complete calls may go on or end: the calls stand,
    and the piece held back for a closing marker (cut short) is reply text."""
    body.status = DONE
    body.stream._text(body.stream._raw[-1])
