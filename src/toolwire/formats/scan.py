"""Finding markers in streamed text, and holding back what may be the start of one.

Every reader that waits for a marker (a call's opening tag, a block's closer, the end of a
thinking block) does the same two things with each chunk: find the first of its markers, and
when there is none, hold back a trailing piece that the next chunk may complete into one.
:class:`Markers` does both, once for all of them. The search is one pass over the text for
all markers together (a compiled alternation), so a chunk holding many markers is still read
once, and the piece held back is never longer than the longest marker.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable

__all__ = ["Markers", "markers", "special_words"]


class Markers:
    """A fixed set of marker texts to find in streamed text."""

    def __init__(self, markers: Iterable[str]) -> None:
        found = tuple(dict.fromkeys(m for m in markers if m))
        if not found:
            raise ValueError("no markers")
        self.markers = found
        self._longest_start = max(len(m) for m in found) - 1
        #: The characters a marker's proper start may end with: text ending with none of
        #: them holds nothing back (most chunks, decided at a glance).
        self._start_ends: frozenset[str] | None = frozenset(
            m[k - 1] for m in found for k in range(1, len(m))
        )

    # The patterns are compiled on first use: every family's markers are made when the
    # families are declared, and a command that reads one family's reply compiles its own.

    @functools.cached_property
    def _search(self) -> Callable[..., re.Match[str] | None]:
        # longest first: where two markers start at the same place, the longer one is meant
        longest = sorted(self.markers, key=len, reverse=True)
        return re.compile("|".join(map(re.escape, longest))).search

    @functools.cached_property
    def _end(self) -> Callable[..., re.Match[str] | None]:
        # a proper start of a marker at the very end of the text; the leftmost is the longest
        found = self.markers
        starts = sorted({m[:k] for m in found for k in range(1, len(m))}, key=len, reverse=True)
        return re.compile("(?:" + "|".join(map(re.escape, starts)) + r")\Z").search

    @functools.cached_property
    def _first(self) -> re.Pattern[str]:
        """A marker's first character: a start within reach of the text's end holds one."""
        return re.compile("[" + "".join(sorted({re.escape(m[0]) for m in self.markers})) + "]")

    def find(self, text: str, start: int = 0, end: int | None = None) -> tuple[int, str]:
        """The first marker in ``text[start:end]``: ``(position, marker)``, or ``(-1, "")``."""
        m = self._search(text, start) if end is None else self._search(text, start, end)
        if m is None:
            return -1, ""
        return m.start(), m.group()

    def scan(self, text: str, start: int = 0, end: int | None = None) -> tuple[int, str]:
        """Read ``text[start:end]`` up to the first marker: ``(position, marker)``.

        With no marker in it, ``marker`` is ``""`` and ``position`` is where the piece to hold
        back begins: ``text[start:position]`` is free of markers either way. ``end`` bounds
        the search for a reader that wants a marker only within reach (a header's end).
        """
        j, marker = self.find(text, start, end)
        if marker:
            return j, marker
        stop = len(text) if end is None else min(end, len(text))
        return stop - self.held(text, start, stop), ""

    def held(self, text: str, start: int = 0, end: int | None = None) -> int:
        """Length of the longest end of ``text[start:end]`` that could begin a marker.

        That end must be held back: the next chunk may complete the marker.
        """
        if self._longest_start == 0:
            return 0  # one-character markers: nothing can be partial
        stop = len(text) if end is None else min(end, len(text))
        ends = self._start_ends
        reach = max(start, stop - self._longest_start)
        if stop <= start or (
            ends is not None
            and (text[stop - 1] not in ends or not self._first.search(text, reach, stop))
        ):
            return 0
        m = self._end(text, reach, stop)
        return 0 if m is None else m.end() - m.start()


@functools.lru_cache(maxsize=512)
def markers(texts: tuple[str, ...]) -> Markers:
    """The :class:`Markers` of ``texts``, made once for each distinct set: a reader made per
    reply (one per request in the gateway) would otherwise compile the same patterns for
    every reply. Markers hold no state of a reading, so one serves every reader."""
    return Markers(texts)


#: A word that reads as a special token: ``<|…|>``, ``<｜…｜>`` (or its head ``<｜…｜``, DSML's
#: prefix of every tag), ``[…]`` in capitals, or a closing tag ``</…>`` (models are trained to
#: write these as one token each).
_SPECIAL = re.compile(
    r"<\|[^<>]*\|>|<｜[^<>｜]*｜>?|\[[A-Z_]+\]|</?[A-Za-z_][\w:|-]*>"
    # Gemma's half-barred tokens: <|tool_call>, <tool_call|>; MiniMax M3's ]<]minimax[>[
    r"|<\|[A-Za-z_][\w:-]*>|<[A-Za-z_][\w:-]*\|>|\]<\][a-z]+\[>\["
)


def special_words(words: tuple[str, ...]) -> tuple[str, ...]:
    """The special tokens among ``words``, each once, in order."""
    found: list[str] = []
    for word in words:
        found.extend(m.group(0) for m in _SPECIAL.finditer(word))
    return tuple(dict.fromkeys(found))
