"""A call list written in Python, ``[NAME(key=value, ...), ...]``, read as the families that
write their calls so read it (LFM2's tagged list, Llama 4's bare one).

Each call is ``NAME(key=value, ...)``: a (possibly dotted) name, keyword arguments only,
each value a Python literal read by :mod:`toolwire.formats.pyliteral` (never evaluated). A
positional value (``get_weather('Tokyo')``) fails the list: mapping it to the schema's
properties by order would guess (a JSON schema's properties carry no order a client must
keep), and dropping it would run the tool without what the model gave. The arguments are
handed on as the JSON values they spell, untyped, and their JSON text streams while the call
is read.

Templates write the list by hand, and a model writes what its template taught it. Unless
strict, each call read so is recorded for a ``recovered-python-values`` notice
(:func:`loose_notice`): values read loosely (unquoted text, quotes left unescaped), and a
comma left out between two arguments (``city="Paris"days=3``). A list the family reads
without brackets (:meth:`CallListBody.open_bare`) is ended by the reply's end
(:meth:`CallListBody.finish`) or a tag after it.

Shared, not a family: the families' modules import it, never each other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from ..messages import ToolCall
from .dialects import PYTHON, Dialect
from .markerstream import DONE, OPEN, WS, Body, MarkerStream
from .pyliteral import LiteralReader
from .textargs import NameReader

__all__ = ["CallListBody", "LiteralBody", "loose_notice", "python_call"]

#: A tool name: dotted words (``Calendar.create_event``), hyphens allowed as in tool names.
_TOOL_NAME = re.compile(r"[A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)*\Z")
_ARG_NAME = re.compile(r"[A-Za-z_$][\w$\-]*\Z")

_OPEN_LIST, _NEXT, _NAME, _PAREN, _ARG, _KEY, _EQ, _VALUE, _AFTER_ARG, _AFTER_CALL, _END = range(11)


class LiteralBody(Body):
    """A body reading one call at a time whose argument values are literals in ``dialect``.

    The call is announced by :meth:`open_call`; each value is read by :meth:`feed_value`
    while its JSON text streams to the call (:meth:`delta`); :meth:`end_call` completes it.
    """

    dialect: ClassVar[Dialect]
    #: Values are read with the reader's loose readings unless the stream is strict.
    loose_values: ClassVar[bool] = False

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.name = ""
        self.index = -1
        self.id = ""
        self.text: list[str] = []
        self.reader: LiteralReader | None = None

    def delta(self, text: str) -> None:
        """Argument text for the current call."""
        self.text.append(text)
        self.stream._args(self.index, text)

    def open_call(self, name: str) -> None:
        self.name = name
        self.index, self.id = self.announce(name)
        self.text = []

    def start_value(self) -> None:
        self.reader = LiteralReader(
            self.dialect, self.delta, loose=self.loose_values and not self.stream.strict
        )

    def feed_value(self, s: str, i: int, what: str) -> tuple[int, bool]:
        """Feed the value being read: ``(where it stopped, whether it is complete)``; the
        complete value is ``reader.value``. A value that is no literal fails the body."""
        reader = self.reader
        assert reader is not None
        j = reader.feed(s, i)
        if reader.problem:
            return self.fail(j, f"{what}: {reader.problem}"), False
        return j, reader.done

    def end_call(self, args: dict[str, Any]) -> None:
        """The current call is complete with ``args``: it joins ``calls``."""
        call = ToolCall(self.id, self.name, args, "".join(self.text))
        self.calls.append((self.index, call))


class CallListBody(LiteralBody):
    """Reads ``[NAME(key=value, ...), ...]`` from its ``[``, then the family's ``end``.

    Unless strict, values are read loosely (:mod:`toolwire.formats.pyliteral`: unquoted text,
    quotes left unescaped) and a comma left out between two arguments is read as there; each
    call read so is named in :attr:`loosened`, for the stream's notice when the call stands.
    A ``bare`` list has no brackets: its calls are parted by commas and the reply's end
    (:meth:`finish`) ends it.
    """

    dialect = PYTHON
    loose_values = True
    #: The text that must follow the list (after optional whitespace), if any.
    end: ClassVar[str] = ""
    #: Calls must name a declared tool when the tools are known.
    declared_only: ClassVar[bool] = False

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        #: ``NAME(`` was read: what failed after it was meant as a call.
        self.looked = False
        self.names = NameReader("(", "tool name")
        self.keys = NameReader("=,)" + WS, "argument name")
        self.key = ""
        self.args: dict[str, Any] = {}
        #: The list has no brackets (the reply is the calls).
        self.bare = False
        #: No more text will come: a loose reading decides at the text's end.
        self.final = False
        #: For each call read loosely, by its index: what was loosened.
        self.loosened: dict[int, list[str]] = {}

    def opened(self) -> None:
        """The list's ``[`` was read by whoever handed the list over: a call comes next."""
        self.state = _NEXT

    def open_bare(self) -> None:
        """Read a list without brackets, its first call's name next (the reply's end, or
        a tag, ends it)."""
        self.bare = True
        self.state = _NAME

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _VALUE:
            return self._value(s, i)
        if state in (_NAME, _KEY):
            return self._name(s, i)
        if s[i] in WS:
            return i + 1, True
        c = s[i]
        if state == _OPEN_LIST:
            if c != "[":
                return self.fail(i, "no [ opens the call list"), False
            self.state = _NEXT
        elif state == _NEXT:  # after [ or a comma between calls
            if c == "]" and self.calls:
                return self._list_end(i)
            if c == "]":
                return self.fail(i, "the call list is empty"), False
            self.state = _NAME
            return i, True
        elif state == _PAREN:
            return self._paren(s, i)
        elif state == _ARG:  # after ( or a comma between arguments
            if c == ")":
                return self._call_end(i)
            if not (c.isalpha() or c in "_$"):  # a value where a keyword must be
                # positional values are not mapped to the schema's properties by order:
                # a JSON schema's properties carry no order a client must keep
                return self.fail(i, "a positional argument; only key=value arguments"), False
            self.state = _KEY
            return i, True
        elif state == _AFTER_ARG:
            if c == ")":
                return self._call_end(i)
            if c != "," and not self.stream.strict and (c.isalpha() or c in "_$"):
                self._loosen(["a comma left out"])  # ``city="Paris"days=3``
                self.state = _KEY
                return i, True
            if c != ",":
                return self.fail(i, "expected , or ) after an argument"), False
            self.state = _ARG
        elif state == _EQ:
            if c != "=":
                return self.fail(i, "an argument without =; only key=value arguments"), False
            return self._start_value(i)
        elif state == _AFTER_CALL:
            if c == "]" and not self.bare:
                return self._list_end(i)
            if c == "<" and self.bare:  # a tag after the calls: the stream reads it
                self.status = DONE
                return i, False
            if c != ",":
                return self.fail(i, "expected , or ] after a call"), False
            self.state = _NEXT
        else:  # _END
            j = self.expect(s, i, self.end, f"text after the call list before {self.end}")
            if j < 0:
                return i, False
            self.status = DONE
            return j, False
        return i + 1, True

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

    def _paren(self, s: str, i: int) -> tuple[int, bool]:
        if s[i] != "(":
            return self.fail(i, "no ( after the tool's name"), False
        tools = self.stream.tools
        undeclared = self.declared_only and tools.known and not tools.has(self.name)
        # with no brackets, only a declared tool's name makes the text look like a call
        self.looked = not (self.bare and undeclared)
        if undeclared:
            return self.fail(i, f"{self.name!r} is not a declared tool"), False
        self.open_call(self.name)
        self.args = {}
        self.state = _ARG
        return i + 1, True

    def _start_value(self, i: int) -> tuple[int, bool]:
        self.delta(
            ("{" if not self.args else ", ") + json.dumps(self.key, ensure_ascii=False) + ": "
        )
        self.args[self.key] = None  # a placeholder keeps the order and catches a repeat
        self.start_value()
        self.state = _VALUE
        return i + 1, True

    def start_value(self) -> None:
        super().start_value()
        assert self.reader is not None
        self.reader.final = self.final

    def _value(self, s: str, i: int) -> tuple[int, bool]:
        j, complete = self.feed_value(s, i, f"the value of {self.key!r}")
        if complete:
            assert self.reader is not None
            self.args[self.key] = self.reader.value
            self._loosen(self.reader.loosened)
            self.state = _AFTER_ARG
        return j, complete

    def _loosen(self, what: list[str]) -> None:
        if what:
            seen = self.loosened.setdefault(self.index, [])
            seen.extend(w for w in what if w not in seen)

    def finish(self, s: str) -> int:
        """The reply ended, ``s`` the text held back: read it knowing nothing follows. A bare
        list whose last call ended is then complete; where it stopped is returned."""
        self.final = True
        if self.reader is not None:
            self.reader.final = True
        j = self.feed(s, 0)
        if self.status == OPEN and self.bare and self.state == _AFTER_CALL and j == len(s):
            self.status = DONE
        return j

    def _call_end(self, i: int) -> tuple[int, bool]:
        self.delta("}" if self.text else "{}")
        self.end_call(dict(self.args))
        self.names = NameReader("(", "tool name")
        self.state = _AFTER_CALL
        return i + 1, True

    def _list_end(self, i: int) -> tuple[int, bool]:
        if self.end:
            self.state = _END
            return i + 1, True
        self.status = DONE
        return i + 1, False


def loose_notice(stream: MarkerStream, body: CallListBody | None, index: int, name: str) -> None:
    """Name a call whose values were read loosely (``recovered-python-values``)."""
    what = body.loosened.get(index) if body is not None else None
    if what:
        stream._notice(
            "recovered-python-values",
            f"the call to {name[:100]} wrote its values as no Python literal is written "
            f"({', '.join(what)}); read as its template writes them",
        )


# ----------------------------------------------------------------------------- LFM2


def python_call(name: str, args: Mapping[str, Any]) -> str:
    """``NAME(key=value, ...)``, each value its Python literal: a family's sample call."""
    return name + "(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"
