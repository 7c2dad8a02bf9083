"""MiniMax M3: every tag prefixed by the ``]<]minimax[>[`` token, arguments as nested XML.

In full (``NS`` for ``]<]minimax[>[``)::

    NS<tool_call>\\n
    NS<invoke name="NAME">NS<KEY>VALUE NS</KEY>…NS</invoke>\\n
    …
    NS</tool_call>

one block holding every call of the turn. ``NS`` is a special token the template writes
before every tag of the call, so a value's text ends only where it appears. The tag of a
parameter is its name. A value is either text (strings as they are, numbers as written,
booleans as ``true``/``false``) or, for an object or a list, nested elements: an object is
one element per key (``NS<k>…NS</k>``), a list one ``NS<item>…NS</item>`` per item, to any
depth. A text value is passed on verbatim (the call is marked ``text_values``, and the
argument pipeline types it by the tool's schema); a nested value is passed on as the JSON
it spells, each leaf the JSON scalar it is written as (``1.5``, ``true``) or else a string,
the rule the argument pipeline applies to a text value of a parameter that is not text.
Where the template writes two values alike, the reading picks one: an element whose
children are all ``<item>`` is a list (an object whose one key is ``item`` looks the same),
a leaf ``42`` is the number (a string ``"42"`` looks the same), an empty element is the
empty string (an empty list or object is written as nothing), and a string written as
nested elements is the object it looks like (llama.cpp tells these apart by the schema;
a format reads without one).

Thinking is ``<mm:think>…</mm:think>`` at the start of the reply; a turn without thinking
starts with a bare ``</mm:think>``, which is no text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .base import MAX_JSON_DEPTH, Family, loads_json
from .grammar import CallForm, Tagged, lit
from .markerstream import OPEN, WS, MarkerStream
from .reasoning import ReasoningSplitter, ReasoningTags
from .samples import as_text
from .scan import Markers
from .textargs import NameReader, TextArgs, TextBody

__all__ = ["MiniMaxM3"]

NS = "]<]minimax[>["
_OPEN_TAG = NS + "<tool_call>"
_END_BLOCK = NS + "</tool_call>"
_INVOKE = NS + '<invoke name="'
_TAG = NS + "<"
_NAME_END = '">'
_TEXT_END = Markers((_TAG,))
_THINK, _END_THINK = "<mm:think>", "</mm:think>"
#: A leaf that spells a JSON scalar is that scalar in a nested value; any other is a string.
_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null")

_BLOCK, _NAME, _NAME_CLOSE, _IN_INVOKE, _TAG_KIND, _OPEN_NAME, _CLOSE_NAME, _TEXT = range(8)


class _Element:
    """An element of a value being read: its text, or its children."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.text: list[str] = []
        self.children: list[tuple[str, Any]] = []
        #: Whether the text holds more than whitespace (then no element may follow).
        self.has_text = False

    def add_text(self, piece: str) -> None:
        self.text.append(piece)
        self.has_text = self.has_text or bool(piece.strip())

    def value(self) -> Any:
        """The JSON value the element spells; a :class:`_Problem` when it spells none."""
        if not self.children:
            leaf = "".join(self.text)
            if _SCALAR.fullmatch(leaf):
                try:
                    return loads_json(leaf)
                except ValueError:  # too large for a number: the text it is
                    return leaf
            return leaf
        if all(tag == "item" for tag, _ in self.children):
            return [item for _, item in self.children]
        obj = dict(self.children)
        if len(obj) != len(self.children):
            return _Problem(f"an element in <{self.tag}> is given twice")
        return obj


class _Problem(str):
    """Why a nested value is none (a distinct type: any other string is a leaf)."""


class _M3Body(TextBody):
    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.names = NameReader('"', "tool name")
        self.tags = NameReader(">", "element name")
        #: The elements open in the current parameter, the parameter's own first.
        self.open: list[_Element] = []
        #: Whitespace at the start of a parameter's value, held until it is text or elements.
        self.lead: list[str] = []
        self.streaming = False

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _TEXT:
            j, end = _TEXT_END.scan(s, i)
            self._text(s[i:j])
            if self.status != OPEN or not end:
                return j, False
            self.state = _TAG_KIND
            return j + len(end), True
        if state == _TAG_KIND:
            if s[i] == "/":
                self.state = _CLOSE_NAME
                return i + 1, True
            self.state = _OPEN_NAME
            return i, True
        if state in (_OPEN_NAME, _CLOSE_NAME):
            tag, i = self.tags.read(self, s, i)
            if tag is None:
                return i, False
            if state == _OPEN_NAME:
                self._open(tag, i)
            else:
                self._close(tag, i)
            return i + 1, self.status == OPEN  # past the ">" that ended the name
        if state == _NAME:
            name, i = self.names.read(self, s, i)
            if name is None:
                return i, False
            self.call = TextArgs.start(self, name)
            self.state = _NAME_CLOSE
            return i, True
        if state == _NAME_CLOSE:
            j = self.expect(s, i, _NAME_END, 'a tool name not closed by ">')
            if j < 0:
                return i, False
            self.state = _IN_INVOKE
            return j, True
        if s[i] in WS:
            return i + 1, True
        if state == _BLOCK:
            return self.next_call(s, i, _INVOKE, _END_BLOCK, _NAME, "no <invoke> in the block")
        # _IN_INVOKE: a parameter opens, or the invoke closes
        j = self.expect(s, i, _TAG, f"expected {NS}<parameter> or {NS}</invoke>")
        if j < 0:
            return i, False
        self.state = _TAG_KIND
        return j, True

    def _text(self, piece: str) -> None:
        """Text inside the innermost open element."""
        if not piece:
            return
        top = self.open[-1]
        if top.children:
            if piece.strip():
                self.fail(0, f"text beside the elements in <{top.tag}>")
            return
        if len(self.open) > 1:
            top.add_text(piece)
            return
        assert self.call is not None
        if self.streaming or piece.strip():  # the parameter's value is text: pass it on
            self.call.value("".join(self.lead) + piece)
            self.lead = []
            self.streaming = True
        else:
            self.lead.append(piece)

    def _open(self, tag: str, i: int) -> None:
        if not self.open:  # a parameter
            assert self.call is not None
            if not self.call.open(tag):
                self.fail(i, f"the parameter {tag!r} is given twice")
                return
            self.lead = []
            self.streaming = False
        elif self.streaming or self.open[-1].has_text:
            self.fail(i, f"an element inside the text of <{self.open[-1].tag}>")
            return
        elif len(self.open) >= MAX_JSON_DEPTH:
            self.fail(i, f"a value nested deeper than {MAX_JSON_DEPTH}")
            return
        self.open.append(_Element(tag))
        self.state = _TEXT

    def _close(self, tag: str, i: int) -> None:
        assert self.call is not None
        if not self.open:
            if tag != "invoke":
                self.fail(i, f"</{tag}> where </invoke> was expected")
                return
            self.end_call()
            self.state = _BLOCK
            return
        element = self.open.pop()
        if tag != element.tag:
            self.fail(i, f"</{tag}> closes <{element.tag}>")
            return
        value = element.value()
        if isinstance(value, _Problem):
            self.fail(i, value)
            return
        if self.open:
            self.open[-1].children.append((tag, value))
            self.state = _TEXT
            return
        if element.children:
            self.call.value(json.dumps(value, ensure_ascii=False))
        elif not self.streaming:
            self.call.value("".join(self.lead))
        self.call.close()
        self.state = _IN_INVOKE


class _ThinkSplitter(ReasoningSplitter):
    """MiniMax M3's thinking: ``<mm:think>…</mm:think>`` at the start, or a bare
    ``</mm:think>`` where the model did not think, or neither (plain text)."""

    def __init__(self, *, opened: bool = False, call_markers: tuple[str, ...] = ()) -> None:
        # a call marker never ends this thinking: calls come after </mm:think>
        del call_markers
        super().__init__(opened=True)
        self._closers = Markers((_END_THINK,))
        self._deciding = not opened
        self._plain = False
        #: Whitespace at the start, held (as pieces) until the opening decides what it is.
        self._space: list[str] = []
        #: The opening after that whitespace: only ever a start of one of the two markers.
        self._start = ""

    def feed(self, text: str) -> list[tuple[bool, str]]:
        if self._plain:
            return [(False, text)] if text else []
        if not self._deciding:
            return super().feed(text)
        if self._start:
            body = self._start + text
        else:  # still in the leading whitespace: only this chunk is stripped (linear)
            body = text.lstrip()
            self._space.append(text[: len(text) - len(body)])
        if _THINK.startswith(body) or _END_THINK.startswith(body):  # not yet known
            self._start = body
            return []
        self._deciding = False
        self._start = ""
        space = "".join(self._space)
        self._space = []
        if body.startswith(_THINK):
            return super().feed(body[len(_THINK) :])
        if body.startswith(_END_THINK):  # no thinking: the closer alone, read as one
            return super().feed(body)
        self._plain = True
        return [(False, space + body)]

    def finish(self) -> list[tuple[bool, str]]:
        if self._plain:
            return []
        if self._deciding:
            start = "".join(self._space) + self._start
            self._space, self._start = [], ""
            return [(False, start)] if start else []
        return super().finish()


class MiniMaxM3Stream(MarkerStream):
    marker = _OPEN_TAG
    body_class = _M3Body

    splitter_class = _ThinkSplitter


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    ns = "]<]minimax[>["
    params = "".join(f"{ns}<{k}>{as_text(v)}{ns}</{k}>" for k, v in args.items())
    return f'{ns}<tool_call>\n{ns}<invoke name="{name}">{params}{ns}</invoke>\n{ns}</tool_call>'


_M3 = "]<]minimax[>["

_MINIMAX_M3_FORM = CallForm(
    Tagged(
        before=lit(_M3 + '<invoke name="'),
        between='"\\">"',
        after=lit(_M3 + "</invoke>"),
        arg_open=(_M3 + "<{key}>",),
        arg_close=(_M3 + "</{key}>",),
    ),
    open=lit(_M3 + "<tool_call>"),
    close=lit(_M3 + "</tool_call>"),
    triggers=(_M3 + "<tool_call>",),
)


class MiniMaxM3(Family):
    name = "minimax-m3"
    label = "MiniMax M3 ]<]minimax[>[<invoke name=…> with nested XML arguments (MiniMax M3)"
    reasoning = ReasoningTags(channel_openers=("<mm:think>",))
    drops_tokens = True
    samples = (_sample,)
    markers = (_OPEN_TAG,)
    stream_class = MiniMaxM3Stream
    grammar = _MINIMAX_M3_FORM
