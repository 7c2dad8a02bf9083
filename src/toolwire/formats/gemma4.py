"""Gemma 4: ``<|tool_call>call:NAME{key:<|"|>text<|"|>,n:3}<tool_call|>``, one call per marker.

The arguments are Gemma's own literal syntax: keys bare (or between ``<|"|>``), strings
between ``<|"|>`` delimiters verbatim (no escapes), numbers, ``true``/``false``/``null``,
lists and mappings, nested. :mod:`toolwire.formats.pyliteral` reads them by hand, as they
stream; the call's arguments are the JSON values they spell, untyped, and its argument text
is their JSON.

Thinking is Gemma's channel, ``<|channel>thought\\n…<channel|>``: everything in it is
reasoning and never read for calls. The channel tokens are special tokens, so a channel is
recognised anywhere outside a call (the templates also write an empty one,
``<|channel>thought\\n<channel|>``, into the generation prompt when thinking is off), and a
closing ``<channel|>`` with no channel open, which has nothing to close, is dropped.

A turn that calls tools ends with ``<|tool_response>`` (the engine's cue to run them), one
without calls with ``<turn|>``; both are end-of-turn tokens, not part of the grammar.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..events import ReasoningDelta
from .base import Family
from .grammar_forms import tag_block
from .grammar_literals import Gemma
from .markerstream import DONE, FAILED, OPEN, WS, MarkerStream, expect_any
from .pyliteral import GEMMA, LiteralBody
from .scan import Markers
from .textargs import NameReader

__all__ = ["Gemma4"]

_OPEN_TAG = "<|tool_call>"
_CLOSE_TAG = "<tool_call|>"
_CALL = "call:"
_CHANNEL = "<|channel>"
_END_CHANNEL = "<channel|>"
_THOUGHT = "thought"
_CHANNELS = Markers((_CHANNEL, _END_CHANNEL))
_CHANNEL_END = Markers((_END_CHANNEL,))

_PREFIX, _NAME, _ARGS, _CLOSE = range(4)


class _Gemma4Body(LiteralBody):
    dialect = GEMMA

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.names = NameReader("{", "tool name")

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _PREFIX:
            j = self.expect(s, i, _CALL, f"no {_CALL} after {_OPEN_TAG}")
            if j < 0:
                return i, False
            self.state = _NAME
            return j, True
        if state == _NAME:
            name, j = self.names.read(self, s, i)
            if name is None:
                return j, False
            self.open_call(name)
            self.start_value()
            self.state = _ARGS
            return j, True
        if state == _ARGS:
            return self._args(s, i)
        if s[i] in WS:
            return i + 1, True
        j = self.expect(s, i, _CLOSE_TAG, f"text after the arguments before {_CLOSE_TAG}")
        if j < 0:
            return i, False
        self.status = DONE
        return j, False

    def _args(self, s: str, i: int) -> tuple[int, bool]:
        j, complete = self.feed_value(s, i, "the arguments")
        if not complete:
            return j, False
        assert self.reader is not None
        if not isinstance(self.reader.value, dict):
            return self.fail(i, "the arguments are not a mapping"), False
        self.end_call(self.reader.value)
        self.state = _CLOSE
        return j, True


_OUT, _HEADER, _NEWLINE, _THINKING = range(4)


class Gemma4Stream(MarkerStream):
    """Calls as :class:`MarkerStream` reads them, with Gemma's thinking channel split off
    first wherever no call is open."""

    marker = _OPEN_TAG
    body_class = _Gemma4Body

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


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    inner = ",".join(
        f'{k}:<|"|>{v}<|"|>' if isinstance(v, str) else f"{k}:{json.dumps(v)}"
        for k, v in args.items()
    )
    return "<|tool_call>call:" + name + "{" + inner + "}<tool_call|>"


_GEMMA4_FORM = tag_block("<|tool_call>", "<tool_call|>", Gemma())


class Gemma4(Family):
    name = "gemma4"
    label = 'Gemma 4 <|tool_call>call:NAME{key:<|"|>…<|"|>}<tool_call|> (Gemma 4)'
    # a turn that calls tools stops at <|tool_response> for the results
    end_tokens = ("<|tool_response>", "<turn|>")
    drops_tokens = True
    kept_tokens = ("<tool_call|>", '<|"|>')
    samples = (_sample,)
    markers = (_OPEN_TAG,)
    stream_class = Gemma4Stream
    grammar = _GEMMA4_FORM
