"""Functionary v3.1 and v3.2 (MeetKai): a tool's name written outside the JSON of its arguments.

- v3.1 (Llama 3.1 based): ``<function=NAME>{...}</function>``, several in a row. The template
  writes a call to a tool named ``python`` as ``<|python_tag|>`` then its arguments; the model
  writes the code itself there. That form is read as a call to ``python`` only when a tool of
  that name is declared (the code interpreter the template's "Environment: ipython" line
  announces): a JSON object there is the arguments (as the template renders a past call, and
  another call may follow it); anything else is code up to ``<|eom_id|>`` or the reply's end,
  ``{"code": CODE}``.
- v3.2: ``>>>NAME\\n{...}``, repeated; ``>>>all\\n`` opens plain text for the user. The
  generation prompt ends with ``>>>``, so a reply starts with the recipient itself
  (``get_weather\\n{...}`` or ``all\\nHello``): the stream starts as if ``>>>`` had just been
  read. A reply that does not open with ``NAME\\n`` there is plain text, with no notice. The
  recipient ``python`` is followed by raw code in v3.2; that is not read as a call.

Built on the machinery it shares with the other families of this kind
(:mod:`~toolwire.formats.openings`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..messages import ToolCall
from .base import Family, loads_json
from .grammar import AnyOf, CallForm, NamedJson, lit
from .jsonscan import ObjectScanner
from .markerstream import DONE, FAILED, OPEN, WS, MarkerStream, expect_literal
from .openings import ArgsBody, OpeningsStream
from .scan import Markers
from .textargs import NameReader

__all__ = ["FunctionaryV31", "FunctionaryV32"]


# --------------------------------------------------------------------------- v3.1

_FUNCTION = "<function="
_END_FUNCTION = "</function>"
_PYTHON_TAG = "<|python_tag|>"
_EOM = "<|eom_id|>"
_CODE_END = Markers((_EOM,))
_PYTHON = "python"

_START, _NAME, _NAME_END, _OBJ_WAIT, _OBJECT, _CLOSE, _CODE_START, _CODE = range(8)


class _V31Body(ArgsBody):
    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.names = NameReader(">", "tool name")
        self.code: list[str] = []
        self.json_code = False  # reading the code as a JSON object of arguments

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _START:
            if self.opened == _PYTHON_TAG:
                if not self.stream.tools.has(_PYTHON):
                    return self.fail(i, "python is not a declared tool"), False
                self.name = _PYTHON
                self.index, self.call_id = self.announce(_PYTHON)
                self.state = _CODE_START
            else:
                self.state = _NAME
            return i, True
        if state == _CODE_START:  # a JSON object here is the arguments (the template's form)
            if s[i] in WS:
                self.code.append(s[i])
                return i + 1, True
            self.state = _CODE
            if s[i] == "{":
                self.scanner = ObjectScanner()
                self.json_code = True
            return i, True
        if state == _CODE and self.json_code:
            return self._json_code(s, i)
        if state == _CODE:
            j, end = _CODE_END.scan(s, i)
            self.code.append(s[i:j])
            if not end:
                return j, False
            self._end_code()
            return j + len(end), False
        if state == _NAME:
            name, i = self.names.read(self, s, i)
            if name is not None:
                self.name = name
                self.state = _NAME_END
            return i, name is not None
        if state == _NAME_END:
            self.state = _OBJ_WAIT  # the name reader stopped at ">"
            return i + 1, True
        if state == _OBJ_WAIT:
            i, found = self.object_start(s, i, "no JSON object after <function=…>")
            if found:
                self.start_args(self.name)
                self.state = _OBJECT
            return i, self.status == OPEN
        if state == _OBJECT:
            i, complete = self.read_args(s, i)
            if complete:
                self.state = _CLOSE
            return i, complete
        if s[i] in WS:  # _CLOSE
            return i + 1, True
        j = self.expect(s, i, _END_FUNCTION, "text after the arguments before </function>")
        if j < 0:
            return i, False
        self.status = DONE
        return j, False

    def _json_code(self, s: str, i: int) -> tuple[int, bool]:
        """Read the JSON object after the tag; text that is none is code after all."""
        k = self.scanner.feed(s, i)
        self.code.append(s[i:k])
        if self.scanner.failed:
            self.json_code = False
            return k, True
        if not self.scanner.done:
            return k, False
        text = self.scanner.text()
        try:
            args = loads_json(text)
        except (ValueError, RecursionError):
            args = None
        if not isinstance(args, dict):
            self.json_code = False
            return k, True
        self.stream._args(self.index, text.strip())
        self.calls.append((self.index, ToolCall(self.call_id, _PYTHON, args, text.strip())))
        self.status = DONE
        return k, False

    def _end_code(self) -> None:
        """The code is complete: a JSON object is the arguments, anything else the code."""
        code = "".join(self.code)
        if not code.strip():
            self.fail(0, "no code after <|python_tag|>")
            return
        args: Any = None
        if code.strip().startswith("{"):
            try:
                args = loads_json(code)
            except (ValueError, RecursionError):
                args = None
        text = code.strip() if isinstance(args, dict) else ""
        if not isinstance(args, dict):
            args = {"code": code}
        self.stream._args(self.index, text)
        call = ToolCall(self.call_id, _PYTHON, args, text, text_values=not text)
        self.calls.append((self.index, call))
        self.status = DONE

    def end_of_reply(self) -> None:
        if self.state == _START and self.opened == _PYTHON_TAG:  # the tag ends the reply
            self.step("", 0)
        if self.status != OPEN:
            return
        if self.state in (_CODE_START, _CODE):  # the code runs to the reply's end (and held)
            self.code.append(self.stream._raw[-1])
            self._end_code()
            return
        super().end_of_reply()


class FunctionaryV31Stream(OpeningsStream):
    openings = (_FUNCTION, _PYTHON_TAG)
    body_class = _V31Body


def _v31_sample(name: str, args: Mapping[str, Any], index: int) -> str:
    return "<function=" + name + ">" + json.dumps(args) + "</function>"


def _v32_sample(name: str, args: Mapping[str, Any], index: int) -> str:
    return ">>>" + name + "\n" + json.dumps(args)


_FUNCTIONARY_V31_FORM = CallForm(
    NamedJson(before=lit("<function="), between='">"', after=lit("</function>")),
    blocks=True,
    triggers=("<function=",),
)

_V32 = NamedJson(between='"\\n"')

_FUNCTIONARY_V32_FORM = AnyOf(
    (
        CallForm(_V32, open='">>>"', blocks=True, triggers=(">>>{name}\n",)),
        CallForm(_V32, sep='">>>"', blocks=True, starts=("{name}\n",)),
    )
)


class FunctionaryV31(Family):
    name = "functionary-v3.1"
    label = "Functionary <function=NAME>{...}</function> (Functionary v3.1 Llama 3.1)"
    end_tokens = ("<|eot_id|>", "<|eom_id|>")
    samples = (_v31_sample,)
    markers = (_FUNCTION, _PYTHON_TAG)
    stream_class = FunctionaryV31Stream
    grammar = _FUNCTIONARY_V31_FORM


# --------------------------------------------------------------------------- v3.2

_RECIPIENT = ">>>"
_ALL = "all"

_R_NAME, _R_OBJ_WAIT, _R_OBJECT, _R_START = range(4)


class _V32Body(ArgsBody):
    def __init__(self, stream: MarkerStream, *, fresh: bool = False) -> None:
        super().__init__(stream)
        #: Started by the stream at the reply's start: the prompt wrote the ``>>>``.
        self.fresh = fresh
        if fresh:
            self.state = _R_START
        self.names = NameReader("\n", "recipient")

    def step(self, s: str, i: int) -> tuple[int, bool]:
        if self.state == _R_START:  # does the reply write the marker itself?
            status, j = expect_literal(s, i, _RECIPIENT)
            if status == OPEN:
                return i, False
            self.fresh = status == FAILED
            self.state = _R_NAME
            return j, True
        if self.state == _R_NAME:
            name, j = self.names.read(self, s, i)
            if self.status == FAILED:
                self.quiet = True  # no recipient: not call markup
                return j, False
            if name is None:
                return j, False
            if name == _ALL:  # text for the user follows
                self.status = DONE
                return j + 1, False
            if self.fresh and self.stream.tools.known and not self.stream.tools.has(name):
                self.quiet = True
                return self.fail(j, f"{name!r} is not a declared tool"), False
            self.name = name
            self.state = _R_OBJ_WAIT
            return j + 1, True
        if self.state == _R_OBJ_WAIT:
            i, found = self.object_start(s, i, f"no JSON object after >>>{self.name}")
            if self.status == FAILED:
                self.quiet = self.fresh
            elif found:
                self.start_args(self.name)
                self.state = _R_OBJECT
            return i, self.status == OPEN
        i, complete = self.read_args(s, i)
        if complete:
            self.status = DONE
        return i, False

    def end_of_reply(self) -> None:
        super().end_of_reply()
        self.quiet = self.state in (_R_START, _R_NAME) or (self.fresh and self.state != _R_OBJECT)


class FunctionaryV32Stream(OpeningsStream):
    openings = (_RECIPIENT,)
    body_class = _V32Body

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._body = _V32Body(self, fresh=True)
        self._raw = []


class FunctionaryV32(Family):
    name = "functionary-v3.2"
    label = "Functionary >>>NAME\\n{...} (Functionary v3.2)"
    end_tokens = ("<|eot_id|>",)
    drops_tokens = True
    samples = (_v32_sample,)
    markers = (_RECIPIENT,)
    stream_class = FunctionaryV32Stream
    grammar = _FUNCTIONARY_V32_FORM
