"""MiniCPM5: ``<function name="NAME"><param name="K">V</param>…</function>``.

Written by openbmb MiniCPM5, and in the same grammar by MiniCPM4 (SGLang's MiniCPM4 XML
detector reads these calls). There is no wrapping tag: each call is one ``<function>``
element, written anywhere in the reply (the template puts a newline between two calls and
after any text). A value is the text between its tags, verbatim; a string holding ``<``,
``&`` or a newline is wrapped in ``<![CDATA[…]]>``, whose inside is the value (so it may hold
``</param>``). Nothing is escaped otherwise. The template writes other values with Jinja's
own rendering (``True``, Python's list syntax), so the call is marked ``text_values`` and the
argument pipeline types each value by the tool's schema. Thinking is ``<think>…</think>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Family
from .grammar import CallForm, Tagged, lit
from .markerstream import DONE, OPEN, WS, MarkerStream, expect_literal
from .samples import as_text
from .scan import Markers
from .textargs import NameReader, TextBody

__all__ = ["MiniCpm5"]

_OPEN_TAG = '<function name="'
_END_FUNCTION = "</function>"
_PARAM = '<param name="'
_END_PARAM = "</param>"
_NAME_END = '">'
_CDATA = "<![CDATA["
_PLAIN_END = Markers((_END_PARAM,))
_CDATA_END = Markers(("]]>",))

_NAME, _NAME_CLOSE, _PARAMS, _KEY, _KEY_CLOSE, _VALUE_START, _PLAIN, _IN_CDATA, _AFTER_CDATA = (
    range(9)
)


class _MiniCpmBody(TextBody):
    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.names = NameReader('"', "tool name")
        self.keys = NameReader('"', "parameter name")

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _PLAIN:
            return self.read_value(s, i, _PLAIN_END, _PARAMS)
        if state == _IN_CDATA:
            return self.read_value(s, i, _CDATA_END, _AFTER_CDATA)
        if state == _VALUE_START:  # a value in CDATA, or plain text
            status, j = expect_literal(s, i, _CDATA)
            if status == OPEN:
                return i, False
            self.state = _IN_CDATA if status == DONE else _PLAIN
            return j, True
        if state in (_NAME, _KEY):
            return self._name(s, i, state == _NAME)
        if state in (_NAME_CLOSE, _KEY_CLOSE):
            j = self.expect(s, i, _NAME_END, 'a name not closed by ">')
            if j < 0:
                return i, False
            self.state = _PARAMS if state == _NAME_CLOSE else _VALUE_START
            return j, True
        if state == _AFTER_CDATA:
            j = self.expect(s, i, _END_PARAM, "text after the CDATA block before </param>")
            if j < 0:
                return i, False
            self.state = _PARAMS
            return j, True
        # _PARAMS
        if s[i] in WS:
            return i + 1, True
        j, literal = self.expect_one(
            s, i, (_PARAM, _END_FUNCTION), "expected <param name=…> or </function>"
        )
        if j < 0:
            return i, False
        if literal == _PARAM:
            self.state = _KEY
            return j, True
        self.end_call()
        self.status = DONE
        return j, False

    def _name(self, s: str, i: int, is_tool: bool) -> tuple[int, bool]:
        """The tool's name (the call starts) or a parameter's (its value starts)."""
        reader = self.names if is_tool else self.keys
        name, i = reader.read(self, s, i)
        if name is None or not self.named(name, is_tool, i):
            return i, False
        self.state = _NAME_CLOSE if is_tool else _KEY_CLOSE
        return i, True


class MiniCpm5Stream(MarkerStream):
    marker = _OPEN_TAG
    body_class = _MiniCpmBody


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    params = "".join(
        f'<param name="{k}"><![CDATA[{v}]]></param>'
        if isinstance(v, str) and "\n" in v
        else f'<param name="{k}">{as_text(v)}</param>'
        for k, v in args.items()
    )
    return f'<function name="{name}">{params}</function>'


_MINICPM5_FORM = CallForm(
    Tagged(
        before=lit('<function name="'),
        between='"\\">"',
        after=lit("</function>"),
        arg_open=('<param name="{key}">',),
        arg_close=("</param>",),
    ),
    blocks=True,
    triggers=('<function name="',),
)


class MiniCpm5(Family):
    name = "minicpm5"
    label = "MiniCPM5 <function name=…><param name=…> (openbmb MiniCPM5)"
    samples = (_sample,)
    markers = (_OPEN_TAG,)
    stream_class = MiniCpm5Stream
    grammar = _MINICPM5_FORM
