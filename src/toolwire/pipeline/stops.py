"""A client's stop texts, cut where the reply's text reaches one: never inside a call.

Chat Completions' ``stop`` (Messages' ``stop_sequences``) ends the reply where the model
writes one of its texts. An engine that reads the model's raw text for calls would cut a
call's arguments at a stop text inside them (``"\\n\\n"`` in a file's content), so the
pipeline cuts instead (:func:`toolwire.pipeline.reply.plan_turn` keeps ``stop`` from such an
engine): only the reply's text is looked at, a call's events pass as they come, and the text
before the stop is given, the stop and all after it are not, the turn ending there with
``stop``. An engine whose own API reads the calls is given ``stop`` too, and cuts first.

Linear in the reply: each piece of text is searched once, with the few characters held
that may begin a stop text (at most the longest's length, less one).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .. import events as ev
from ..events import Event

__all__ = ["Stops"]


class Stops:
    """Push each event of a reply; what to pass on comes back. ``closed``: a stop text was
    reached, the turn's end is given: read no more."""

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._longest = max((len(s) for s in self._stops), default=0)
        firsts = "".join(sorted({s[0] for s in self._stops}))
        self._first = re.compile("[" + re.escape(firsts) + "]") if firsts else None
        self._held = ""
        self.closed = False

    def push(self, event: Event) -> list[Event]:
        if self.closed:
            return []
        if not self._stops:
            return [event]
        if not isinstance(event, ev.TextDelta):
            # a call, thinking or the end: the text before it is whole
            out: list[Event] = [ev.TextDelta(self._held)] if self._held else []
            self._held = ""
            return [*out, event]
        text = self._held + event.text
        # the stop the model finished writing first (as an engine sees it, a token at a
        # time), whatever the pieces: "abc" holds "b" before it is done with "abc"
        found = [(at + len(s), at, s) for s in self._stops if (at := text.find(s)) >= 0]
        if found:
            self.closed = True
            _, at, stop = min(found)
            return [*([ev.TextDelta(text[:at])] if at else []), ev.Done("stop", None, stop)]
        keep = self._may_begin(text)
        self._held = text[keep:]
        return [ev.TextDelta(text[:keep])] if keep else []

    def _may_begin(self, text: str) -> int:
        """Where the tail that may be the start of a stop text begins (``len(text)``: none)."""
        assert self._first is not None
        start = max(0, len(text) - self._longest + 1)
        while True:
            hit = self._first.search(text, start)
            if hit is None:
                return len(text)
            tail = text[hit.start() :]
            if any(s.startswith(tail) for s in self._stops):
                return hit.start()
            start = hit.start() + 1
