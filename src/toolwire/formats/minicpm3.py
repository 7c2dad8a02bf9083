"""MiniCPM3: Python calls, one a line, in a fenced code block between call tokens.

In full, as its template writes a turn's calls::

    <|tool_call_start|>
    ```python
    get_weather(city="Paris",days=3)
    set_alarm(time="07:30",loud=true)
    ```
    <|tool_call_end|>
    the answer, if any

Written by openbmb MiniCPM3 (vLLM's example template for it). The block may follow thinking
(``<|thought_start|>\\n…\\n<|thought_end|>\\n``, a reasoning block like ``<think>``) and is
followed by the reply's text; the turn ends with ``<|im_end|>``.

LFM2 opens its calls with the same token, but writes a bracketed list (``[f(a=1)]``) or JSON
right after it: the fence is what tells the two apart, so neither reads the other's block
(a block that is neither stays text, with a notice, in both).

Each call is ``NAME(key=value, ...)``: keyword arguments only, each value written by Jinja's
``tojson``, so JSON literals (``true``, ``null``, JSON-escaped strings), which the Python
dialect of :mod:`toolwire.formats.pyliteral` reads, together with Python's own (``True``,
``'x'``) that a model may write as the code block invites. Nothing is evaluated. A call
stands on a line of its own (a line break before each, and before the closing fence), as
the template and its prompt write them; a positional value makes the block text with a notice
(mapping it to the schema's properties by order would guess). The arguments are handed on as
the JSON values they spell, untyped, and their JSON text streams while the call is read; the
calls end when the block closes, so a block the reply cuts short gives back its text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .base import Family
from .grammar import Body, CallForm, Rules, lit, properties_of, sequence_of
from .markerstream import DONE, OPEN, WS, MarkerStream
from .pycalls import LiteralBody
from .pyliteral import PYTHON
from .reasoning import ReasoningTags
from .textargs import NameReader

__all__ = ["MiniCpm3"]

_CALL_START = "<|tool_call_start|>"
_CALL_END = "<|tool_call_end|>"
_FENCE_OPEN = "```python"
_FENCE_CLOSE = "```"
#: A tool name: dotted words (``Calendar.create_event``), hyphens allowed as in tool names.
_TOOL_NAME = re.compile(r"[A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)*\Z")
_ARG_NAME = re.compile(r"[A-Za-z_$][\w$\-]*\Z")

#: In a string, what may end it or holds what JSON refuses, by the quote that closes it:
#: every control character, but a triple-quoted string's own line breaks and tabs.
_CONTROLS = r"\x00-\x1f"
_TRIPLE_CONTROLS = r"\x00-\x08\x0b\x0c\x0e-\x1f"
_IN_STRING = {
    q: re.compile(f"[{q[0]}\\\\{_CONTROLS if len(q) == 1 else _TRIPLE_CONTROLS}]")
    for q in ("'", '"', "'''", '"""')
}
_QUOTE = re.compile("['\"]")


class _StringControls:
    """Finds raw control characters inside the strings of one value's text, fed in the
    pieces it is read in (each once, so linear).

    The template writes every value with ``tojson``, whose strings hold none; a raw line
    break or tab in a quoted string is the repair every JSON family names
    (``recovered-raw-controls``, which strict refuses), any other control character no
    string the grammar writes. Inside Python's triple quotes line breaks and tabs are the
    string's own.
    """

    def __init__(self) -> None:
        self.closer = ""  # the open string's closing quote ("" outside a string)
        self.pending = ""  # a quote run or an escape cut by the piece's end
        self.raw = False  # a raw line break or tab in a quoted string
        self.bad = False  # another control character in a string

    def feed(self, text: str) -> None:
        s, self.pending = self.pending + text, ""
        i, n = 0, len(s)
        while i < n:
            if not self.closer:
                m = _QUOTE.search(s, i)
                if m is None:
                    return
                k, q = m.start(), m.group()
                run = 1
                while run < 3 and k + run < n and s[k + run] == q:
                    run += 1
                if run < 3 and k + run == n:  # may yet open a triple-quoted string
                    self.pending = s[k:]
                    return
                self.closer = "" if run == 2 else q * run
                i = k + run
                continue
            m = _IN_STRING[self.closer].search(s, i)
            if m is None:
                return
            k, c = m.start(), m.group()
            if c == "\\":
                if k + 1 == n:
                    self.pending = s[k:]
                    return
                i = k + 2
            elif c in "\t\n\r":
                self.raw = True
                i = k + 1
            elif c < " ":
                self.bad = True
                i = k + 1
            elif s.startswith(self.closer, k):
                i = k + len(self.closer)
                self.closer = ""
            elif self.closer.startswith(s[k:]):  # part of a closing triple quote
                self.pending = s[k:]
                return
            else:
                i = k + 1


_FENCE, _LINE, _NAME, _PAREN, _ARG, _KEY, _EQ, _VALUE, _AFTER_ARG, _END = range(10)


class _FencedCallsBody(LiteralBody):
    """Reads the fence, one ``NAME(key=value, ...)`` a line, the closing fence and the end
    token, from just after ``<|tool_call_start|>``."""

    dialect = PYTHON

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        #: A line break was read since the fence or the last call: a call may start.
        self.line_break = False
        self.names = NameReader("(", "tool name")
        self.keys = NameReader("=,)" + WS, "argument name")
        self.key = ""
        self.args: dict[str, Any] = {}
        self.controls = _StringControls()

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _VALUE:
            return self._value(s, i)
        if state in (_NAME, _KEY):
            return self._name(s, i)
        if state == _PAREN:  # right after the name, as Python has it
            if s[i] != "(":
                return self.fail(i, "no ( after the tool's name"), False
            self.open_call(self.name)
            self.args = {}
            self.state = _ARG
            return i + 1, True
        c = s[i]
        if c in WS:
            self.line_break = self.line_break or c == "\n"
            return i + 1, True
        if state == _FENCE:
            j = self.expect(s, i, _FENCE_OPEN, f"no {_FENCE_OPEN} code block opens the calls")
            if j < 0:
                return i, False
            self.state = _LINE
            return j, True
        if state == _LINE:
            return self._line(s, i)
        if state == _ARG:  # after ( or a comma between arguments
            if c == ")":
                return self._call_end(i)
            if not (c.isalpha() or c in "_$"):
                return self.fail(i, "a positional argument; only key=value arguments"), False
            self.state = _KEY
            return i, True
        if state == _EQ:
            if c != "=":
                return self.fail(i, "an argument without =; only key=value arguments"), False
            return self._start_value(i)
        if state == _AFTER_ARG:
            if c == ")":
                return self._call_end(i)
            if c != ",":
                return self.fail(i, "expected , or ) after an argument"), False
            self.state = _ARG
            return i + 1, True
        # _END: the closing fence was read
        j = self.expect(s, i, _CALL_END, f"text after the code block before {_CALL_END}")
        if j < 0:
            return i, False
        self.status = DONE
        return j, False

    def _line(self, s: str, i: int) -> tuple[int, bool]:
        """After the fence or a call: the next call, or the closing fence, on a new line."""
        if not self.line_break:
            return self.fail(i, "a call not on a line of its own"), False
        if s[i] == "`":
            j = self.expect(s, i, _FENCE_CLOSE, "a stray ` in the code block")
            if j < 0:
                return i, False
            if not self.calls:
                return self.fail(i, "the code block holds no call"), False
            self.state = _END
            return j, True
        self.line_break = False
        self.state = _NAME
        return i, True

    def _name(self, s: str, i: int) -> tuple[int, bool]:
        """The tool's name (state ``_NAME``) or an argument's (``_KEY``)."""
        reader = self.names if self.state == _NAME else self.keys
        name, j = reader.read(self, s, i)
        if name is None:
            return j, self.status == OPEN and j < len(s)
        if self.state == _NAME:
            if not _TOOL_NAME.match(name):
                return self.fail(i, f"{name[:40]!r} is not a tool name"), False
            self.name = name
            self.state = _PAREN
        else:
            if not _ARG_NAME.match(name):
                return self.fail(i, f"{name[:40]!r} is not an argument name"), False
            if name in self.args:
                return self.fail(i, f"the argument {name!r} is given twice"), False
            self.key = name
            self.state = _EQ
        return j, True

    def _start_value(self, i: int) -> tuple[int, bool]:
        self.delta(
            ("{" if not self.args else ", ") + json.dumps(self.key, ensure_ascii=False) + ": "
        )
        self.args[self.key] = None  # a placeholder keeps the order and catches a repeat
        self.start_value()
        self.controls = _StringControls()
        self.state = _VALUE
        return i + 1, True

    def _value(self, s: str, i: int) -> tuple[int, bool]:
        j, complete = self.feed_value(s, i, f"the value of {self.key!r}")
        if self.status == OPEN and not self._controls(s[i:j], j):
            return j, False
        if complete:
            assert self.reader is not None
            self.args[self.key] = self.reader.value
            self.state = _AFTER_ARG
        return j, complete

    def _controls(self, text: str, j: int) -> bool:
        """Check the value's text just read for raw controls in its strings; False when
        the body failed on one."""
        controls = self.controls
        controls.feed(text)
        if controls.bad:
            self.fail(j, f"a control character in a string of {self.key!r}")
            return False
        if controls.raw:
            if self.stream.strict:
                self.fail(j, f"a raw line break or tab in a string of {self.key!r}")
                return False
            self.raw_controls.add(self.index)
        return True

    def _call_end(self, i: int) -> tuple[int, bool]:
        self.delta("}" if self.text else "{}")
        self.end_call(dict(self.args))
        self.names = NameReader("(", "tool name")
        self.line_break = False
        self.state = _LINE
        return i + 1, True


class MiniCpm3Stream(MarkerStream):
    marker = _CALL_START
    body_class = _FencedCallsBody


def _call_line(name: str, args: Mapping[str, Any]) -> str:
    """One call as the template writes it: each value through ``tojson``, no spaces."""
    return (
        name
        + "("
        + ",".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
        + ")"
    )


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    return f"{_CALL_START}\n```python\n{_call_line(name, args)}\n```\n{_CALL_END}\n"


@dataclass(frozen=True)
class _JsonValuedCall(Body):
    """``N(k=V, …)``, each value the JSON of the property's schema, as ``tojson`` writes
    it (the template's own values, so the model's): the properties in the schema's order,
    the required ones present."""

    def call(self, rules: Rules, i: int, name: str, params: Mapping[str, Any]) -> str:
        items: list[tuple[str, bool]] = []
        for key, schema, required in properties_of(params):
            value = rules.value(schema, f"tool{i}-{key}")
            rule = rules.add(f"tool{i}-kw-{key}", f'{lit(key)} space "=" space {value}')
            items.append((rule, required))
        return f'{lit(name)} "(" space {sequence_of(items, chr(34) + "," + chr(34))} space ")"'


_MINICPM3_FORM = CallForm(
    _JsonValuedCall(),
    open=f"{lit(_CALL_START)} space {lit(_FENCE_OPEN + chr(10))}",
    close=f"{lit(chr(10) + _FENCE_CLOSE)} space {lit(_CALL_END)}",
    sep=lit("\n"),
    triggers=(_CALL_START,),
)


class MiniCpm3(Family):
    name = "minicpm3"
    label = "MiniCPM3 <|tool_call_start|>```python NAME(key=value)``` (openbmb MiniCPM3)"
    reasoning = ReasoningTags(blocks={"<|thought_start|>": "<|thought_end|>"})
    end_tokens = ("<|im_end|>",)
    kept_tokens = (_CALL_END,)
    samples = (_sample,)
    markers = (_CALL_START,)
    stream_class = MiniCpm3Stream
    grammar = _MINICPM3_FORM
