"""Qwen XML: ``<tool_call>`` around ``<function=NAME>`` and ``<parameter=P>`` blocks.

In full: ``<tool_call>\\n<function=NAME>\\n<parameter=P>\\nvalue\\n</parameter>\\n``
``</function>\\n</tool_call>``.

Written by Qwen3-Coder, Qwen3.5/3.6 and Nemotron-3-Nano. A parameter's value is the text
between its tags, less the one newline the template puts on each side, several lines
included. The grammar writes every value as text, so the call's arguments are that text
(``text_values`` is set on the call): the argument pipeline reads a value for a parameter
that is not text by the tool's schema, where every change is named. The argument text streams
as the JSON of that mapping of strings as it grows. JSON inside ``<tool_call>`` is not this
family's call.

Qwen3-Coder sometimes leaves out the opening ``<tool_call>`` but writes the rest:
``<function=NAME>…</function>\n</tool_call>``. Unless strict, that is read as the call it is
(the closing tag confirms it), and the repair is named in a ``recovered-unopened-call``
notice. It also writes the call bare, with neither tag (vLLM and SGLang read that): a
``<function=NAME>…</function>`` naming a declared tool, that the reply ends after or that
another bare call follows, is read under the same notice. Anything else after the bare
``</function>`` (prose), or a name no declared tool has, and it stays text: text that never
became a call is given back without a notice.

A reply that ends inside a call (a length limit, a stop) is never a call lost in silence. A
call whose ``</function>`` came, so that every argument is whole, and only ``</tool_call>``
(or part of it) is missing, is read unless strict, named in a ``recovered-block-unclosed``
notice, as vLLM reads it. Cut anywhere before, the call is withdrawn and its text follows as
text, with a ``call-abandoned`` notice: a value may be cut short, and nothing half-written
runs.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from . import grammar_forms as forms
from .base import Family
from .markerstream import DONE, OPEN, WS, Body, MarkerStream
from .scan import Markers
from .textargs import TextArgs, TextBody

__all__ = ["QwenXml"]

_OPEN_TAG = "<tool_call>"
_FUNCTION = "<function="
_PARAMETER = "<parameter="
_END_PARAMETER = "</parameter>"
_END_FUNCTION = "</function>"
_CLOSE_TAG = "</tool_call>"
#: The tags that may follow a parameter's closing tag.
_AFTER_VALUE = (_PARAMETER, _END_FUNCTION)
#: A closing tag drifted on its own line (``</parameter1>``, ``</parameter_function>``, a
#: ``</parameter`` without its ``>``), that the next parameter or ``</function>`` follows.
_DRIFTED = r"\r?\n</parameter(?!>)[^\s<>]{0,32}>?[ \t]*"
_NEXT_TAG = r"\r?\n(?:" + "|".join(map(re.escape, _AFTER_VALUE)) + ")"
_NEXT_TAG_START = (
    r"(?:\r|\r?\n(?:"
    + "|".join(re.escape(t[:k]) for t in _AFTER_VALUE for k in range(len(t), 0, -1))
    + r")?)?"
)


class _ValueEnd(Markers):
    """Where a value ends: its ``</parameter>`` (less one newline before it) or, unless
    strict, a drifted closing tag on its own line before the next tag (what SGLang strips).
    A drifted tag is named ``recovered-misspelt-tag`` by the body that meets it."""

    def __init__(self, drift: bool) -> None:
        super().__init__(("\r\n" + _END_PARAMETER, "\n" + _END_PARAMETER, _END_PARAMETER))
        self._drift = re.compile(_DRIFTED + "(?=" + _NEXT_TAG + ")").search if drift else None
        self._drift_end = re.compile(_DRIFTED + _NEXT_TAG_START + r"\Z").search

    def find(self, text: str, start: int = 0, end: int | None = None) -> tuple[int, str]:
        j, marker = super().find(text, start, end)
        if self._drift is None:
            return j, marker
        stop = len(text) if end is None else end
        m = self._drift(text, start, stop if j < 0 else j + len(marker))
        if m is not None and (j < 0 or m.start() < j):
            return m.start(), m.group()
        return j, marker

    def held(self, text: str, start: int = 0, end: int | None = None) -> int:
        held = super().held(text, start, end)
        if self._drift is None:
            return held
        stop = len(text) if end is None else min(end, len(text))
        m = self._drift_end(text, max(start, stop - 80), stop)
        return held if m is None else max(held, stop - m.start())


#: A value ends at its closing tag, less one newline before it.
_VALUE_END = _ValueEnd(drift=False)
_VALUE_END_DRIFT = _ValueEnd(drift=True)
_MAX_NAME = 256
#: Unless strict, a call may also open at ``<function=`` (its ``<tool_call>`` left out).
_UNOPENED = Markers((_OPEN_TAG, _FUNCTION))

_PRE, _NAME, _BETWEEN, _PNAME, _VALUE_START, _VALUE, _POST = range(7)


class _XmlBody(TextBody):
    # The tags around the call and where a value ends: another family (Seed-OSS) writes the
    # same body inside its own tags, its values without the newlines Qwen puts around them.
    open_tag: ClassVar[str] = _OPEN_TAG
    close_tag: ClassVar[str] = _CLOSE_TAG
    value_end: ClassVar[Markers] = _VALUE_END
    trims_newlines: ClassVar[bool] = True
    #: A call whose </function> came, the reply ending before its closing tag, is read
    #: (what vLLM does for Qwen; Seed-OSS keeps it as text).
    reads_unclosed: ClassVar[bool] = True

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.name_parts: list[str] = []
        #: The call opened at ``<function=``: its ``<tool_call>`` was left out.
        self.unopened = False
        #: The reply ended inside the call.
        self.cut_short = False
        #: Drifted closing tags that ended the current call's values, named once it is read.
        self.drifted: list[str] = []

    def end_call(self) -> None:
        for tag in self.drifted:
            self.stream._notice(
                "recovered-misspelt-tag", f"read {tag} as the {_END_PARAMETER} it stands for"
            )
        self.drifted = []
        super().end_call()

    def _read_name(self, s: str, i: int) -> tuple[str | None, int]:
        """Read up to ``>``: the name when it closes, else None (more needed, or failed)."""
        j = s.find(">", i)
        stop = len(s) if j < 0 else j
        piece = s[i:stop]
        if (
            any(c in piece for c in "<= \t\r\n")
            or sum(map(len, self.name_parts)) + len(piece) > _MAX_NAME
        ):
            self.fail(i, "a malformed function or parameter name")
            return None, i
        self.name_parts.append(piece)
        if j < 0:
            return None, stop
        name = "".join(self.name_parts)
        self.name_parts = []
        if not name:
            self.fail(j, "an empty function or parameter name")
            return None, j
        return name, j + 1

    def step(self, s: str, i: int) -> tuple[int, bool]:
        n = len(s)
        state = self.state
        if state == _VALUE:
            ends = self.value_end
            if ends is _VALUE_END and not self.stream.strict:
                ends = _VALUE_END_DRIFT
            start = i
            i, complete = self.read_value(s, i, ends, _BETWEEN)
            if not complete:
                return i, False
            if ends is _VALUE_END_DRIFT:
                _, tag = ends.find(s, start, i)
                if not tag.endswith(_END_PARAMETER):
                    self.drifted.append(tag.strip())
            return i, True
        if state == _VALUE_START:  # one newline (\n or \r\n) after the tag is not the value's
            if s[i] == "\r":
                if i + 1 >= n:
                    return i, False  # wait: is it \r\n?
                if s[i + 1] == "\n":
                    i += 1
            if s[i] == "\n":
                i += 1
            self.state = _VALUE
            return i, True
        if state in (_NAME, _PNAME):
            name, i = self._read_name(s, i)
            if self.status != OPEN:
                return i, False
            if name is None:
                return i, False
            if state == _NAME:
                if self.unopened and self.stream.tools.known and not self.stream.tools.has(name):
                    self.fail(i, f"{name!r} is not a declared tool")
                    return i, False
                self.call = TextArgs.start(self, name)
                self.state = _BETWEEN
            else:
                assert self.call is not None
                self.call.begin(name)  # a repeated parameter: the last value counts
                self.state = _VALUE_START if self.trims_newlines else _VALUE
            return i, True
        if state == _PRE and self.stream._raw[:1] == [_FUNCTION]:  # <tool_call> left out
            self.unopened = True
            self.state = _NAME
            return i, True
        if s[i] in WS:
            i += 1
            return i, True
        if state == _PRE:
            j = self.expect(s, i, _FUNCTION, f"no <function=…> after {self.open_tag}")
            if j < 0:
                return i, False
            self.state = _NAME
            i = j
        elif state == _BETWEEN:
            j, literal = self.expect_one(
                s, i, (_PARAMETER, _END_FUNCTION), "expected <parameter=…> or </function>"
            )
            if j < 0:
                return i, False
            self.state = _PNAME if literal == _PARAMETER else _POST
            i = j
        else:  # _POST
            if self.unopened:
                j, literal = self.expect_one(
                    s,
                    i,
                    (self.close_tag, _FUNCTION),
                    f"text after </function> before {self.close_tag}",
                )
                if j >= 0 and literal == _FUNCTION:  # the next bare call: this one is whole
                    return self._end_bare(i), False
            else:
                j = self.expect(
                    s, i, self.close_tag, f"text after </function> before {self.close_tag}"
                )
            if j < 0:
                return i, False
            if self.unopened:
                self.stream._notice(
                    "recovered-unopened-call", "read a call written without its opening <tool_call>"
                )
            self.end_call()
            self.status = DONE
            return j, False
        return i, True

    def _bare_ok(self) -> bool:
        """A call with neither ``<tool_call>`` nor ``</tool_call>`` is read only when it names
        a declared tool, unless strict: nothing else confirms it is a call."""
        assert self.call is not None
        tools = self.stream.tools
        return not self.stream.strict and tools.known and tools.has(self.call.name)

    def _end_bare(self, i: int) -> int:
        """The bare call before ``s[i]`` is whole: read it (named), or fail it to text."""
        if not self._bare_ok():
            return self.fail(i, f"text after </function> before {self.close_tag}")
        self.stream._notice(
            "recovered-unopened-call",
            "read a call written as <function=…>…</function> with neither <tool_call> nor "
            "</tool_call>",
        )
        self.end_call()
        self.status = DONE
        return i

    def end_of_reply(self) -> None:
        if self.state == _POST and self.call is not None and self.unopened and self._bare_ok():
            held = self.stream._raw[-1]  # what the reply ended on, held back: not this call's
            if not self.close_tag.startswith(held):
                self.stream._text(held)  # the start of another bare call, cut short
            self._end_bare(0)  # a bare call the reply ends after
            return
        whole = self.state == _POST and self.call is not None and not self.unopened
        if whole and self.reads_unclosed and not self.stream.strict:
            self.stream._notice(
                "recovered-block-unclosed",
                f"read a call whose {self.close_tag} never came: the reply ended after its "
                "</function>",
            )
            self.end_call()
            self.status = DONE
            return
        super().end_of_reply()
        self.cut_short = True


class _XmlStream(MarkerStream):
    """A stream of :class:`_XmlBody` calls: one the reply cut short is an abandoned call."""

    def _give_back(self, body: Body) -> None:
        if not getattr(body, "cut_short", False):
            super()._give_back(body)
            return
        for index, cid in body.started:
            self._abort(index, cid, body.reason)
        self._notice(
            "call-abandoned",
            f"a call opening with {self._raw[0]} was cut short by the end of the reply; "
            "its text follows as text",
        )
        self._text("".join(self._raw))
        self._body = None
        self._raw = []


class QwenXmlStream(_XmlStream):
    marker = _OPEN_TAG
    body_class = _XmlBody

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.strict:
            self._opening = _UNOPENED  # type: ignore[misc]  # per reader: strict or not

    def _give_back(self, body: Body) -> None:
        if self._raw[:1] == [_FUNCTION] and not body.started:
            self._text("".join(self._raw))  # a bare <function= that never became a call
            self._body = None
            self._raw = []
            return
        super()._give_back(body)


class QwenXml(Family):
    name = "qwen-xml"
    label = "Qwen XML <function=…><parameter=…> (Qwen3-Coder, Qwen3.5/3.6, Nemotron-3-Nano)"
    markers = (_OPEN_TAG,)
    stream_class = QwenXmlStream
    grammar = forms.QWEN_XML
