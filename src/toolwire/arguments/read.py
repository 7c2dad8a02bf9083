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
from typing import Any, NamedTuple

from ..errors import ArgumentsError

__all__ = ["MAX_ARGUMENT_CHARS", "MAX_ARGUMENT_DEPTH", "ReadError", "ReadResult", "read_json"]

#: Arguments longer than this are refused unread.
MAX_ARGUMENT_CHARS = 4 * 1024 * 1024
#: Objects and lists nested deeper than this are refused.
MAX_ARGUMENT_DEPTH = 100

_WS = re.compile(r"[ \t\r\n]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$\-]*")
_FAST_STRING = re.compile(r'"[^"\\\x00-\x1f]*(?:\\["\\/bfnrtu][^"\\\x00-\x1f]*)*"')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_HEX_PREFIX = re.compile(r"[0-9a-fA-F]{0,3}")
# A high surrogate escape with the text ending before its pair is complete: cut off.
_HIGH_SURROGATE_AT_END = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}(?:\\(?:u[0-9a-fA-F]{0,3})?)?\Z")
_LITERALS: dict[str, tuple[Any, bool]] = {
    "true": (True, False),
    "false": (False, False),
    "null": (None, False),
    "True": (True, True),
    "False": (False, True),
    "None": (None, True),
}


class ReadResult(NamedTuple):
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


# One decoder, made once: the C scanner, refusing NaN, Infinity and numbers that overflow.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def read_json(
    text: str,
    *,
    strict: bool = False,
    max_chars: int = MAX_ARGUMENT_CHARS,
    max_depth: int = MAX_ARGUMENT_DEPTH,
) -> ReadResult:
    """Read almost-JSON. ``strict`` refuses any repair. Raises :class:`ReadError` only."""
    if not isinstance(text, str):
        raise ReadError(f"the arguments are {type(text).__name__}, not text")
    if len(text) > max_chars:
        raise ReadError(
            f"the arguments are {len(text):,} characters long, over {max_chars:,}", limit=True
        )
    try:
        value = _DECODER.decode(text)
    except (ValueError, RecursionError):
        pass
    else:
        if text.count("{") + text.count("[") > max_depth and _depth_exceeds(value, max_depth):
            msg = f"the arguments are nested deeper than {max_depth} levels"
            raise ReadError(msg, limit=True)
        return ReadResult(value)
    fenced, had_fence = _unfence(text)
    if had_fence and not strict:  # a fence around valid JSON: the C decoder still reads it
        try:
            value = _DECODER.decode(fenced)
        except (ValueError, RecursionError):
            pass
        else:
            if fenced.count("{") + fenced.count("[") <= max_depth or not _depth_exceeds(
                value, max_depth
            ):
                return ReadResult(value, ("code-fence",))
    return _read_slow(text, strict=strict, max_depth=max_depth)


def _unfence(text: str) -> tuple[str, bool]:
    """The text inside a Markdown code fence around the whole of it, if there is one."""
    start = len(text) - len(text.lstrip())
    if not text.startswith("```", start):
        return text, False
    first_line_end = text.find("\n", start)
    if first_line_end < 0:
        return text, False
    close = text.rfind("```")
    if close > first_line_end and not text[close + 3 :].strip():
        return text[first_line_end + 1 : close], True
    return text[first_line_end + 1 :], True


def _read_slow(text: str, *, strict: bool, max_depth: int) -> ReadResult:
    """The full reader: every slip, and the refusals with line and column."""
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


_SKIP = re.compile(r"(?:[ \t\r\n]+|//[^\n]*|#[^\n]*|/\*(?:[^*]|\*(?!/))*(?:\*/|\Z))*")
_SKIP_START = frozenset(" \t\r\n/#")
_T_STRING, _T_PUNCT, _T_NUMBER, _T_WORD, _T_SQ, _T_COMMENT, _T_END = 1, 2, 3, 4, 5, 6, -1
_TOKEN = re.compile(
    r'[ \t\r\n]*(?:("[^"\\\x00-\x1f]*(?:\\["\\/bfnrtu][^"\\\x00-\x1f]*)*")'  # 1: a string
    r"|([{}\[\],:])"  # 2
    r"|(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)(?![0-9A-Za-z_.$\-])"  # 3
    r"|([A-Za-z_$][A-Za-z0-9_$\-]*)"  # 4: a word
    r"|'([^'\\\x00-\x1f]*)'"  # 5: a single-quoted string without escapes
    r"|(//[^\n]*|#[^\n]*|/\*(?:[^*]|\*(?!/))*\*/))"  # 6: a comment
)
_COLON = re.compile(r"[ \t\r\n]*:")
_BLANKS = frozenset(" \t\r\n")
_BLANK_RUN = re.compile(r"[ \t\r\n]+")
_PUNCTUATION = frozenset("{}[],:")
_WORD_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_$")
_PLAIN_STRING = re.compile(r'"[^"\\\x00-\x1f]*"')
_INF = float("inf")
_KEY, _VALUE, _AFTER = range(3)


class _Reader:
    """One pass over the text with an explicit stack: no recursion, bounded depth."""

    def __init__(self, text: str, max_depth: int) -> None:
        self.s = text
        self.n = len(text)
        self.pos = 0
        self.max_depth = max_depth
        self.repairs: dict[str, int] = {}  # name -> position first seen (insertion ordered)

    def repair(self, name: str, pos: int) -> None:
        if name not in self.repairs:
            self.repairs[name] = pos

    def skip(self, pos: int) -> int:
        """Past whitespace and comments."""
        if pos >= self.n or self.s[pos] not in _SKIP_START:
            return pos
        m = _SKIP.match(self.s, pos, self.n)
        end = m.end() if m else pos
        if end > pos and ("/" in self.s[pos:end] or "#" in self.s[pos:end]):
            self.repair("comments", pos)
        return end

    # ------------------------------------------------------------------ top level

    def run(self) -> Any:
        self._unfence()
        pos = self.skip(self.pos)
        if pos >= self.n:
            raise _Stop("there are no arguments, not even {}", pos)
        value, pos = self.value(pos)
        pos = self.skip(pos)
        if pos < self.n and isinstance(value, dict) and self.s[pos] == "{":
            value, pos = self._run_together(value, pos)
        if pos < self.n:
            raise _Stop("unexpected text after the arguments", pos)
        return value

    def _unfence(self) -> None:
        inner, fenced = _unfence(self.s)
        if fenced:
            start = len(self.s) - len(self.s.lstrip())
            self.repair("code-fence", start)
            self.pos = self.s.index("\n", start) + 1
            self.n = self.pos + len(inner)

    def _run_together(self, first: dict[str, Any], pos: int) -> tuple[dict[str, Any], int]:
        objects = [first]
        second = pos
        n, s = self.n, self.s
        while pos < n and s[pos] == "{":
            obj, pos = self.value(pos)
            objects.append(obj)
            pos = self.skip(pos)
            if pos < n and s[pos] == ",":
                pos = self.skip(pos + 1)
        seen: set[str] = set()
        for obj in objects:
            if any(key in seen for key in obj):
                self.repair("extra-objects", second)
                return first, pos
            seen.update(obj)
        self.repair("joined-objects", second)
        merged: dict[str, Any] = {}
        for obj in objects:
            merged.update(obj)
        return merged, pos

    # ------------------------------------------------------------------ values

    def token(self, pos: int) -> tuple[int, Any, int, int]:
        """The next token after ``pos``: (kind, value, start, end).

        One regular expression takes whitespace and the common tokens in a single match;
        anything else (comments, single quotes, broken strings, bad numbers) goes the slow
        way, which also finds what is wrong.
        """
        s = self.s
        m = _TOKEN.match(s, pos, self.n)
        if m is not None:
            kind = m.lastindex
            if kind == _T_STRING:
                text = m.group(kind)
                if "\\" not in text:
                    return _T_STRING, text[1:-1], m.start(kind), m.end()
                try:
                    return _T_STRING, json.loads(text), m.start(kind), m.end()
                except ValueError:  # e.g. a lone surrogate escape: read it the slow way
                    pass
            elif kind == _T_NUMBER:
                text = m.group(kind)
                try:
                    number: Any = float(text) if any(c in text for c in ".eE") else int(text)
                except ValueError:
                    raise _Stop("a number too long to read", m.start(kind)) from None
                if number in (_INF, -_INF):
                    raise _Stop("a number too large to read", m.start(kind))
                return _T_NUMBER, number, m.start(kind), m.end()
            elif kind in (_T_PUNCT, _T_WORD):
                return kind, m.group(kind), m.start(kind), m.end()
        pos = self.skip(pos)
        if pos >= self.n:
            return _T_END, None, pos, pos
        c = s[pos]
        if c == '"' or c == "'":
            value, end = self.string(pos)
            return _T_STRING, value, pos, end
        if c == "-" or "0" <= c <= "9":
            value, end = self.number(pos)
            return _T_NUMBER, value, pos, end
        m = _WORD.match(s, pos, self.n)
        if m:
            return _T_WORD, m.group(), pos, m.end()
        if c in "{}[],:":
            return _T_PUNCT, c, pos, pos + 1
        raise _Stop(f"unexpected {c!r}", pos)

    def value(self, pos: int) -> tuple[Any, int]:
        """Read one value at ``pos``: the value and where it ends."""
        token = self.token
        blanks = _BLANK_RUN.match
        plain = _PLAIN_STRING.match
        word = _WORD.match
        colon = _COLON.match
        s, n = self.s, self.n
        stack: list[Any] = []  # open containers
        keys: list[str] = []  # the pending key of each open object ("" for lists)
        state = _VALUE
        after_comma = False
        tok: Any
        while True:
            # the common tokens inline, by their first character (the reader's hot path)
            c = s[pos] if pos < n else ""
            if c in _BLANKS:
                pos = blanks(s, pos, n).end()  # type: ignore[union-attr]
                c = s[pos] if pos < n else ""
            if c in _PUNCTUATION:
                kind, tok, start = _T_PUNCT, c, pos
                pos += 1
            elif c == '"' and (m := plain(s, pos, n)) and "\\" not in (tok := m.group()):
                kind, tok, start = _T_STRING, tok[1:-1], pos
                pos = m.end()
            elif c in _WORD_START and (m := word(s, pos, n)):
                kind, tok, start = _T_WORD, m.group(), pos
                pos = m.end()
            else:
                kind, tok, start, pos = token(pos)
                if kind == _T_COMMENT:
                    continue
            if kind == _T_END:
                if not stack:
                    raise _Stop("the arguments end where a value should be", start)
                if state == _VALUE and isinstance(stack[-1], dict):
                    raise _Stop(f"the arguments end before the value of {keys[-1]!r}", start)
                return self._close_all(stack, keys, start), start
            if state == _VALUE:
                if kind == _T_PUNCT:
                    if tok == "{" or tok == "[":
                        if len(stack) >= self.max_depth:
                            what = f"the arguments are nested deeper than {self.max_depth} levels"
                            raise _Stop(what, start, limit=True)
                        stack.append({} if tok == "{" else [])
                        keys.append("")
                        state = _KEY if tok == "{" else _VALUE
                        after_comma = False
                        continue
                    if (
                        tok == "]"
                        and stack
                        and isinstance(stack[-1], list)
                        and (after_comma or not stack[-1])
                    ):
                        if after_comma:
                            self.repair("trailing-comma", start)
                        value: Any = stack.pop()
                        keys.pop()
                    elif tok == ",":
                        raise _Stop("a comma with nothing before it", start)
                    else:
                        raise _Stop(f"unexpected {tok!r} where a value should be", start)
                elif kind == _T_WORD:
                    if tok not in _LITERALS:
                        raise _Stop(f"unexpected word {tok[:40]!r} where a value should be", start)
                    value, python = _LITERALS[tok]
                    if python:
                        self.repair("python-literals", start)
                else:
                    value = tok
            elif state == _KEY:
                if kind == _T_PUNCT and tok == "}":
                    if after_comma:
                        self.repair("trailing-comma", start)
                    value = stack.pop()
                    keys.pop()
                elif kind in (_T_STRING, _T_WORD):
                    if kind == _T_WORD:
                        self.repair("bare-keys", start)
                    after_key = colon(s, pos, n)
                    if after_key is not None:
                        pos = after_key.end()
                    else:
                        kind2, sep, start2, pos = token(pos)
                        if kind2 == _T_END:
                            raise _Stop(f"the arguments end before the value of {tok!r}", start2)
                        if kind2 != _T_PUNCT or sep != ":":
                            raise _Stop(f"expected ':' after the key {tok!r}", start2)
                    keys[-1] = tok
                    state = _VALUE
                    after_comma = False
                    continue
                elif kind == _T_PUNCT and tok == ",":
                    raise _Stop("a comma with nothing before it", start)
                else:
                    raise _Stop(f"expected a key, found {str(tok)[:40]!r}", start)
            else:  # _AFTER a value inside a container
                top = stack[-1]
                if kind == _T_PUNCT and tok == ",":
                    after_comma = True
                    state = _KEY if isinstance(top, dict) else _VALUE
                    continue
                if kind == _T_PUNCT and tok == ("}" if isinstance(top, dict) else "]"):
                    value = stack.pop()
                    keys.pop()
                else:
                    sep = "',' or '}'" if isinstance(top, dict) else "',' or ']'"
                    raise _Stop(f"expected {sep}", start)
            # a value is complete: hand it to its container, or return it
            if not stack:
                return value, pos
            top = stack[-1]
            if isinstance(top, dict):
                top[keys[-1]] = value
            else:
                top.append(value)
            state = _AFTER
            after_comma = False

    def _close_all(self, stack: list[Any], keys: list[str], pos: int) -> Any:
        """The text ended with containers open: close them, each into its parent."""
        self.repair("unclosed-brackets", pos)
        for i in range(len(stack) - 1, 0, -1):
            parent = stack[i - 1]
            if isinstance(parent, dict):
                parent[keys[i - 1]] = stack[i]
            else:
                parent.append(stack[i])
        return stack[0]

    def number(self, pos: int) -> tuple[Any, int]:
        s = self.s
        m = _NUMBER.match(s, pos, self.n)
        if not m:
            raise _Stop("a malformed number", pos)
        end = m.end()
        if end < self.n and (s[end].isalnum() or s[end] in "._"):
            raise _Stop("a malformed number", pos)
        text = m.group()
        try:
            value: Any = float(text) if m.group(1) or m.group(2) else int(text)
        except ValueError:
            raise _Stop("a number too long to read", pos) from None
        if value in (float("inf"), float("-inf")):
            raise _Stop("a number too large to read", pos)
        return value, end

    def string(self, start: int) -> tuple[str, int]:
        s = self.s
        quote = s[start]
        if quote == '"':
            m = _FAST_STRING.match(s, start, self.n)
            if m:
                text = m.group()
                if "\\" not in text:
                    return text[1:-1], m.end()
                try:
                    decoded: str = json.loads(text)
                    return decoded, m.end()
                except ValueError:  # e.g. a lone surrogate escape: read it the slow way
                    pass
        else:
            self.repair("single-quotes", start)
        return self._slow_string(start, quote)

    def _slow_string(self, start: int, quote: str) -> tuple[str, int]:
        s, n = self.s, self.n
        out: list[str] = []
        i = start + 1
        special = _SPECIAL_DQ if quote == '"' else _SPECIAL_SQ
        while True:
            m = special.search(s, i, n)
            if m is None:
                out.append(s[i:n])
                self.repair("unclosed-string", start)
                return "".join(out), n
            j = m.start()
            out.append(s[i:j])
            c = s[j]
            if c == quote:
                return "".join(out), j + 1
            if c != "\\":
                self.repair("control-characters", j)
                out.append(c)
                i = j + 1
                continue
            tail = s[j + 1 : j + 6]
            if j + 1 >= n or (tail[:1] == "u" and j + 6 > n and _HEX_PREFIX.fullmatch(tail[1:])):
                self.repair("unclosed-string", start)
                return "".join(out), n
            if _HIGH_SURROGATE_AT_END.match(s, j, n):
                # the text ends inside an escape: it is cut off, not something to keep
                self.repair("unclosed-string", start)
                return "".join(out), n
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
                out.append(chr(code))  # a lone surrogate stays, as json.loads keeps it
            else:
                self.repair("invalid-escape", j)
                out.append("\\")
                i = j + 1


_SPECIAL_DQ = re.compile(r'[\\\x00-\x1f"]')
_SPECIAL_SQ = re.compile(r"[\\\x00-\x1f']")
