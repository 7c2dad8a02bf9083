"""The steps of a call written as Python, ``NAME(key=value, ...)`` (``name-python`` shapes,
:mod:`.derived`), and of one written as a name then a literal mapping (``name-literal``:
Gemma's ``{key:<|"|>text<|"|>}``), for the engine's reader (:mod:`.shapereader`).

Keyword arguments only, each value a Python literal read by :mod:`.pyliteral` (never
evaluated). A positional value fails the call: mapping it to the schema's properties by order
would guess (a JSON schema's properties carry no order a client must keep). The arguments
are handed on as the JSON values they spell, untyped, their JSON text streaming as they are
read. Unless strict, values are read as hand-written templates teach models to write them
(unquoted text, a quote left unescaped, :mod:`.pyliteral`'s loose readings), each call read
so named in a ``recovered-python-values`` notice.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..events import NoticeCode
from ..messages import ToolCall
from .dialects import DIALECTS, PYTHON
from .listitems import ItemEnd
from .markerstream import OPEN, WS, Body, MarkerStream
from .pyliteral import LiteralReader
from .textargs import NameReader

if TYPE_CHECKING:
    from .derived import DerivedShape

__all__ = ["PySteps"]

_OPEN, _KEY, _EQ, _VALUE, _AFTER = range(5)


class PySteps(Body):
    """The Python-call steps of the engine's body (a mixin of its reader's body)."""

    shape: DerivedShape
    stream: MarkerStream
    told: list[tuple[NoticeCode, str]]
    index: int
    id: str
    call_name: str
    literal: LiteralReader | None
    arg_text: list[str]

    if TYPE_CHECKING:  # the body's own, which these steps call

        def words(self, words: tuple[str, ...], then: int) -> None: ...

    def py_start(self) -> None:
        """A call's name was read: its ``(`` comes next."""
        self.py_state = _OPEN
        self.py_args: dict[str, Any] = {}
        self.py_key = ""
        self.py_keys = NameReader("=,)" + WS, "argument name")
        self.py_value: LiteralReader | None = None
        self.py_text: list[str] = []
        self.py_loose: list[str] = []

    def _py_emit(self, text: str) -> None:
        self.py_text.append(text)
        self.stream._args(self.index, text)

    def python_args(self, s: str, i: int, then: int) -> tuple[int, bool]:
        """One step of ``(key=value, ...)``; once the call is read, the body goes on in state
        ``then`` after the call's closing words."""
        state = self.py_state
        if state == _VALUE:
            return self._py_value(s, i)
        if state == _KEY and (self.py_keys.pending or s[i] not in WS + ")"):
            if not self.py_keys.pending and not (s[i].isalpha() or s[i] == "_"):
                return self.fail(i, "a positional argument; only key=value arguments"), False
            key, j = self.py_keys.read(self, s, i)
            if key is None:
                return j, False
            if not (key[0].isalpha() or key[0] == "_"):
                return self.fail(i, "a positional argument; only key=value arguments"), False
            if not key.isidentifier():  # a keyword argument is a Python name, strict or not
                return self.fail(i, f"the argument name {key[:100]!r} is no Python name"), False
            if key in self.py_args:
                return self.fail(i, f"the argument {key!r} is given twice"), False
            self.py_key = key
            self.py_state = _EQ
            return j, True
        c = s[i]
        if c in WS:
            return i + 1, True
        if state == _OPEN:
            if c != "(":
                return self.fail(i, "no ( after the tool's name"), False
            self.py_state = _KEY
        elif state == _KEY:  # ``)``: the call ends with no argument after a comma, or none
            return self._py_end(i, then)
        elif state == _EQ:
            if c != "=":
                return self.fail(i, "an argument without =; only key=value arguments"), False
            first = "{" if not self.py_args else ", "
            self._py_emit(first + json.dumps(self.py_key, ensure_ascii=False) + ": ")
            self.py_args[self.py_key] = None  # the place, and a repeat caught
            dialect = DIALECTS.get(self.shape.literal, PYTHON)  # (its values' literals)
            self.py_value = LiteralReader(dialect, self._py_emit, loose=not self.stream.strict)
            self.py_state = _VALUE
        else:  # _AFTER
            if c == ")":
                return self._py_end(i, then)
            if c != "," and not self.stream.strict and (c.isalpha() or c == "_"):
                # the next argument, its comma left out (``city="Paris"days=3``)
                if "a comma left out" not in self.py_loose:
                    self.py_loose.append("a comma left out")
                self.py_keys = NameReader("=,)" + WS, "argument name")
                self.py_state = _KEY
                return i, True
            if c != ",":
                return self.fail(i, "expected , or ) after an argument"), False
            self.py_keys = NameReader("=,)" + WS, "argument name")
            self.py_state = _KEY
        return i + 1, True

    def python_broken(self) -> ItemEnd | None:
        """Where a call of a list of Python calls broke in a value that is no literal
        (``b'z'``, ``1e999``), what finds the rest of it, so that it is left out and the
        list's other calls read (:mod:`.listitems`); None where it broke elsewhere (a
        positional argument: prose or code, no call) or inside a string, where its end
        cannot be found for certain."""
        value = self.py_value
        if self.py_state != _VALUE or value is None or value.in_string:
            return None  # (a positional argument, a name with no =: prose or code, no call)
        shape = self.shape
        depth = 1 + (value.depth if value is not None else 0)
        return ItemEnd(shape.trail[0], depth, lines=not shape.next_call, python=True)

    def python_ends(self) -> None:
        """The reply ended in a Python call's value: what was held back to see what follows
        it (a value read loosely, its quote perhaps not its end) is read knowing nothing
        does, so a call the reply ends with is whole (a whole reply's last call)."""
        if getattr(self, "py_value", None) is None or self.status != OPEN:
            return
        assert self.py_value is not None
        self.py_value.final = True
        raw = self.stream._raw
        held = raw[-1]
        k = self.feed(held, 0)
        raw[-1:] = [held[:k], held[k:]]  # what is left, for the reply's end to decide

    def _py_value(self, s: str, i: int) -> tuple[int, bool]:
        reader = self.py_value
        assert reader is not None
        j = reader.feed(s, i)
        if reader.problem:
            return self.fail(j, f"the value of {self.py_key!r}: {reader.problem}"), False
        if not reader.done:
            return j, False
        self.py_args[self.py_key] = reader.value
        self.py_loose += [w for w in reader.loosened if w not in self.py_loose]
        if reader.raw_controls:
            self.raw_controls.add(self.index)
        self.py_value = None
        self.py_state = _AFTER
        return j, True

    def _py_end(self, i: int, then: int) -> tuple[int, bool]:
        self._py_emit("}" if self.py_args else "{}")
        text = "".join(self.py_text)
        self.calls.append((self.index, ToolCall(self.id, self.call_name, self.py_args, text)))
        if self.py_loose:
            what = (
                f"the call to {self.call_name[:100]} wrote its values as no Python literal is "
                f"written ({', '.join(self.py_loose)}); read as its template writes them"
            )
            self.told.append(("recovered-python-values", what))
        self.words(self.shape.post, then)
        return i + 1, True

    def literal_text(self, text: str) -> None:
        self.arg_text.append(text)
        self.stream._args(self.index, text)

    def literal_args(self, s: str, i: int, then: int) -> tuple[int, bool]:
        """The arguments as a literal mapping in the shape's dialect (:mod:`.pyliteral`)."""
        reader = self.literal
        assert reader is not None
        if not self.arg_text and s[i] in WS:
            return i + 1, True
        j = reader.feed(s, i)
        if reader.problem:
            return self.fail(j, f"the arguments: {reader.problem}"), False
        if not reader.done:
            return j, False
        if not isinstance(reader.value, dict):
            return self.fail(i, "the arguments are not a mapping"), False
        text = "".join(self.arg_text)
        self.calls.append((self.index, ToolCall(self.id, self.call_name, reader.value, text)))
        if reader.loosened:
            what = f"the arguments of {self.call_name[:100]}: {', '.join(reader.loosened)}"
            self.told.append(("arguments-repaired", what))
        self.literal = None
        self.words(self.shape.post, then)
        return j, True
