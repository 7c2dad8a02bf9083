"""A call whose payload is code for one tool (``code`` shapes, :mod:`.derived`): the steps of
the engine's body (a mixin of :class:`~.shapereader.DerivedBody`).

Some templates give a code interpreter a token of its own: Functionary v3.1 writes a call to
its ``python`` tool as ``<|python_tag|>`` and then the code itself, up to ``<|eom_id|>`` or
the reply's end. The text after the opening words is then the one argument of the one tool
the form names (``DerivedShape.code``: the tool and the argument's key), read only when the
caller declared that tool. A JSON object there is the arguments themselves (as a template
renders a past call, and another call may follow it); code that only begins like one is code.
The code streams as nothing (its text is its argument once it is whole).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..messages import ToolCall
from .base import loads_json
from .jsonscan import ObjectScanner
from .markerstream import DONE, OPEN, WS, Body, MarkerStream
from .scan import markers
from .tagsteps import _CALL, _LITS

if TYPE_CHECKING:
    from .derived import DerivedShape

__all__ = ["CODE_STATES", "CodeSteps"]

#: The code's leading white space, the code, and a JSON object in its place.
_CODE_START, _CODE, _CODE_JSON = range(15, 18)
CODE_STATES = (_CODE_START, _CODE, _CODE_JSON)


class CodeSteps(Body):
    """The code steps of the engine's body."""

    shape: DerivedShape
    stream: MarkerStream
    state: int
    then: int
    todo: list[str]
    index: int
    id: str
    scanner: ObjectScanner | None

    def code_start(self, i: int) -> tuple[int, bool]:
        """The opening words are read: the code follows, for the form's tool if declared."""
        tool = self.shape.code[0]
        if not self.stream.tools.has(tool):
            return self.fail(i, f"{tool} is not a declared tool"), False
        self.index, self.id = self.announce(tool)
        self.code: list[str] = []
        self.state = _CODE_START
        return i, True

    def code_step(self, s: str, i: int) -> tuple[int, bool]:
        if self.state == _CODE_START:  # a JSON object here is the arguments
            if s[i] in WS:
                self.code.append(s[i])
                return i + 1, True
            self.state = _CODE
            if s[i] == "{":
                self.scanner = ObjectScanner()
                self.state = _CODE_JSON
            return i, True
        if self.state == _CODE_JSON:
            return self._code_json(s, i)
        if not self.shape.post:  # the code runs to the reply's end
            self.code.append(s[i:])
            return len(s), False
        j, end = markers(self.shape.post[:1]).scan(s, i)
        self.code.append(s[i:j])
        if not end:
            return j, False
        self._end_code()
        return j + len(end), False

    def _code_json(self, s: str, i: int) -> tuple[int, bool]:
        """The JSON object where the code goes; text that is none is code after all."""
        assert self.scanner is not None
        k = self.scanner.feed(s, i)
        self.code.append(s[i:k])
        if self.scanner.failed:
            self.state = _CODE
            return k, True
        if not self.scanner.done:
            return k, False
        text = self.scanner.text().strip()
        args = _object(text)
        if args is None:
            self.state = _CODE
            return k, True
        self.stream._args(self.index, text)
        self.calls.append((self.index, ToolCall(self.id, self.shape.code[0], args, text)))
        self.status = DONE
        return k, False

    def _end_code(self) -> None:
        """The code is whole: a JSON object is the arguments, anything else the code."""
        code = "".join(self.code)
        if not code.strip():
            self.fail(0, f"no code after {self.shape.opening[-1]}")
            return
        args = _object(code) if code.strip().startswith("{") else None
        text = code.strip() if args is not None else ""
        if args is None:
            args = {self.shape.code[1]: code}
        self.stream._args(self.index, text)
        tool = self.shape.code[0]
        self.calls.append((self.index, ToolCall(self.id, tool, args, text, text_values=not text)))
        self.status = DONE

    def end_of_reply(self) -> None:
        if self.shape.kind != "code" or not self._code_ended():
            super().end_of_reply()

    def _code_ended(self) -> bool:
        """The reply ended in the code (or right after the opening words): the code runs to
        it. False when the body is elsewhere."""
        if self.state == _CALL or (self.state == _LITS and self.then == _CALL and not self.todo):
            self.code_start(0)
        if self.status != OPEN or self.state not in CODE_STATES:
            return self.status != OPEN
        self.code.append(self.stream._raw[-1])  # what was held back, to the reply's end
        self._end_code()
        return True


def _object(text: str) -> dict[str, Any] | None:
    """The JSON object ``text`` holds, or None."""
    try:
        value = loads_json(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
