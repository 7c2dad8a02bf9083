"""Calls that open with one of several markers (Kimi K2's section, or a call alone):
:class:`OpeningsStream` takes several opening markers, and gives back without a notice the
text of a body that failed only because it was plainly no call markup.
"""

from __future__ import annotations

from typing import ClassVar

from .markerstream import Body, MarkerStream
from .scan import Markers

__all__ = ["OpeningsStream"]


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
