"""A reader of almost-JSON: what models write when they mean JSON.

It is ours, not a dependency, because its limits are the point: it accepts a named list of
slips and nothing else, never evaluates anything, never invents a value, bounds input size
and nesting depth, and runs in one pass (linear time on any input). Valid JSON takes the
C fast path of :func:`json.loads` and comes back with no repair recorded.

The slips, each recorded by name on the result the first time it is seen:

``code-fence``         the JSON sits in a Markdown code fence
``trailing-comma``     a comma before ``}`` or ``]``
``single-quotes``      a string in single quotes
``bare-keys``          an unquoted key
``python-literals``    ``True``, ``False``, ``None``
``comments``           ``// …``, ``/* … */`` or ``# …``
``control-characters`` a raw newline or tab inside a string
``invalid-escape``     a backslash before a character JSON does not escape (kept as written)
``unclosed-string``    the text ends inside a string
``unclosed-brackets``  the text ends inside an object or list
``joined-objects``     several objects run together with different keys: one call in pieces
``extra-objects``      several objects run together repeating keys: the first is kept
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..errors import ArgumentsError

__all__ = ["MAX_ARGUMENT_CHARS", "MAX_ARGUMENT_DEPTH", "ReadError", "ReadResult", "read_json"]

#: Arguments longer than this are refused unread.
MAX_ARGUMENT_CHARS = 4 * 1024 * 1024
#: Objects and lists nested deeper than this are refused.
MAX_ARGUMENT_DEPTH = 100

_WS = re.compile(r"[ \t\r\n]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$\-]*")
_FAST_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrtu])*"')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_HEX_PREFIX = re.compile(r"[0-9a-fA-F]{0,3}")
_LITERALS: dict[str, tuple[Any, bool]] = {
    "true": (True, False),
    "false": (False, False),
    "null": (None, False),
    "True": (True, True),
    "False": (False, True),
    "None": (None, True),
}


@dataclass(frozen=True)
class ReadResult:
    """The value read and the repairs it needed (empty for valid JSON)."""

    value: Any
    repairs: tuple[str, ...] = ()


class ReadError(ArgumentsError):
    """The text is not arguments we can read; says what and where."""

    def __init__(self, what: str, line: int = 0, column: int = 0, *, limit: bool = False) -> None:
        where = f" at line {line}, column {column}" if line else ""
        kind = "limit" if limit else "unreadable"
        super().__init__(f"{what}{where}", kind=kind, problems=(f"{what}{where}",))
        self.what = what
        self.line = line
        self.column = column


class _Stop(Exception):
    def __init__(self, what: str, pos: int, *, limit: bool = False) -> None:
        self.what = what
        self.pos = pos
        self.limit = limit


def _depth_exceeds(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError("a number too large to read")
    return value


def read_json(
    text: str,
    *,
    strict: bool = False,
    max_chars: int = MAX_ARGUMENT_CHARS,
    max_depth: int = MAX_ARGUMENT_DEPTH,
) -> ReadResult:
    """Read almost-JSON. ``strict`` refuses any repair. Raises :class:`ReadError` only."""
    if len(text) > max_chars:
        raise ReadError(
            f"the arguments are {len(text):,} characters long, over {max_chars:,}", limit=True
        )
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except (ValueError, RecursionError):
        pass
    else:
        if text.count("{") + text.count("[") <= max_depth or not _depth_exceeds(value, max_depth):
            return ReadResult(value)
        raise ReadError(f"the arguments are nested deeper than {max_depth} levels", limit=True)
    reader = _Reader(text, max_depth)
    try:
        value = reader.run()
    except _Stop as stop:
        line = text.count("\n", 0, stop.pos) + 1
        column = stop.pos - (text.rfind("\n", 0, stop.pos) + 1) + 1
        raise ReadError(stop.what, line, column, limit=stop.limit) from None
    except RecursionError:  # pragma: no cover - the depth limit keeps recursion shallow
        msg = f"the arguments are nested deeper than {max_depth} levels"
        raise ReadError(msg, limit=True) from None
    repairs = tuple(reader.repairs)
    if strict and repairs:
        first = repairs[0]
        pos = reader.repairs[first]
        line = text.count("\n", 0, pos) + 1
        column = pos - (text.rfind("\n", 0, pos) + 1) + 1
        raise ReadError(f"the arguments are not strict JSON ({first})", line, column)
    return ReadResult(value, repairs)


class _Reader:
    def __init__(self, text: str, max_depth: int) -> None:
        self.s = text
        self.n = len(text)
        self.pos = 0
        self.max_depth = max_depth
        self.repairs: dict[str, int] = {}  # name -> position first seen (insertion ordered)

    def repair(self, name: str, pos: int | None = None) -> None:
        if name not in self.repairs:
            self.repairs[name] = self.pos if pos is None else pos

    # ------------------------------------------------------------------ top level

    def run(self) -> Any:
        self._unfence()
        self.skip()
        if self.pos >= self.n:
            raise _Stop("there are no arguments, not even {}", self.pos)
        value = self.value(0)
        self.skip()
        if self.pos < self.n and isinstance(value, dict) and self.s[self.pos] == "{":
            value = self._run_together(value)
        if self.pos < self.n:
            raise _Stop("unexpected text after the arguments", self.pos)
        return value

    def _unfence(self) -> None:
        s = self.s
        start = len(s) - len(s.lstrip())
        if not s.startswith("```", start):
            return
        first_line_end = s.find("\n", start)
        if first_line_end < 0:
            return
        close = s.rfind("```")
        self.repair("code-fence", start)
        if close > first_line_end and not s[close + 3 :].strip():
            self.n = close
        self.pos = first_line_end + 1

    def _run_together(self, first: dict[str, Any]) -> dict[str, Any]:
        objects = [first]
        while self.pos < self.n and self.s[self.pos] == "{":
            objects.append(self.value(0))
            self.skip()
            if self.pos < self.n and self.s[self.pos] == ",":
                self.pos += 1
                self.skip()
        seen: set[str] = set()
        disjoint = True
        for obj in objects:
            if seen & obj.keys():
                disjoint = False
                break
            seen |= obj.keys()
        if not disjoint:
            self.repair("extra-objects")
            return first
        self.repair("joined-objects")
        merged: dict[str, Any] = {}
        for obj in objects:
            merged.update(obj)
        return merged

    # ------------------------------------------------------------------ pieces

    def skip(self) -> None:
        """Whitespace and comments."""
        s, n = self.s, self.n
        while True:
            m = _WS.match(s, self.pos, n)
            if m is not None:  # the pattern matches the empty string: always true
                self.pos = m.end()
            if self.pos >= n:
                return
            c = s[self.pos]
            if c == "#" or s.startswith("//", self.pos):
                self.repair("comments")
                end = s.find("\n", self.pos, n)
                self.pos = n if end < 0 else end + 1
            elif s.startswith("/*", self.pos):
                self.repair("comments")
                end = s.find("*/", self.pos + 2, n)
                self.pos = n if end < 0 else end + 2
            else:
                return

    def value(self, depth: int) -> Any:
        self.skip()
        if self.pos >= self.n:
            raise _Stop("the arguments end where a value should be", self.pos)
        c = self.s[self.pos]
        if c == "{":
            return self.container(depth + 1, "}")
        if c == "[":
            return self.container(depth + 1, "]")
        if c == '"' or c == "'":
            return self.string()
        if c == "-" or c.isdigit():
            return self.number()
        m = _WORD.match(self.s, self.pos, self.n)
        if m:
            word = m.group()
            if word in _LITERALS:
                value, python = _LITERALS[word]
                if python:
                    self.repair("python-literals")
                self.pos = m.end()
                return value
            raise _Stop(f"unexpected word {word[:40]!r} where a value should be", self.pos)
        raise _Stop(f"unexpected {c!r} where a value should be", self.pos)

    def container(self, depth: int, close: str) -> Any:
        if depth > self.max_depth:
            what = f"the arguments are nested deeper than {self.max_depth} levels"
            raise _Stop(what, self.pos, limit=True)
        is_object = close == "}"
        result: Any = {} if is_object else []
        self.pos += 1
        after_comma = False
        first = True
        while True:
            self.skip()
            if self.pos >= self.n:
                self.repair("unclosed-brackets")
                return result
            c = self.s[self.pos]
            if c == close:
                if after_comma:
                    self.repair("trailing-comma")
                self.pos += 1
                return result
            if not first and not after_comma:
                sep = "',' or '}'" if is_object else "',' or ']'"
                raise _Stop(f"expected {sep}", self.pos)
            if c == ",":
                raise _Stop("a comma with nothing before it", self.pos)
            if is_object:
                key = self.key()
                self.skip()
                if self.pos >= self.n:
                    raise _Stop(f"the arguments end before the value of {key!r}", self.pos)
                if self.s[self.pos] != ":":
                    raise _Stop(f"expected ':' after the key {key!r}", self.pos)
                self.pos += 1
                self.skip()
                if self.pos >= self.n:
                    raise _Stop(f"the arguments end before the value of {key!r}", self.pos)
                result[key] = self.value(depth)
            else:
                result.append(self.value(depth))
            first = False
            self.skip()
            after_comma = self.pos < self.n and self.s[self.pos] == ","
            if after_comma:
                self.pos += 1

    def key(self) -> str:
        c = self.s[self.pos]
        if c == '"' or c == "'":
            return self.string()
        m = _WORD.match(self.s, self.pos, self.n)
        if not m:
            raise _Stop(f"expected a key, found {c!r}", self.pos)
        self.repair("bare-keys")
        self.pos = m.end()
        return m.group()

    def number(self) -> Any:
        m = _NUMBER.match(self.s, self.pos, self.n)
        if not m or not m.group() or m.group() == "-":
            raise _Stop("a malformed number", self.pos)
        end = m.end()
        if end < self.n and (self.s[end].isalnum() or self.s[end] in "._"):
            raise _Stop("a malformed number", self.pos)
        text = m.group()
        try:
            value: Any = float(text) if m.group(1) or m.group(2) else int(text)
        except ValueError:
            raise _Stop("a number too long to read", self.pos) from None
        if value != value or value in (float("inf"), float("-inf")):
            raise _Stop("a number too large to read", self.pos)
        self.pos = end
        return value

    def string(self) -> str:
        s, start = self.s, self.pos
        quote = s[start]
        if quote == '"':
            m = _FAST_STRING.match(s, start, self.n)
            if m:
                self.pos = m.end()
                try:
                    decoded: str = json.loads(m.group())
                    return decoded
                except ValueError:  # e.g. a lone surrogate escape: read it the slow way
                    self.pos = start
        else:
            self.repair("single-quotes")
        out: list[str] = []
        i = start + 1
        n = self.n
        special = re.compile(r"[\\\x00-\x1f" + re.escape(quote) + "]")
        while True:
            m = special.search(s, i, n)
            if m is None:
                out.append(s[i:n])
                self.repair("unclosed-string", start)
                self.pos = n
                return "".join(out)
            j = m.start()
            out.append(s[i:j])
            c = s[j]
            if c == quote:
                self.pos = j + 1
                return "".join(out)
            if c != "\\":
                self.repair("control-characters", j)
                out.append(c)
                i = j + 1
                continue
            tail = s[j + 1 : j + 6]
            if j + 1 >= n or (tail[:1] == "u" and j + 6 > n and _HEX_PREFIX.fullmatch(tail[1:])):
                # the text ends inside an escape: it is cut off, not something to keep
                self.repair("unclosed-string", start)
                self.pos = n
                return "".join(out)
            e = s[j + 1]
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
                i = j + 2
            elif e == "'" and quote == "'":
                out.append("'")
                i = j + 2
            elif e == "u" and _HEX4.match(s, j + 2, n):
                code = int(s[j + 2 : j + 6], 16)
                i = j + 6
                if 0xD800 <= code < 0xDC00 and s.startswith("\\u", i) and _HEX4.match(s, i + 2, n):
                    low = int(s[i + 2 : i + 6], 16)
                    if 0xDC00 <= low < 0xE000:
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        i += 6
                out.append(chr(code) if not 0xD800 <= code < 0xE000 else "\ufffd")
            else:
                self.repair("invalid-escape", j)
                out.append("\\")
                i = j + 1
