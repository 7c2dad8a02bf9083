"""A call's arguments streamed as they are generated, typed all the same.

A call is typed once, at its end (:func:`~toolwire.arguments.prepare_arguments`): read
forgivingly, typed by the schema, unknown fields dropped. Its text, written as
:func:`json.dumps` writes it, is what a client runs the tool with. A client that is sent
the arguments as they come must be sent pieces of *that* text, so that the pieces
concatenate to it. :class:`ArgumentWriter` reads the model's argument text as it comes and
gives on only the bytes that can no longer change:

* ``{`` at once; then each top-level field in turn, its key and separator written as the
  final text writes them;
* a text value of a property whose schema is a plain string, character by character as it
  is read (its escapes decoded and written again as JSON writes them: single quotes,
  raw line breaks and stray backslashes come out as the final text has them);
* any other value (a number, ``true``, a list, a text that typing may change) held until it
  is complete, then given only if typing leaves it exactly as it is;
* never the closing ``}``: the rest, from the first byte it cannot foresee, is given at the
  call's end (:meth:`ArgumentWriter.finish`).

What it gives is what *both* texts a call may end with begin with: the typed text of a call
that fits its schema, and the text as the model wrote it of one that does not (see
:mod:`toolwire.pipeline.end`). So the first field typing would change (a ``"3"`` for an
integer, a field the schema does not list, a ``null`` dropped, a key given twice) ends the
streaming of that call: from there it is held to the end. Of a schema this cannot follow
field by field (``anyOf``, ``allOf``, ``$ref`` at its top) only the ``{`` is given early;
of arguments that do not open as an object (text, a list, a JSON string), nothing.

Pure and linear: each character is looked at once (a run of plain text in a string in one
regular-expression step), a held value read once when it is complete.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..errors import ArgumentsError
from .normalise import normalise
from .patterns import has_unchecked, matching_pattern
from .read import read_json
from .schema import allows_null

__all__ = ["ArgumentWriter"]

#: The keywords of a property whose text value typing never changes (no enum to match
#: case against, no union to try, no type to coerce to).
_PLAIN_STRING = frozenset(
    {
        "type",
        "description",
        "title",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "examples",
        "default",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentMediaType",
        "contentEncoding",
    }
)
#: Top-level keywords that make typing more than field by field.
_COMPOUND = ("$ref", "allOf", "anyOf", "oneOf", "if", "then", "else", "dependentSchemas")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_SPECIAL = {'"': re.compile(r'[\\"\x00-\x1f]'), "'": re.compile(r"[\\'\x00-\x1f]")}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_BLANK = " \t\r\n"
_SCALAR_END = frozenset(",}] \t\r\n/#")

# states
_START, _KEY_OR_END, _KEY, _COLON, _VALUE, _STRING, _HELD, _AFTER, _OVER = range(9)


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same JSON types throughout (``1`` is not ``1.0`` nor ``True``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _dumps(value: Any) -> str | None:
    """``value`` as the final text writes it; None when it cannot be sent as UTF-8 (then
    the whole text is written otherwise: see :func:`toolwire.pipeline.end.arguments_text`)."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return text


class ArgumentWriter:
    """Reads one call's argument text piece by piece (:meth:`feed`), giving the bytes of its
    final text that can no longer change (see the module's doc).

    ``schema`` is the tool's parameters schema (None: nothing is given before the end);
    ``strict`` and ``text_values`` are the call's, as :func:`prepare_arguments` takes them.
    """

    def __init__(
        self,
        schema: Mapping[str, Any] | None,
        *,
        strict: bool = False,
        text_values: bool = False,
    ) -> None:
        self._schema = schema
        self._strict = strict
        self._text_values = text_values
        self._state = _OVER if schema is None else _START
        # a schema not typed field by field: only the opening brace is certain
        self._brace_only = not _by_field(schema)
        self._pending = ""  # text not yet read: an escape or a value cut by the piece's end
        self._sent: list[str] = []
        #: What was given, as values: ``(key, value, True)`` for a field given whole, and
        #: ``(key, text, False)`` for each piece of a text value as it streams — for a reader
        #: that must know early what a call cannot be (:mod:`toolwire.pipeline.repeats`).
        self.given: list[tuple[str, Any, bool]] = []
        self._size = 0
        self._keys: set[str] = set()
        self._key: list[str] = []
        self._quote = '"'
        self._policy = ""
        self._held: list[str] = []
        self._depth = 0  # a held value's open brackets
        self._in_string = ""  # a held value: the quote of the string it is inside
        self._escaped = False
        self._scalar = False  # a held value that is a number or a literal
        self._sub: Any = None  # the schema of the field being read

    @property
    def sent(self) -> str:
        """Everything given so far."""
        return "".join(self._sent)

    def feed(self, text: str) -> str:
        """The bytes of the final text that ``text`` (the next piece) makes certain."""
        if self._state == _OVER or not text:
            return ""
        s = self._pending + text
        self._pending = ""
        out: list[str] = []
        at = 0
        n = len(s)
        while at < n and self._state != _OVER:
            at = self._step(s, at, out)
            if at < 0:  # the rest of ``s`` waits for the next piece
                break
        piece = "".join(out)
        if piece:
            self._sent.append(piece)
            self._size += len(piece)
        return piece

    def finish(self, final: str) -> str | None:
        """What is left to give of ``final``, the text the call ends with; None when it
        does not begin with what was given (the caller decides what the client gets)."""
        self._state = _OVER
        sent = self.sent
        return final[len(sent) :] if final.startswith(sent) else None

    # -- the reading, one step at a time; each returns where it stopped (-1: wait)

    def _step(self, s: str, at: int, out: list[str]) -> int:
        state = self._state
        if state == _STRING:
            return self._string(s, at, out)
        if state == _HELD:
            return self._hold(s, at, out)
        if state == _KEY:
            return self._key_text(s, at)
        c = s[at]
        if c in _BLANK:
            return at + 1
        if state == _START:
            if c != "{":
                return self._stop()
            out.append("{")
            self._state = _OVER if self._brace_only else _KEY_OR_END
        elif state == _KEY_OR_END:
            if c == "}":
                self._state = _OVER
            elif c in "\"'" and not (c == "'" and self._strict):
                self._quote, self._key = c, []
                self._state = _KEY
            else:
                return self._stop()  # a bare key, a comment, a stray comma: held to the end
        elif state == _COLON:
            if c != ":":
                return self._stop()
            self._state = _VALUE
        elif state == _VALUE:
            return self._value(s, at, out)
        elif state == _AFTER:
            if c == ",":
                self._state = _KEY_OR_END
            elif c == "}":
                self._state = _OVER
            else:
                return self._stop()
        return at + 1

    def _stop(self) -> int:
        self._state = _OVER
        return -1

    def _decode(self, s: str, at: int, into: list[str]) -> tuple[int, bool]:
        """Decode string text from ``at`` into ``into``: (where it stopped, closed?). -1
        when an escape is cut by the piece's end; a lone surrogate or a slip ``strict``
        refuses stops the call."""
        special = _SPECIAL[self._quote]
        n = len(s)
        while at < n:
            m = special.search(s, at)
            if m is None:
                into.append(s[at:])
                return n, False
            j = m.start()
            if j > at:
                into.append(s[at:j])
            c = s[j]
            if c == self._quote:
                return j + 1, True
            if c != "\\":  # a raw control character: kept, as the reader keeps it
                if self._strict:
                    return self._stop(), False
                into.append(c)
                at = j + 1
                continue
            if j + 1 >= n:
                self._pending = s[j:]
                return -1, False
            e = s[j + 1]
            if e in _ESCAPES:
                into.append(_ESCAPES[e])
                at = j + 2
            elif e == "'" and self._quote == "'":
                into.append("'")
                at = j + 2
            elif e == "u":
                if j + 6 > n:
                    self._pending = s[j:]
                    return -1, False
                if not _HEX4.fullmatch(s, j + 2, j + 6):
                    return self._stop(), False  # not a code point: the reader's own affair
                code = int(s[j + 2 : j + 6], 16)
                at = j + 6
                if 0xDC00 <= code < 0xE000:
                    return self._stop(), False  # a lone surrogate: the text is written otherwise
                if 0xD800 <= code < 0xDC00:
                    rest = s[at : at + 6]
                    if not "\\u".startswith(rest[:2]) and not rest.startswith("\\u"):
                        return self._stop(), False
                    if len(rest) < 6:
                        self._pending = s[j:]
                        return -1, False
                    low = int(rest[2:], 16) if _HEX4.fullmatch(rest, 2) else 0
                    if not 0xDC00 <= low < 0xE000:
                        return self._stop(), False
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    at += 6
                into.append(chr(code))
            else:  # a stray backslash: kept, the next character read as it is
                if self._strict:
                    return self._stop(), False
                into.append("\\")
                at = j + 1
        return n, False

    def _key_text(self, s: str, at: int) -> int:
        end, closed = self._decode(s, at, self._key)
        if end < 0 or not closed:
            return end
        key = "".join(self._key)
        self._policy = self._decide(key)
        if self._policy == "stop":
            return self._stop()
        self._state = _COLON
        return end

    def _value(self, s: str, at: int, out: list[str]) -> int:
        c = s[at]
        if c in "\"'" and self._policy in ("stream", "keep") and not (c == "'" and self._strict):
            head = self._member(None)
            if head is None:
                return self._stop()
            out.append(head + '"')
            self.given.append(("".join(self._key), "", False))
            self._quote = c
            self._state = _STRING
            return at + 1
        self._held = []
        self._depth = 0
        self._in_string = ""
        self._escaped = False
        self._scalar = c not in "{[\"'"
        self._state = _HELD
        return self._hold(s, at, out)

    def _member(self, value: Any) -> str | None:
        """The separator and key of the field being given (and its value, when held)."""
        key = "".join(self._key)
        keyed = _dumps(key)
        if keyed is None:
            return None
        sep = ", " if self._keys else ""
        self._keys.add(key)
        if value is None:
            return f"{sep}{keyed}: "
        written = _dumps(value[0])
        return None if written is None else f"{sep}{keyed}: {written}"

    def _string(self, s: str, at: int, out: list[str]) -> int:
        decoded: list[str] = []
        end, closed = self._decode(s, at, decoded)
        if decoded:
            text = "".join(decoded)
            out.append(json.dumps(text, ensure_ascii=False)[1:-1])
            self.given.append(("".join(self._key), text, False))
        if closed:
            out.append('"')
            self._state = _AFTER
        return end

    def _hold(self, s: str, at: int, out: list[str]) -> int:
        """A value kept whole until it is complete; then given if typing keeps it."""
        n = len(s)
        start = at
        if self._scalar:
            # a number, a literal: complete at the first character that cannot go on it
            while at < n and s[at] not in _SCALAR_END:
                at += 1
            self._held.append(s[start:at])
            if at == n:
                return n
            return self._held_done(at, out)
        while at < n:
            c = s[at]
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif c == "\\":
                    self._escaped = True
                elif c == self._in_string:
                    self._in_string = ""
                    if self._depth == 0:
                        self._held.append(s[start : at + 1])
                        return self._held_done(at + 1, out)
            elif c in "\"'":
                self._in_string = c
            elif c in "{[":
                self._depth += 1
            elif c in "}]":
                self._depth -= 1
                if self._depth == 0:
                    self._held.append(s[start : at + 1])
                    return self._held_done(at + 1, out)
            at += 1
        self._held.append(s[start:])
        return n

    def _held_done(self, at: int, out: list[str]) -> int:
        text = "".join(self._held)
        self._held = []
        try:
            value = read_json(text, strict=self._strict).value
        except ArgumentsError:
            return self._stop()
        if not self._kept(value):
            return self._stop()
        member = self._member((value,))
        if member is None:
            return self._stop()
        out.append(member)
        self.given.append(("".join(self._key), value, True))
        self._state = _AFTER
        return at

    # -- the schema, field by field

    def _decide(self, key: str) -> str:
        """How the field ``key`` is given: ``stream`` (a plain text, as it comes), ``keep``
        (as written), ``typed`` (held, given when typing keeps it) or ``stop``."""
        if key in self._keys:
            return "stop"  # given twice: the final text has the last one, in the first's place
        if self._strict:
            return "keep"  # as written, or the call is refused and goes as written
        schema = self._schema
        assert schema is not None
        own = schema.get("properties")
        own = own if isinstance(own, Mapping) else {}
        if key in own:
            self._sub = own[key]
        else:
            patterns = schema.get("patternProperties")
            if isinstance(patterns, Mapping) and (
                matching_pattern(patterns, key) or has_unchecked(patterns)
            ):
                return "stop"
            extra = schema.get("additionalProperties")
            if extra is True:
                return "stop" if self._text_values else "keep"
            if not isinstance(extra, Mapping):
                return "stop"  # not a field the tool takes: dropped, so the texts part here
            self._sub = extra
        sub = self._sub
        if not isinstance(sub, Mapping):
            return "stop" if sub is not True else "keep"
        if sub.get("type") == "string" and set(sub) <= _PLAIN_STRING:
            return "stream"
        if self._text_values or "$ref" in json.dumps(sub, default=str):
            return "stop"
        return "typed"

    def _kept(self, value: Any) -> bool:
        """Does typing leave this complete value exactly as it is?"""
        if self._policy == "keep":
            return True
        sub = self._sub
        key = "".join(self._key)
        schema = self._schema or {}
        required = schema.get("required")
        if isinstance(value, str) and value.strip() == "null":
            return False  # a grammar that writes every value as text means null by it
        required_here = isinstance(required, list) and key in required
        if value is None and not required_here and not allows_null(sub, sub):
            return False  # a null for an optional field that takes none: dropped
        try:
            done = normalise(value, sub)
        except Exception:  # a schema jsonschema cannot use: typing will say so at the end
            return False
        return not done.repairs and not done.dropped and _same(value, done.value)


def _by_field(schema: Mapping[str, Any] | None) -> bool:
    """Is ``schema`` typed field by field (an object's properties, nothing around them)?"""
    if not isinstance(schema, Mapping) or any(k in schema for k in _COMPOUND):
        return False
    return schema.get("type") in (None, "object") and "enum" not in schema
