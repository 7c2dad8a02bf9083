"""A tagged value written as nested elements keyed by name (``DerivedShape.nested``: MiniMax
M3's objects and lists), read by the engine's body after the value's opening tag.

The parameter's own tag names it (``NS<city>Paris NS</city>``), and its value is either text
(strings as they are, numbers and booleans as written) or nested elements: an object is one
element per key (``NS<k>…NS</k>``), a list one ``NS<item>…NS</item>`` per item, to any depth
(``NS`` the family's tag prefix, a special token written before every tag, so a value's text
ends only where it appears). A text value is passed on verbatim as it streams (the call's
values are text, typed by the tool's schema); a nested value is passed on once whole as the
JSON it spells, each leaf the JSON scalar it is written as (``1.5``, ``true``) or else a
string. Where the template writes two values alike, the reading picks one: an element whose
children are all ``<item>`` is a list (an object whose one key is ``item`` looks the same), a
leaf ``42`` is the number, an empty element the empty string, and a string written as nested
elements the object it looks like (a format reads without the schema).
"""

from __future__ import annotations

import json
import re
from typing import Any

from .base import MAX_JSON_DEPTH, loads_json
from .scan import Markers
from .textargs import NameReader, TextArgs

__all__ = ["Elements"]

#: A leaf that spells a JSON scalar is that scalar in a nested value; any other is a string.
_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null")
_TEXT, _TAG_KIND, _OPEN_NAME, _CLOSE_NAME, _TAG_END = range(5)


class _Element:
    """An element of a value being read: its text, or its children."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.text: list[str] = []
        self.children: list[tuple[str, Any]] = []
        #: Whether the text holds more than white space (then no element may follow).
        self.has_text = False

    def add_text(self, piece: str) -> None:
        self.text.append(piece)
        self.has_text = self.has_text or bool(piece.strip())

    def value(self) -> tuple[Any, str]:
        """``(the JSON value the element spells, why it spells none or "")``."""
        if not self.children:
            leaf = "".join(self.text)
            if _SCALAR.fullmatch(leaf):
                try:
                    return loads_json(leaf), ""
                except ValueError:  # too large for a number: the text it is
                    return leaf, ""
            return leaf, ""
        if all(tag == "item" for tag, _ in self.children):
            return [item for _, item in self.children], ""
        obj = dict(self.children)
        if len(obj) != len(self.children):
            return None, f"an element in <{self.tag}> is given twice"
        return obj, ""


class Elements:
    """One parameter's value after its opening tag, up to its own closing tag: fed the
    reply's text, it passes a text value on to ``call`` as it streams and a nested one once
    whole, and says where the value ended (or why it is none)."""

    def __init__(self, call: TextArgs, key: str, tag: str) -> None:
        self.call = call
        self._tag = tag  # the family's tag opener (``NS<``)
        self._text_end = Markers((tag,))
        self._names = NameReader(">", "element name")
        self.open: list[_Element] = [_Element(key)]
        #: White space at the start of the value, held until it is text or elements.
        self._lead: list[str] = []
        self._streaming = False
        self._state = _TEXT
        self.problem = ""
        self.done = False

    def feed(self, s: str, i: int) -> int:
        """Read from ``s[i]``: where it stopped (``done`` once the value's tag closed;
        ``problem`` set when it is no value)."""
        n = len(s)
        while i < n and not (self.done or self.problem):
            state = self._state
            if state == _TEXT:
                j, end = self._text_end.scan(s, i)
                if self._streaming and len(self.open) == 1:  # (most pieces: a text value)
                    self.call.value(s[i:j])
                else:
                    self._text(s[i:j])
                if not end:
                    return j
                self._state = _TAG_KIND
                i = j + len(end)
            elif state == _TAG_KIND:
                self._state = _CLOSE_NAME if s[i] == "/" else _OPEN_NAME
                i += s[i] == "/"
            else:
                tag, j = self._names.feed(s, i)
                if self._names.problem:
                    self.problem = self._names.problem
                    return j
                if tag is None:
                    return j
                self._names = NameReader(">", "element name")
                if state == _OPEN_NAME:
                    self._open(tag)
                else:
                    self._close(tag)
                i = j + 1  # past the ">" that ended the name
        return i

    def _text(self, piece: str) -> None:
        """Text inside the innermost open element."""
        if not piece:
            return
        top = self.open[-1]
        if top.children:
            if piece.strip():
                self.problem = f"text beside the elements in <{top.tag}>"
            return
        if len(self.open) > 1:
            top.add_text(piece)
        elif self._streaming or piece.strip():  # the parameter's value is text: pass it on
            self.call.value("".join(self._lead) + piece)
            self._lead = []
            self._streaming = True
        else:
            self._lead.append(piece)

    def _open(self, tag: str) -> None:
        if self._streaming or self.open[-1].has_text:
            self.problem = f"an element inside the text of <{self.open[-1].tag}>"
        elif len(self.open) >= MAX_JSON_DEPTH:
            self.problem = f"a value nested deeper than {MAX_JSON_DEPTH}"
        else:
            self.open.append(_Element(tag))
            self._state = _TEXT

    def _close(self, tag: str) -> None:
        element = self.open.pop()
        if tag != element.tag:
            self.problem = f"</{tag}> closes <{element.tag}>"
            return
        value, problem = element.value()
        if problem:
            self.problem = problem
            return
        self._state = _TEXT
        if self.open:
            self.open[-1].children.append((tag, value))
            return
        if element.children:
            self.call.value(json.dumps(value, ensure_ascii=False))
        elif not self._streaming:
            self.call.value("".join(self._lead))
        self.call.close()
        self.done = True
