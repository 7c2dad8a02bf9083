"""LFM2's calls (LFM2, LFM2.5): a Python call list inside its own tokens, anywhere in the
reply.

``<|tool_call_start|>[get_weather(city='Paris', days=3), other(a=1)]<|tool_call_end|>``, read
by :mod:`toolwire.formats.pycalls`. Some LFM2 models write the same block as JSON instead, a
list of ``{"name": NAME, "arguments": {...}}`` objects or one such object
(``<|tool_call_start|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]
<|tool_call_end|>``): SGLang's LFM2 reader takes both, and so does this one. The first
character inside the list decides which (``{`` opens JSON, a name opens a Python call), so
nothing is read twice; the JSON objects are read as every JSON family reads its calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Family
from .callshape import CallShape
from .grammar import AnyOf, CallForm, lit
from .grammar_forms import json_list
from .grammar_literals import Pythonic as PythonCalls
from .jsoncall import JsonCall
from .markerstream import DONE, WS, Body, MarkerStream
from .pycalls import CallListBody, loose_notice, python_call

__all__ = ["Lfm2"]

_LFM2_OPEN = "<|tool_call_start|>"
_LFM2_CLOSE = "<|tool_call_end|>"


class _Lfm2PythonBody(CallListBody):
    end = _LFM2_CLOSE


#: LFM2's JSON form: exactly ``name`` and ``arguments``, as SGLang's reader shows it.
_LFM2_JSON = CallShape()
_L_START, _L_LIST, _L_PYTHON, _L_ITEM, _L_NEXT, _L_END = range(6)


class _Lfm2Body(Body):
    """One ``<|tool_call_start|>`` block, in either of LFM2's forms: after ``[``, a name
    hands the rest to the Python list's reader, ``{`` reads JSON call objects; a ``{`` right
    after the marker is one JSON call."""

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.python: _Lfm2PythonBody | None = None
        self.item: JsonCall | None = None
        self.listed = True  # the JSON calls are in a list (else one object)

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _L_PYTHON:
            return self._python(s, i)
        if state == _L_ITEM:
            assert self.item is not None
            i, ended = self.feed_json_call(self.item, s, i, "a call is not a JSON object")
            if ended:
                self.item = None
                self.state = _L_NEXT if self.listed else _L_END
            return i, ended
        c = s[i]
        if c in WS:
            return i + 1, True
        if state == _L_START:
            if c == "[":
                self.state = _L_LIST
                return i + 1, True
            if c != "{":
                return self.fail(i, "no [ opens the call list"), False
            self.listed = False
            return self._item(i)
        if state == _L_LIST:  # the first item decides the form
            if c == "{":
                return self._item(i)
            if self.calls:  # one list, one form
                return self.fail(i, "a JSON call list goes on with no JSON object"), False
            python = self.python = _Lfm2PythonBody(self.stream)
            python.opened()  # its [ is read
            python.started, python.calls = self.started, self.calls  # one record of calls
            self.state = _L_PYTHON
            return self._python(s, i)
        if state == _L_NEXT:
            if c == ",":
                self.state = _L_LIST
                return i + 1, True
            if c != "]":
                return self.fail(i, "expected , or ] in the call list"), False
            self.state = _L_END
            return i + 1, True
        j = self.expect(s, i, _LFM2_CLOSE, f"text after the calls before {_LFM2_CLOSE}")
        if j < 0:
            return i, False
        self.status = DONE
        return j, False

    def _item(self, i: int) -> tuple[int, bool]:
        """A JSON call object starts at ``s[i]`` (its ``{``, read by the call's scanner)."""
        self.item = JsonCall(self.stream, _LFM2_JSON)
        self.state = _L_ITEM
        return i, True

    def _python(self, s: str, i: int) -> tuple[int, bool]:
        python = self.python
        assert python is not None
        j = python.feed(s, i)
        self.status, self.reason = python.status, python.reason
        return j, False

    def end_of_reply(self) -> None:
        if self.python is not None:
            self.python.end_of_reply()
            self.status, self.reason = self.python.status, self.python.reason
            return
        super().end_of_reply()


class Lfm2Stream(MarkerStream):
    marker = _LFM2_OPEN
    body_class = _Lfm2Body

    def _close(self, body: Body) -> None:
        if body.status == DONE and isinstance(body, _Lfm2Body):
            for index, call in body.calls:
                loose_notice(self, body.python, index, call.name)
        super()._close(body)


def _lfm2_sample(name: str, args: Mapping[str, Any], index: int) -> str:
    return _LFM2_OPEN + "[" + python_call(name, args) + "]" + _LFM2_CLOSE


_LFM2_FORM = AnyOf(
    (
        CallForm(
            PythonCalls(),
            open=f'{lit(_LFM2_OPEN)} space "["',
            close=f'"]" space {lit(_LFM2_CLOSE)}',
            triggers=(_LFM2_OPEN,),
            sep='","',
        ),
        json_list(_LFM2_OPEN, end=_LFM2_CLOSE),
    )
)


class Lfm2(Family):
    name = "lfm2"
    label = "LFM2 <|tool_call_start|>[NAME(key=value)]<|tool_call_end|> (LFM2, LFM2.5)"
    kept_tokens = ("<|tool_call_end|>",)
    samples = (_lfm2_sample,)
    markers = (_LFM2_OPEN,)
    #: LFM2 8B's template shows no calls; its prompt lists the tools between these tokens.
    prompt_markers = ("<|tool_list_start|>",)
    stream_class = Lfm2Stream
    grammar = _LFM2_FORM
