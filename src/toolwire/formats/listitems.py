"""The rest of a list item that is not a call, found so that the list's other calls are read.

A list of calls (``[{…}, {…}]`` after a marker: Granite, Nemotron, Firefunction, and the lists
learned from templates; or one call a line, MiniMax M1's) may hold one item a model got
wrong: a bare value (``15:30``), an object that is not valid JSON (``{"time": 15:30}``), an
object that is no call. Peers read the other calls; so does the engine, unless strict: the
item is left out, its text given back as text with a ``call-not-read`` notice. To go on, the
reader must find where the item ends: at the first ``,`` or the list's closing word at the
item's own level, outside strings (one call a line: where the item's object closes).
:class:`ItemEnd` finds it, fed the text as it streams, each character looked at once. A list
of Python calls (Llama 4's, LFM2's, Olmo 3's one a line) is the same with Python's brackets
and quotes: a call whose value is no literal (``bad(x=b'z')``) is left out so.
"""

from __future__ import annotations

import re

__all__ = ["MAX_ITEM", "ItemEnd"]

#: The rest of an item that is not a call is looked through this far at most: past it the
#: list is no list (its text goes out as text, not held while an end may come).
MAX_ITEM = 64 * 1024

#: What ends a string, or escapes in it, by its quote.
_IN_STRING = {q: re.compile("[" + re.escape(q) + r"\\]") for q in "\"'"}


class ItemEnd:
    """Finds the end of a list item from where its reading broke: ``depth`` objects and
    lists were open there (the item's own included), inside a string or not."""

    __slots__ = (
        "_depth",
        "_end",
        "_escape",
        "_lines",
        "_opens",
        "_python",
        "_quote",
        "_size",
        "_special",
        "_string",
        "failed",
        "parts",
    )

    def __init__(
        self,
        closer: str,
        depth: int = 0,
        in_string: bool = False,
        *,
        lines: bool = False,
        python: bool = False,
    ) -> None:
        self._depth = depth
        #: The quote of the string the item broke in, "" outside one.
        self._quote = '"' if in_string else ""
        #: Python's brackets and quotes (a list of Python calls), else JSON's.
        self._python = python
        self._opens = "{[(" if python else "{["
        #: Characters in the string being read (Python: an empty one may be a triple quote).
        self._string = 1 if in_string else 0
        self._size = 0
        #: The item's end cannot be found for certain (a triple-quoted Python string, whose
        #: quotes a bracket count cannot pair; an item past MAX_ITEM): the list is no list.
        self.failed = False
        #: Nothing is written between two items (one a line, MiniMax M1's): an item ends
        #: where the object or list it opened closes.
        self._lines = lines
        self._escape = False
        #: The first character of the list's closing word: it ends the item at its level.
        self._end = closer[:1] or "]"
        quotes = "\"'" if python else '"'
        brackets = "{}[]()" if python else "{}[]"
        self._special = re.compile("[" + re.escape(quotes + brackets + "," + self._end) + "]")
        #: The item's text read so far.
        self.parts: list[str] = []

    def feed(self, s: str, i: int) -> int:
        """Read from ``s[i]``: the index of the ``,`` or closing word that ends the item (not
        consumed), or ``len(s)`` when more is needed."""
        n = len(s)
        start = i
        if self._lines and self._depth == 0 and not self._quote:
            return i  # the item is whole already
        while i < n:
            if self._quote:
                if self._escape:
                    self._escape = False
                    self._string += 1
                    i += 1
                    continue
                m = _IN_STRING[self._quote].search(s, i)
                if m is None:
                    self._string += n - i
                    i = n
                    break
                self._string += m.start() - i
                i = m.end()
                if m.group() == "\\":
                    self._escape = True
                elif self._python and not self._string:
                    self.failed = True  # (an empty string: perhaps a triple quote's start)
                    return n
                else:
                    self._quote = ""
                continue
            m = self._special.search(s, i)
            if m is None:
                i = n
                break
            c = m.group()
            j = m.start()
            if c in "\"'":
                self._quote = c
                self._string = 0
            elif c in self._opens:
                self._depth += 1
            elif self._depth == 0 and c in "," + self._end:
                self.parts.append(s[start:j])
                return j
            elif c in "}])":
                self._depth = max(0, self._depth - 1)
                if self._lines and self._depth == 0:
                    self.parts.append(s[start : j + 1])
                    return j + 1
            i = j + 1
        self.parts.append(s[start:i])
        self._size += n - start
        self.failed = self.failed or self._size > MAX_ITEM  # (held no further: see MAX_ITEM)
        return n

    def text(self) -> str:
        return "".join(self.parts)
