"""Gemma 4's thinking channel, ``<|channel>thought\\n…<channel|>``: a stream layer for the
family declared as syntax (:data:`~toolwire.formats.declared.GEMMA4`), whose calls the engine
reads.

Everything in the channel is reasoning and never read for calls. The channel tokens are
special tokens, so a channel is recognised anywhere outside a call (the templates also write
an empty one, ``<|channel>thought\\n<channel|>``, into the generation prompt when thinking is
off), and a closing ``<channel|>`` with no channel open, which has nothing to close, is
dropped. Kept apart from the call syntax because it is no call syntax: a channel is how Gemma
writes its thinking, and the engine's thinking tags are blocks a reply opens and closes.
"""

from __future__ import annotations

from typing import Any

from ..events import ReasoningDelta
from .markerstream import FAILED, OPEN, MarkerStream, expect_any
from .scan import Markers

__all__ = ["GemmaChannel"]

_CHANNEL = "<|channel>"
_END_CHANNEL = "<channel|>"
_THOUGHT = "thought"
_CHANNELS = Markers((_CHANNEL, _END_CHANNEL))
_CHANNEL_END = Markers((_END_CHANNEL,))

_OUT, _HEADER, _NEWLINE, _THINKING = range(4)


class GemmaChannel(MarkerStream):
    """A stream layer (before the engine's stream in a family's stream class): Gemma's
    thinking channel split off first wherever no call is open, the calls read as the stream
    under it reads them."""

    # A prompt that opened thinking opened Gemma's channel: the reply starts inside it.
    splitter_opens = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._mode = _THINKING if self.reasoning_open else _OUT
        self._pending = ""  # a partial channel token, held until the next chunk decides

    def _reason(self, text: str) -> None:
        if text:
            self._out.append(ReasoningDelta(text))

    def _content(self, text: str) -> None:
        s = self._pending + text
        self._pending = ""
        i = 0
        n = len(s)
        while i < n:
            mode = self._mode
            if mode == _THINKING:
                j, end = _CHANNEL_END.scan(s, i)
                self._reason(s[i:j])
                if not end:
                    self._pending = s[j:]
                    return
                self._mode = _OUT
                i = j + len(end)
            elif mode == _HEADER:  # the channel's name: ``thought``, after a stray opener
                status, j, literal = expect_any(s, i, (_CHANNEL, _THOUGHT))
                if status == OPEN:
                    self._pending = s[i:]
                    return
                if status == FAILED:
                    self._mode = _THINKING
                elif literal == _THOUGHT:
                    self._mode = _NEWLINE
                i = j
            elif mode == _NEWLINE:
                self._mode = _THINKING
                i += s[i] == "\n"
            else:
                i = self._outside(s, i)

    def _outside(self, s: str, i: int) -> int:
        """Text outside any channel: calls, and the channel tokens where no call is open."""
        j, token = _CHANNELS.scan(s, i)
        if j > i:
            super()._content(s[i:j])
        if not token:
            self._pending = s[j:]
            return len(s)
        if self._body is not None:  # inside a call the token is the call's text
            super()._content(token)
        else:
            self._text(self._take_held())  # a partial call marker before it was text
            if token == _CHANNEL:
                self._mode = _HEADER
        return j + len(token)

    def _content_end(self) -> None:
        pending, self._pending = self._pending, ""
        if self._mode == _OUT:
            if pending:
                super()._content(pending)
        else:
            self._reason(pending)
        super()._content_end()
