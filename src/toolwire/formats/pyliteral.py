"""Argument values written as literals, read by hand as they stream: Python's, or Gemma 4's.

LFM2 (``<|tool_call_start|>[f(a=1)]<|tool_call_end|>``) and Llama 4's bare list
(``[f(a=1)]``) write each argument as a Python literal; Gemma 4 writes
``{key:<|"|>text<|"|>,n:3}``. Both are the same small grammar of strings, numbers, a few
named constants, lists and mappings, differing only in the details a :class:`Dialect` names.

Nothing here calls ``eval`` or ``ast.literal_eval``: :class:`LiteralReader` is one explicit
state machine with a stack instead of recursion, so a value of any size is read in linear
time, nesting deeper than ``MAX_JSON_DEPTH`` fails at once, and a chunk may end anywhere (the
reader stops at the start of a partial token, never more than a few characters, and the
caller holds those back). The value is handed on as JSON values, untyped, and as JSON text
streamed while it is read, so a long string argument reaches the client as it is written.

Tolerances, each because a template or llama.cpp's reading of these models needs it:

- Python strings may hold raw newlines and tabs (LFM2.5's template writes values verbatim
  between quotes); the escapes are Python's.
- The Python dialect also reads JSON's ``true``/``false``/``null`` (LFM2.5's template writes
  mappings with ``tojson``); Gemma's also reads ``None`` (what Jinja makes of a null).
- Trailing commas where Python allows them, ``[1, 2,]``.

Loose readings, only when the reader is made ``loose`` (a call list not read ``strict``), and
only for an argument's own value, never inside a list or mapping: published templates write
a call's values by hand, and a model writes what its template taught it.

- Unquoted text (``city=Paris``, ``time=07:30``), as Llama 3.2's and Llama 4's pythonic
  templates write a string: a value that is no literal is text up to the ``,`` before the next
  ``key=`` or the ``)`` that ends the call (a ``)`` followed by ``,``, ``]``, ``<``, ``;``, a
  line break or the reply's end). It is handed on as a string, typed later by the schema.
- A quote inside a quoted value left unescaped (``time="say "hi""``), as a template writing
  ``"{{ value }}"`` makes it: a quote closes the value only where the value can end (before
  a ``,`` and the next ``key=``, the call's ``)``, or, see the next point, the next ``key=``);
  any other quote is the text's own.
- A comma left out between two arguments (``city="Paris"days=3``), as vLLM's Gemma 3
  pythonic template writes them: read by the call list, which asks :attr:`loosened`.

Each decision looks at most ``LOOK_AHEAD`` characters past the quote or comma, so the reader
waits on at most that much text and stays linear; what it loosened is in :attr:`loosened`,
for the caller's notice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .base import MAX_JSON_DEPTH, json_text
from .dialects import Dialect
from .markerstream import DONE, FAILED, WS, expect_literal
from .scan import Markers

__all__ = ["LiteralReader"]

#: The longest number or named constant read; longer is no literal (and never reaches int()).
MAX_TOKEN = 64
#: The longest bare key (Gemma), like a tool or parameter name.
MAX_KEY = 256
#: How far a loose reading looks past a quote or comma to decide whether a value ends there;
#: under the stream's bound on held text (markerstream.MAX_HELD).
LOOK_AHEAD = 48


#: A control character, in a string whose dialect holds none raw.
_CONTROL = re.compile(r"[\x00-\x1f]")

_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\Z")
_NUMBER_CHARS = re.compile(r"[-+0-9.eE]*")
_WORD_CHARS = re.compile(r"[A-Za-z_]*")
_KEY_CHARS = re.compile(r"[^\s:{}\[\],<>\"']*")
#: Python's one-character escapes; a backslash before a newline continues the line.
_SIMPLE_ESCAPES = {**dict(zip("\\'\"abfnrtv", "\\'\"\a\b\f\n\r\t\v", strict=True)), "\n": ""}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_OCTAL = "01234567"
_SURROGATE = re.compile("[\ud800-\udfff]")
#: An argument's name and its ``=``, as a loose reading looks for the next one.
_NEXT_ARG = re.compile(r"[A-Za-z_$][\w$\-]*[ \t]*(=)?")
_BLANKS = " \t\r\n"
#: Where unquoted text may end (the next argument's comma or the call's parenthesis), and
#: the parentheses it opens itself (``f(x)``), which its own ``)`` closes.
_RAW_STOP = re.compile(r"[,()]")
#: What may follow a call's ``)``: the next call, the list's end, a closing tag, a line break,
#: Python's statement separator.
_AFTER_CALL = ",]<\r\n;"

# states
_VALUE, _ITEM, _KEY, _COLON, _AFTER, _STRING, _NUMBER_TOKEN, _WORD, _BARE_KEY, _RAW = range(10)


def _run(chars: re.Pattern[str], s: str, i: int) -> int:
    """The end of the run of ``chars`` at ``s[i]``."""
    m = chars.match(s, i)
    return i if m is None else m.end()


def _run_of(s: str, i: int, limit: int, chars: str) -> int:
    """The end of the run of ``chars`` at ``s[i]``, at most ``limit``."""
    while i < limit and s[i] in chars:
        i += 1
    return i


#: What closes each container: a tuple is read as a list (JSON has none).
_CLOSERS = {"[": "]", "{": "}", "(": ")"}


class _Frame:
    """An open list or mapping."""

    __slots__ = ("closer", "container", "count", "key")

    def __init__(self, container: list[Any] | dict[str, Any], closer: str) -> None:
        self.container = container
        #: What closes it: ``]``, ``}``, or ``)`` (a tuple, read as a list).
        self.closer = closer
        self.count = 0
        self.key: str | None = None


class LiteralReader:
    """Reads one literal value, fed as successive ``(text, start)`` pieces.

    :meth:`feed` returns where it stopped: past the value once ``done``; at the offending
    character once ``problem`` is set; else at the end of the text or at the start of a
    partial token (a quote, an escape, a delimiter) the caller holds until more text comes.
    ``emit`` receives the value as JSON text while it is read. ``loose`` allows the readings
    the module docstring names; each one used is named in ``loosened``. Set ``final`` once the
    text fed is all there is, so a loose reading decides at its end instead of waiting.
    """

    def __init__(
        self,
        dialect: Dialect,
        emit: Callable[[str], None],
        max_depth: int = MAX_JSON_DEPTH,
        *,
        loose: bool = False,
        separators: bool = False,
    ) -> None:
        self.dialect = dialect
        #: A comma left out between two entries of a mapping is read as there (named in
        #: ``loosened``): a mapping whose keys are bare words (Gemma's) says where each
        #: entry starts without it.
        self.separators = separators and dialect.bare_keys
        #: So too a JSON string where the dialect delimits its own (Gemma's ``"a \"b\""``
        #: beside ``<|"|>…<|"|>``, as Ollama reads it), its escapes read as Python's.
        delimiter = dialect.string_delimiter
        self.quoted = self.separators and bool(delimiter) and not delimiter.startswith('"')
        self._emit = emit
        self._max_depth = max_depth
        self._stack: list[_Frame] = []
        self._state = _VALUE
        self._parts: list[str] = []  # the string, number, word or bare key being read
        self._size = 0
        self._closer = ""
        self._delimiter = Markers((dialect.string_delimiter,)) if dialect.string_delimiter else None
        self._is_key = False
        self._surrogates = False
        self.value: Any = None
        self.done = False
        self.problem = ""
        self.loose = loose
        #: A string held a raw line break or tab its dialect writes escaped (read, to name).
        self.raw_controls = False
        self.final = False
        #: The loose readings used, each named once (``"an unquoted value"``, ...).
        self.loosened: list[str] = []
        self._blank = ""  # unquoted text's trailing white space, emitted once text follows
        self._opened = 0  # the parentheses unquoted text opened and has not closed

    @property
    def depth(self) -> int:
        """How many lists and mappings are open where reading stopped."""
        return len(self._stack)

    @property
    def in_string(self) -> bool:
        """Whether reading stopped inside a string (or a raw run of text)."""
        return self._state in (_STRING, _RAW)

    # ------------------------------------------------------------------ feeding

    def feed(self, s: str, i: int) -> int:
        n = len(s)
        while i < n and not self.done and not self.problem:
            j = self._step(s, i)
            if j < 0:  # a partial token at s[i]: wait for more
                break
            i = j
        return i

    def _fail(self, i: int, problem: str) -> int:
        self.problem = problem
        return i

    def _step(self, s: str, i: int) -> int:
        """One step from ``s[i]``: where it got to, ``-1`` to wait (or ``i`` with a problem)."""
        state = self._state
        if state == _STRING:
            return self._string(s, i)
        if state in (_NUMBER_TOKEN, _WORD, _BARE_KEY):
            return self._token(s, i)
        if state == _RAW:
            return self._raw(s, i)
        c = s[i]
        if c in WS:
            return i + 1
        if state == _VALUE:
            return self._value_start(s, i)
        frame = self._stack[-1]
        if state == _ITEM:  # after ``[`` (or a tuple's ``(``) or a list's comma
            if c == frame.closer and (frame.count == 0 or self.dialect.trailing_comma):
                return self._close(i)
            return self._value_start(s, i)
        if state == _KEY:  # after ``{`` or a mapping's comma
            if c == "}" and (frame.count == 0 or self.dialect.trailing_comma):
                return self._close(i)
            if self._opens_string(s, i):
                return self._open_string(s, i, is_key=True)
            if self.dialect.bare_keys and _run(_KEY_CHARS, s, i) > i:
                self._state = _BARE_KEY
                self._parts, self._size = [], 0
                return i
            return self._fail(i, "a mapping key that is not a string")
        if state == _COLON:
            if c != ":":
                return self._fail(i, "no : after a mapping key")
            self._state = _VALUE
            return i + 1
        # _AFTER: an item is complete
        is_map = isinstance(frame.container, dict)
        if c == ",":
            self._state = _KEY if is_map else _ITEM
            return i + 1
        if is_map and self.separators and (c.isalpha() or c == "_"):
            self._loosen("a comma left out")  # ``{a:<escape>x<escape>b:1}``
            self._state = _KEY
            return i
        if c == frame.closer:
            return self._close(i)
        return self._fail(i, f"expected , or {frame.closer}")

    # ------------------------------------------------------------------ values

    def _value_start(self, s: str, i: int) -> int:
        c = s[i]
        if self._opens_string(s, i):
            return self._open_string(s, i, is_key=False)
        if c in "[{" or (c == "(" and self.dialect.tuples):
            if len(self._stack) >= self._max_depth:
                return self._fail(i, f"nested deeper than {self._max_depth}")
            self._separate()
            is_map = c == "{"
            self._emit("{" if is_map else "[")
            container: list[Any] | dict[str, Any] = {} if is_map else []
            self._stack.append(_Frame(container, _CLOSERS[c]))
            self._state = _KEY if is_map else _ITEM
            return i + 1
        if c in "-+.0123456789":
            self._state = _NUMBER_TOKEN
        elif c.isalpha() or c == "_":
            self._state = _WORD
        elif self._loosely() and c not in ",)":  # ``city=)`` has no value at all
            return self._start_raw(i, "")
        else:
            return self._fail(i, f"{c!r} does not start a value")
        self._parts, self._size = [], 0
        return i

    def _separate(self) -> None:
        """A value starts: in a list after the first item, the JSON text needs a comma."""
        if self._stack and isinstance(self._stack[-1].container, list) and self._stack[-1].count:
            self._emit(", ")

    def _complete(self, value: Any, text: str | None) -> None:
        """A value is read; ``text`` is its JSON when not already emitted."""
        if text is not None:
            self._separate()
            self._emit(text)
        if not self._stack:
            self.value = value
            self.done = True
            return
        frame = self._stack[-1]
        if isinstance(frame.container, list):
            frame.container.append(value)
        else:
            assert frame.key is not None
            frame.container[frame.key] = value
            frame.key = None
        frame.count += 1
        self._state = _AFTER

    def _key(self, key: str, i: int) -> int:
        frame = self._stack[-1]
        assert isinstance(frame.container, dict)
        if key in frame.container:
            return self._fail(i, f"the key {key!r} is given twice")
        frame.key = key
        self._emit((", " if frame.count else "") + json.dumps(key, ensure_ascii=False) + ": ")
        self._state = _COLON
        return i

    def _close(self, i: int) -> int:
        frame = self._stack.pop()
        self._emit("]" if isinstance(frame.container, list) else "}")
        self._complete(frame.container, None)
        return i + 1

    # ------------------------------------------------------------------ tokens

    def _token(self, s: str, i: int) -> int:
        """A number, a named constant or a bare key, read up to the first other character."""
        state = self._state
        chars = _NUMBER_CHARS if state == _NUMBER_TOKEN else _WORD_CHARS
        if state == _BARE_KEY:
            chars = _KEY_CHARS
        j = _run(chars, s, i)
        self._parts.append(s[i:j])
        self._size += j - i
        if self._size > (MAX_KEY if state == _BARE_KEY else MAX_TOKEN):
            return self._fail(i, "a value too long to be a literal")
        if j == len(s):
            return j
        token = "".join(self._parts)
        self._parts = []
        if state == _BARE_KEY:
            return self._key(token, j)
        if self._loosely() and state == _NUMBER_TOKEN and _NUMBER.match(token):
            # a number run into the next argument, its comma left out (``days=3urgent=1``)
            limit = min(len(s), j + LOOK_AHEAD)
            names = self._names_argument(s, j, limit, None if limit == len(s) else False)
            if names is None and not self.final:  # wait: is it the next argument?
                self._parts = [token[: len(token) - (j - i)]] if len(token) > j - i else []
                self._size -= j - i
                return -1
            if names:
                self._loosen("a comma left out")
                return self._number(token, i, j)
        if (
            self._loosely()
            and s[j] not in "'\""  # a string's prefix (``r'a'``) is no text
            and (
                s[j] not in _BLANKS + ",)"
                or (state == _WORD and token not in self.dialect.words)
                or (state == _NUMBER_TOKEN and not _NUMBER.match(token))
            )
        ):  # a word or number that goes on as text: the text is the value
            return self._start_raw(j, token)
        if state == _WORD:
            if token not in self.dialect.words:
                return self._fail(i, f"{token!r} is not a value")
            value = self.dialect.words[token]
            self._complete(value, json.dumps(value))
            return j
        return self._number(token, i, j)

    def _number(self, token: str, i: int, j: int) -> int:
        """The number ``token`` read, up to ``s[j]``."""
        if not _NUMBER.match(token):
            return self._fail(i, f"{token!r} is not a number")
        number: int | float
        if any(c in token for c in ".eE"):
            number = float(token)
            if number in (float("inf"), float("-inf")):
                return self._fail(i, f"{token} is too large for a number")
        else:
            number = int(token)
        self._complete(number, json.dumps(number))
        return j

    # ------------------------------------------------------------------ strings

    def _opens_string(self, s: str, i: int) -> bool:
        delimiter = self.dialect.string_delimiter
        if delimiter:  # (loosely, a JSON string too: see _open_string)
            return s[i] == delimiter[0] or (s[i] == '"' and self.quoted)
        return s[i] in "'\""

    def _open_string(self, s: str, i: int, *, is_key: bool) -> int:
        delimiter = self.dialect.string_delimiter
        if delimiter and s[i] == '"' and self.quoted:  # (a JSON string: see ``quoted``)
            self._loosen("a quoted string")
            self._closer = '"'
            j = i + 1
        elif delimiter:
            status, j = expect_literal(s, i, delimiter)
            if status == FAILED:
                return self._fail(i, f"{s[i]!r} does not start a value")
            if status != DONE:
                return -1
            self._closer = delimiter
        else:
            q = s[i]
            ahead = s[i : i + 3]
            if ahead == q * 3:
                self._closer = q * 3
            elif len(ahead) < 3 and ahead == q * len(ahead):
                return -1  # ' or '' at the end: maybe the start of '''
            else:
                self._closer = q
            j = i + len(self._closer)
        self._is_key = is_key
        self._parts = []
        self._surrogates = False
        self._state = _STRING
        if not is_key:
            self._separate()
            self._emit('"')
        return j

    def _piece(self, text: str) -> None:
        if text:
            self._parts.append(text)
            if not self._is_key:  # a lone surrogate (half of a \u pair) only as an escape
                ascii_only = self._surrogates and _SURROGATE.search(text) is not None
                self._emit(json_text(text, ascii_only))

    def _string(self, s: str, i: int) -> int:
        if self._delimiter is not None and self._closer == self.dialect.string_delimiter:
            # no escapes: the text up to the delimiter
            j, end = self._delimiter.scan(s, i)
            self._piece(s[i:j])
            if not end:
                return j if j > i else -1
            return self._close_string(j + len(end))
        q = self._closer[0]
        j = s.find(q, i)
        k = s.find("\\", i, len(s) if j < 0 else j)
        stop = k if k >= 0 else (len(s) if j < 0 else j)
        if not self.dialect.raw_strings and len(self._closer) == 1:  # (a triple's are its own)
            for m in _CONTROL.finditer(s, i, stop):
                if m.group() not in "\n\r\t" or not self.loose:
                    self._piece(s[i : m.start()])
                    what = "a raw line break" if m.group() in "\n\r\t" else "a control character"
                    return self._fail(m.start(), f"{what} in a string")
                self.raw_controls = True
        self._piece(s[i:stop])
        if stop == len(s):
            return stop
        if k >= 0:
            return self._escape(s, k, stop > i)
        if len(self._closer) == 1 and not self._is_key and self._loosely():
            ends = self._value_ends(s, j + 1, after_quote=True)
            if ends is None:
                return j if j > i else -1
            if not ends:  # a quote the template left unescaped: the text's own
                self._loosen("an unescaped quote")
                self._piece(q)
                return j + 1
        if s.startswith(self._closer, j):
            return self._close_string(j + len(self._closer))
        if self._closer.startswith(s[j:]):
            return j if j > i else -1  # part of a closing ''' at the end: wait
        self._piece(q)  # one quote inside a triple-quoted string
        return j + 1

    def _escape(self, s: str, k: int, moved: bool) -> int:
        """Decode the escape at ``s[k]`` (a backslash)."""
        if k + 1 >= len(s):
            return k if moved else -1
        c = s[k + 1]
        if c in _SIMPLE_ESCAPES:
            self._piece(_SIMPLE_ESCAPES[c])
            return k + 2
        if c == "\r":  # a line continuation written with \r\n
            if k + 2 >= len(s):
                return k if moved else -1
            return k + (3 if s[k + 2] == "\n" else 2)
        if c in _OCTAL:
            digits = re.match(r"[0-7]{1,3}", s[k + 1 : k + 4])
            assert digits is not None
            if digits.end() < 3 and k + 1 + digits.end() == len(s):
                return k if moved else -1  # maybe more digits to come
            self._piece(chr(int(digits.group(), 8)))
            return k + 1 + digits.end()
        if c in _HEX_ESCAPES:
            width = _HEX_ESCAPES[c]
            digits_text = s[k + 2 : k + 2 + width]
            if not re.fullmatch(r"[0-9a-fA-F]*", digits_text):
                return self._fail(k, f"a bad \\{c} escape")
            if len(digits_text) < width:
                return k if moved else -1
            code = int(digits_text, 16)
            if code > 0x10FFFF:
                return self._fail(k, f"a bad \\{c} escape")
            self._surrogates = self._surrogates or 0xD800 <= code <= 0xDFFF
            self._piece(chr(code))
            return k + 2 + width
        self._piece("\\" + c)  # Python keeps an unknown escape as written
        return k + 2

    # ------------------------------------------------------------------ loose readings

    def _loosely(self) -> bool:
        """A loose reading applies here: allowed, and the argument's own value."""
        return self.loose and not self._stack

    def _loosen(self, what: str) -> None:
        if what not in self.loosened:
            self.loosened.append(what)

    def _value_ends(self, s: str, k: int, *, after_quote: bool) -> bool | None:
        """Whether the argument's value ends at ``s[k]`` (just past a quote, or at the ``,``
        or ``)`` after unquoted text): before a ``,`` and the next ``key=`` (or the call's
        ``)``), before a ``)`` that ends the call, or, after a quote, before the next
        ``key=`` (a comma left out). None while the text ends before it can tell."""
        n = len(s)
        limit = min(n, k + LOOK_AHEAD)
        # the window reached the text's end: wait for more, unless no more will come
        unknown: bool | None = None if limit == n and not self.final else False
        j = _run_of(s, k, limit, _BLANKS)
        if j == limit:
            return unknown
        c = s[j]
        if c == ",":
            j = _run_of(s, j + 1, limit, _BLANKS)
            if j == limit:
                return unknown
            return True if s[j] == ")" else self._names_argument(s, j, limit, unknown)
        if c == ")":
            j = _run_of(s, j + 1, limit, " \t")
            if j == limit:
                return True if limit == n and self.final else unknown
            return s[j] in _AFTER_CALL
        return self._names_argument(s, j, limit, unknown) if after_quote else False

    @staticmethod
    def _names_argument(s: str, j: int, limit: int, unknown: bool | None) -> bool | None:
        """Whether ``s[j:]`` opens an argument, ``key=``."""
        m = _NEXT_ARG.match(s, j, limit)
        if m is None:
            return False
        if m.group(1) is not None:
            return s[m.end() : m.end() + 1] != "="  # ``==`` is no argument
        return unknown if m.end() == limit else False

    def _start_raw(self, i: int, prefix: str) -> int:
        """Unquoted text from ``s[i]``, after ``prefix`` (a word or number it began with)."""
        self._loosen("an unquoted value")
        self._state = _RAW
        self._parts, self._blank, self._opened = [], "", 0
        self._is_key = False
        self._surrogates = False
        self._separate()
        self._emit('"')
        self._raw_piece(prefix)
        return i

    def _raw_piece(self, text: str) -> None:
        body = text.rstrip(_BLANKS)
        if body:
            self._piece(self._blank + body)
            self._blank = text[len(body) :]
        else:
            self._blank += text

    def _raw(self, s: str, i: int) -> int:
        m = _RAW_STOP.search(s, i)
        stop = len(s) if m is None else m.start()
        self._raw_piece(s[i:stop])
        if m is None:
            return stop
        if s[stop] == "(" or (s[stop] == ")" and self._opened):
            self._opened += 1 if s[stop] == "(" else -1
            self._raw_piece(s[stop])
            return stop + 1
        ends = self._value_ends(s, stop, after_quote=False)
        if ends is None:
            return stop if stop > i else -1
        if not ends:
            self._raw_piece(s[stop])
            return stop + 1
        text = "".join(self._parts)
        self._parts, self._blank = [], ""
        self._emit('"')
        self._complete(text, None)
        return stop

    def _close_string(self, j: int) -> int:
        text = "".join(self._parts)
        self._parts = []
        if self._surrogates:  # a pair written as two \u escapes is one character
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
        if self._is_key:
            return self._key(text, j)
        self._emit('"')
        self._complete(text, None)
        return j
