"""MiniMax M2: ``<minimax:tool_call>`` around ``<invoke name="NAME">`` blocks.

In full: ``<minimax:tool_call>\\n<invoke name="NAME">\\n<parameter name="K">V</parameter>\\n``
``</invoke>\\n</minimax:tool_call>``, one block holding every call of the turn. A value is
the text between its tags, verbatim: the template writes strings as they are and other values
as their JSON, so the call is marked ``text_values`` and the argument pipeline types each
value by the tool's schema. A block with no ``<invoke>`` in it is not a call.

A model may write other attributes after the name (``<invoke name="f" description="…">``,
``<parameter name="k" type="string">``), echoing the tool's description; they say nothing the
name and the schema do not, so they are read past and named in an ``attributes-ignored``
notice. Anything else in a tag breaks the call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .base import Family
from .grammar import CallForm, lit
from .grammar_forms import xml_invoke
from .markerstream import OPEN, WS, MarkerStream
from .reasoning import THINK
from .samples import as_text
from .scan import Markers
from .textargs import NameReader, TextBody

__all__ = ["MiniMax"]

_OPEN_TAG = "<minimax:tool_call>"
_CLOSE_TAG = "</minimax:tool_call>"
_INVOKE = '<invoke name="'
_END_INVOKE = "</invoke>"
_PARAMETER = '<parameter name="'
_END_PARAMETER = "</parameter>"
_NAME_END = '">'
#: Attributes after the name: `` key="value"`` pairs, up to the tag's ``>``.
_ATTRS = re.compile(r'(?:\s+[A-Za-z_][\w:.-]*="[^"]*")*\s*')
#: The longest run of other attributes read.
_MAX_ATTRS = 512
_VALUE_END = Markers((_END_PARAMETER,))

_BLOCK, _NAME, _NAME_CLOSE, _IN_INVOKE, _PNAME, _PNAME_CLOSE, _IN_VALUE = range(7)


class _MiniMaxBody(TextBody):
    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.names = NameReader('"', "tool name")
        self.keys = NameReader('"', "parameter name")
        self.attrs: list[str] = []  # other attributes after a name, up to ">"
        self.quoted = False

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _IN_VALUE:
            i, complete = self.read_value(s, i, _VALUE_END, _IN_INVOKE)
            if not complete:
                return i, False
            return i, True
        if state in (_NAME, _PNAME):
            reader = self.names if state == _NAME else self.keys
            name, i = reader.read(self, s, i)
            if name is None or not self.named(name, state == _NAME, i):
                return i, False
            self.state = _NAME_CLOSE if state == _NAME else _PNAME_CLOSE
            return i, True
        if state in (_NAME_CLOSE, _PNAME_CLOSE):
            if not self.attrs:
                j = self.expect(s, i, _NAME_END, 'a name not closed by ">')
                if j >= 0:
                    self.state = _IN_INVOKE if state == _NAME_CLOSE else _IN_VALUE
                    return j, True
                if self.status != OPEN and s[i] == '"' and s[i + 1 : i + 2].isspace():
                    self.status, self.attrs = OPEN, ['"']  # other attributes follow
                    return i + 1, True
                return i, False
            return self._attributes(s, i)
        if s[i] in WS:
            i += 1
            return i, True
        if state == _BLOCK:
            return self.next_call(s, i, _INVOKE, _CLOSE_TAG, _NAME, "no <invoke> in the block")
        # _IN_INVOKE
        j, literal = self.expect_one(
            s, i, (_PARAMETER, _END_INVOKE), "expected <parameter name=…> or </invoke>"
        )
        if j < 0:
            return i, False
        if literal == _PARAMETER:
            self.state = _PNAME
        else:
            self.end_call()
            self.state = _BLOCK
        i = j
        return i, True

    def _attributes(self, s: str, i: int) -> tuple[int, bool]:
        """Other attributes after a name, up to the tag's ``>``: read past, and named."""
        j = i
        n = min(len(s), i + _MAX_ATTRS + 1)
        while j < n and (self.quoted or s[j] != ">"):
            self.quoted ^= s[j] == '"'
            j += 1
        self.attrs.append(s[i:j])
        text = "".join(self.attrs)
        if len(text) > _MAX_ATTRS:
            return self.fail(i, "a tag's attributes are too long"), False
        if j == len(s):
            return j, False
        if not _ATTRS.fullmatch(text[1:]):
            return self.fail(j, "malformed attributes in a tag"), False
        self.attrs = []
        if self.stream.strict:
            return self.fail(i, "attributes in a tag besides its name"), False
        self.stream._notice(
            "recovered-attributes-ignored", f"attributes read past in a tag:{text[1:]}"
        )
        self.state = _IN_INVOKE if self.state == _NAME_CLOSE else _IN_VALUE
        return j + 1, True


class MiniMaxStream(MarkerStream):
    marker = _OPEN_TAG
    body_class = _MiniMaxBody


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    params = "".join(f'<parameter name="{k}">{as_text(v)}</parameter>\n' for k, v in args.items())
    return f'<minimax:tool_call>\n<invoke name="{name}">\n{params}</invoke>\n</minimax:tool_call>'


_MINIMAX_FORM = CallForm(
    xml_invoke("", "invoke", "parameter"),
    open=lit("<minimax:tool_call>"),
    close=lit("</minimax:tool_call>"),
    triggers=("<minimax:tool_call>",),
)


class MiniMax(Family):
    name = "minimax"
    label = "MiniMax <minimax:tool_call><invoke name=…><parameter name=…> (MiniMax M2)"
    reasoning = THINK
    end_tokens = ("[e~[",)  # MiniMax M2
    kept_tokens = ("</minimax:tool_call>",)
    samples = (_sample,)
    markers = (_OPEN_TAG,)
    stream_class = MiniMaxStream
    grammar = _MINIMAX_FORM
