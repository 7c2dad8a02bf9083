"""A stream layer for a family whose markup a model quotes in code fences: inside a ``` or
``~~~`` fence, the family's markup is prose, never a call (a model showing what a call looks
like, as DeepSeek V4's users ask it to); it stays text, with no notice, as SGLang leaves it.

The reply's text is followed line by line: a line opening with ``` or ``~~~`` opens a fence,
and one opening with the same fence closes it. Only each line's head is looked at, so
following is linear in the text. A layer, so no other family pays for it.
"""

from __future__ import annotations

from typing import Any

from .markerstream import FAILED, Body, MarkerStream

__all__ = ["QuotedInFences"]

#: The lines that open and close a code fence.
_FENCES = ("```", "~~~")
#: How much of a line's head is looked at (indentation and the fence).
_HEAD = 8


class _Quoted(Body):
    """The markup after a marker inside a fence: no call, given back as it is."""

    def feed(self, s: str, i: int) -> int:
        self.status = FAILED
        self.reason = "markup quoted in a code fence"
        return i


class QuotedInFences(MarkerStream):
    """The layer (see the module's doc)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The fence the reply's text is inside ("" when none), and the head of the
        #: current line while it may still open or close one (None once it cannot).
        self._fence = ""
        self._head: str | None = ""

    def new_body(self) -> Body:
        if self._fence:
            return _Quoted(self)
        return super().new_body()

    def _give_back(self, body: Body) -> None:
        if isinstance(body, _Quoted):  # quoted: it was never meant as a call
            self._text("".join(self._raw))
            self._body = None
            self._raw = []
            return
        super()._give_back(body)

    def _text(self, text: str) -> None:
        self._follow(text)
        super()._text(text)

    def _follow(self, text: str) -> None:
        """Follow the fences in ``text``, each line's head only."""
        pos, n = 0, len(text)
        while pos <= n:
            line = text.find("\n", pos)
            end = n if line < 0 else line
            if self._head is not None:
                self._head += text[pos : min(end, pos + _HEAD)]
                head = self._head.lstrip(" \t")
                if len(head) >= 3 or line >= 0 or len(self._head) > _HEAD:
                    fence = head[:3]
                    if fence in _FENCES and not self._fence:
                        self._fence = fence
                    elif fence == self._fence:
                        self._fence = ""
                    self._head = None
            if line < 0:
                return
            self._head = ""
            pos = line + 1
