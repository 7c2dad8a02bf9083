"""GLM: ``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>…</tool_call>``.

Written by GLM 4.5/4.6/4.7 (a newline after the name and between the tags) and poolside
Laguna (the same tags, with or without the newlines). Each value is the text between its
tags, verbatim: the templates write strings as they are and other values as their JSON, so
the call is marked ``text_values`` and the argument pipeline types each value by the tool's
schema. The name follows the opening tag at once; a JSON object there is Hermes's call,
``<function=`` is Qwen's, and neither is ever read as this family's.

What GLM models write besides, read as SGLang's GLM detector reads it unless strict, each
repair named in an ``arguments-repaired`` notice once the call is read:

- a value written as a JSON string (``<arg_value>"Paris"</arg_value>``) is that string, as
  a JSON value would be for any other type (a value meant to be quoted text is rare; a
  template never quotes a string);
- a JSON object or list written with its quotes escaped (``{\\"a\\": 1}``, what the model
  copies from JSON it saw) is that JSON;
- a key with no ``<arg_value>`` after it is left out (so a required field is reported
  missing, not filled with nothing). An empty ``<arg_value></arg_value>`` is the empty text.
- the newlines between the tags written escaped, as the two characters ``\\n``
  (``<tool_call>f\\n<arg_key>``, what a model copies from a template shown as JSON), are
  read as the newlines they stand for, named in a ``recovered-escaped-newline`` notice. A
  backslash ends the name (no tool name holds one); only between tags is it read so, never
  inside a value.

A value opening with ``"``, ``{`` or ``[`` is passed on once whole (it may be read as one of
these); any other streams as it comes. Escapes in any other value (``a\\nb``) are its text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..events import NoticeCode
from .base import Family, loads_json
from .grammar import Tagged
from .grammar_forms import tag_block
from .markerstream import DONE, WS, Body, MarkerStream
from .reasoning import THINK
from .samples import as_text
from .scan import Markers
from .textargs import NameReader, TextBody

__all__ = ["Glm"]

_OPEN_TAG = "<tool_call>"
_CLOSE_TAG = "</tool_call>"
_KEY = "<arg_key>"
_END_KEY = "</arg_key>"
_VALUE = "<arg_value>"
_END_VALUE = "</arg_value>"
_VALUE_END = Markers((_END_VALUE,))
#: A value opening with one of these is held until whole: it may be JSON to read.
_HELD = '"{['

_NAME, _BETWEEN, _KEY_NAME, _KEY_END, _BEFORE_VALUE, _IN_VALUE, _VALUE_FIRST, _HELD_VALUE = range(8)


def _read_value(text: str) -> tuple[str, str]:
    """``(value, repair)``: a held value as read, and the repair that took ("" for none)."""
    try:
        value = loads_json(text)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, str) and text.startswith('"'):
        return value, "a JSON string read as its text"
    if value is not None or text.startswith('"') or '\\"' not in text:
        return text, ""  # JSON as the grammar writes it, or text
    try:
        unescaped = loads_json('"' + text + '"')
        inner = loads_json(unescaped)
    except (ValueError, RecursionError):
        return text, ""
    if isinstance(inner, (dict, list)):
        return unescaped, "JSON written with its quotes escaped read as that JSON"
    return text, ""


class _GlmBody(TextBody):
    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.names = NameReader(WS + "<\\", "tool name")
        self.keys = NameReader("<", "argument name")
        self.key = ""  # the key read, its value not yet opened
        self.held: list[str] = []
        #: The repairs used, told once the call is read.
        self.told: list[tuple[NoticeCode, str]] = []
        self.escaped_newline = False  # the tolerance is told once a call

    def step(self, s: str, i: int) -> tuple[int, bool]:
        state = self.state
        if state == _IN_VALUE:
            i, complete = self.read_value(s, i, _VALUE_END, _BETWEEN)
            return i, complete
        if state == _HELD_VALUE:
            return self._held_value(s, i)
        if state == _VALUE_FIRST:
            held = s[i] in _HELD and not self.stream.strict
            self.state = _HELD_VALUE if held else _IN_VALUE
            self.held = []
            return i, True
        if state == _NAME:
            name, i = self.names.read(self, s, i)
            if name is None or not self.named(name, True, i):
                return i, False
            self.state = _BETWEEN
            return i, True
        if state == _KEY_NAME:
            key, i = self.keys.read(self, s, i)
            if key is None:
                return i, False
            assert self.call is not None
            if key in self.call.args:
                return self.fail(i, f"the argument {key!r} is given twice"), False
            self.key = key
            self.state = _KEY_END
            return i, True
        if state == _KEY_END:
            j = self.expect(s, i, _END_KEY, "an argument name not closed by </arg_key>")
            if j < 0:
                return i, False
            self.state = _BEFORE_VALUE
            return j, True
        if s[i] in WS:
            return i + 1, True
        if s[i] == "\\" and not self.stream.strict:  # an escaped newline between the tags
            if i + 1 == len(s):
                return i, False  # wait: is it \n?
            if s[i + 1] == "n":
                if not self.escaped_newline:
                    self.escaped_newline = True
                    self.told.append(
                        (
                            "recovered-escaped-newline",
                            "read a call whose tags were parted by \\n written as two characters",
                        )
                    )
                return i + 2, True
        if state == _BEFORE_VALUE:
            return self._before_value(s, i)
        # _BETWEEN
        j, literal = self.expect_one(s, i, (_KEY, _CLOSE_TAG), "expected <arg_key> or </tool_call>")
        if j < 0:
            return i, False
        return self._tag(literal, j)

    def _tag(self, literal: str, j: int) -> tuple[int, bool]:
        """``<arg_key>`` opens a key; ``</tool_call>`` ends the call."""
        if literal == _KEY:
            self.state = _KEY_NAME
            return j, True
        self.end_call()
        self.status = DONE
        return j, False

    def _before_value(self, s: str, i: int) -> tuple[int, bool]:
        """After ``</arg_key>``: its value, or (unless strict) the next key or the call's end,
        the key then left out."""
        ends = (_VALUE,) if self.stream.strict else (_VALUE, _KEY, _CLOSE_TAG)
        j, literal = self.expect_one(s, i, ends, "no <arg_value> after </arg_key>")
        if j < 0:
            return i, False
        if literal == _VALUE:
            if not self.named(self.key, False, i):
                return i, False
            self.state = _VALUE_FIRST
            return j, True
        assert self.call is not None
        self.told.append(
            (
                "arguments-repaired",
                f"the argument {self.key!r} of {self.call.name} has no <arg_value>: left out",
            )
        )
        return self._tag(literal, j)

    def _held_value(self, s: str, i: int) -> tuple[int, bool]:
        """A value that may be JSON to read: kept until its end, then passed on as read."""
        j, end = _VALUE_END.scan(s, i)
        self.held.append(s[i:j])
        if not end:
            return j, False
        assert self.call is not None
        value, repair = _read_value("".join(self.held))
        if repair:
            self.told.append(
                ("arguments-repaired", f"the argument {self.key!r} of {self.call.name}: {repair}")
            )
        self.call.value(value)
        self.call.close()
        self.held = []
        self.state = _BETWEEN
        return j + len(end), True


class GlmStream(MarkerStream):
    marker = _OPEN_TAG
    body_class = _GlmBody

    def _close(self, body: Body) -> None:
        if body.status == DONE and isinstance(body, _GlmBody):
            for code, message in body.told:
                self._notice(code, message)
        super()._close(body)


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    pairs = "".join(
        f"<arg_key>{k}</arg_key>\n<arg_value>{as_text(v)}</arg_value>\n" for k, v in args.items()
    )
    return "<tool_call>" + name + "\n" + pairs + "</tool_call>"


_ARG_KV = (("<arg_key>{key}</arg_key>", "<arg_value>"), ("</arg_value>",))

_GLM_FORM = tag_block(
    "<tool_call>", "</tool_call>", Tagged('""', '""', '""', *_ARG_KV, markup=("</tool_call>",))
)


class Glm(Family):
    name = "glm"
    label = "GLM <tool_call>NAME<arg_key>…<arg_value>… (GLM 4.5/4.6/4.7, poolside Laguna)"
    reasoning = THINK
    end_tokens = ("</assistant>",)  # poolside Laguna
    kept_tokens = ("</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>")
    samples = (_sample,)
    markers = (_OPEN_TAG,)
    stream_class = GlmStream
    grammar = _GLM_FORM
