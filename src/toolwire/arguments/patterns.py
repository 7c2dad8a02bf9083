"""A schema's ``pattern`` matched in linear time, or said to be unchecked — never a hang.

A tool schema comes from whoever declares the tool, and a call's arguments from a model that
a prompt can steer: Python's ``re`` backtracks, so ``^(a+)+$`` against 26 ``a`` and a ``!``
takes seconds and each more character doubles it. Every schema pattern is matched here with
RE2 (``google-re2``), whose work grows linearly with the text, within a memory bound for the
compiled program. JSON Schema patterns are ECMA-262 and unanchored, so a pattern is
*searched* for, and ECMA's escapes and classes are written the way RE2 spells them (ECMA's
``.`` stops at any line terminator, its ``\\s`` is Unicode white space, ``\\uXXXX`` is a code
point, ``(?<name>…)`` a named group).

RE2's work is linear in the text, but not free in the pattern: a pattern of bounded repeats
(``(a{0,30}b?){0,30}``, a few dozen characters) compiles to thousands of instructions, and
matching costs up to the program's size for every character. So a pattern whose program is
larger than :data:`MAX_PROGRAM` instructions is not checked, and each match is charged to the
request's work budget (:mod:`toolwire.budget`) before it runs, at its worst case: the
program's size times the text's length.

A pattern RE2 cannot take (a back-reference, a look-around), one longer than
:data:`MAX_PATTERN` or one whose program is too large cannot be checked safely: it is not
checked — a value is not refused for it, a field is not taken or refused by it — and
:func:`unchecked` lists where such patterns sit, so the caller can say so (the
``pattern-not-checked`` notice). Text longer than :data:`MAX_TEXT` is not matched at all:
it does not fit (:func:`fits` says why).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

import re2

from ..budget import charge

__all__ = [
    "MAX_PATTERN",
    "MAX_PROGRAM",
    "MAX_TEXT",
    "Matcher",
    "compiled",
    "fits",
    "has_unchecked",
    "matching_pattern",
    "search",
    "unchecked",
    "weight",
]

#: The longest pattern compiled (characters); a longer one is not checked.
MAX_PATTERN = 4096
#: The longest text a pattern is matched against (characters); a longer one does not fit.
MAX_TEXT = 1_000_000
#: The largest compiled program (RE2 instructions) a pattern may have to be checked: an
#: honest pattern has tens to a few hundred (a host name's ``{1,63}`` parts, 507); one of
#: nested bounded repeats has tens of thousands, each costing a step per character matched.
#: RE2 compiles holding the interpreter's lock, so this also bounds how long one compiling
#: holds the event loop (4,000 instructions: about 30 ms).
MAX_PROGRAM = 4_000
#: RE2's memory bound for one compiled pattern (bytes): a pattern past it is not checked.
_MAX_MEM = 8 << 20
#: Pattern-instruction characters matched per step of the work budget: RE2's slowest path
#: (its NFA) takes about ten nanoseconds for each instruction and character.
_MATCHED_PER_STEP = 2_000

# ECMA-262 white space and line terminators (what its \s takes), as RE2 class members
_SPACE = (
    r"\t\n\x{0b}\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
    r"\x{feff}"
)
_DOT = r"[^\n\r\x{2028}\x{2029}]"
_ANY = r"[\x{0}-\x{10ffff}]"
_NOTHING = r"[^\x{0}-\x{10ffff}]"
_HEX = frozenset("0123456789abcdefABCDEF")


class Matcher:
    """One compiled pattern: :meth:`search` says whether the text holds a match, its worst
    cost charged to the active work budget first (:func:`toolwire.budget.charge`)."""

    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled
        self.size = int(compiled.programsize)

    def cost(self, text: str) -> int:
        """The steps a search of ``text`` may take at worst."""
        return 1 + self.size * len(text) // _MATCHED_PER_STEP

    def search(self, text: str) -> bool:
        charge(self.cost(text), "matching a pattern")
        return self._compiled.search(text) is not None


def _hex_at(pattern: str, i: int, n: int) -> bool:
    return i + n <= len(pattern) and all(c in _HEX for c in pattern[i : i + n])


def _escape(pattern: str, i: int, in_class: bool) -> tuple[str, int]:
    """The escape at ``pattern[i]`` (a backslash) in RE2's spelling, and where it ends."""
    if i + 1 >= len(pattern):
        return "\\", i + 1  # a lone backslash: RE2 refuses it, as ECMA does
    c = pattern[i + 1]
    if c == "u" and _hex_at(pattern, i + 2, 4):
        code = int(pattern[i + 2 : i + 6], 16)
        j = i + 6
        if 0xD800 <= code < 0xDC00 and pattern[j : j + 2] == "\\u" and _hex_at(pattern, j + 2, 4):
            low = int(pattern[j + 2 : j + 6], 16)
            if 0xDC00 <= low < 0xE000:  # a surrogate pair: one code point
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                j += 6
        return f"\\x{{{code:x}}}", j
    if c == "u" and pattern[i + 2 : i + 3] == "{":
        end = pattern.find("}", i + 3)
        if end > i + 3 and _hex_at(pattern, i + 3, end - i - 3):
            return f"\\x{{{pattern[i + 3 : end]}}}", end + 1
    if c == "x" and _hex_at(pattern, i + 2, 2):
        return f"\\x{{{pattern[i + 2 : i + 4]}}}", i + 4
    if c == "c" and i + 2 < len(pattern) and pattern[i + 2].isascii() and pattern[i + 2].isalpha():
        return f"\\x{{{ord(pattern[i + 2]) % 32:x}}}", i + 3
    if c == "b" and in_class:  # in a class, ECMA's \b is a backspace
        return r"\x{8}", i + 2
    if c == "s":
        return (_SPACE if in_class else f"[{_SPACE}]"), i + 2
    if c == "S" and not in_class:
        return f"[^{_SPACE}]", i + 2
    if c == "0" and not pattern[i + 2 : i + 3].isdigit():
        return r"\x{0}", i + 2
    if c in "/-":
        return ("\\" + c if in_class and c == "-" else c), i + 2
    return pattern[i : i + 2], i + 2


def _re2_spelling(pattern: str) -> str:
    """``pattern`` (ECMA-262) as RE2 reads it; one pass, so linear in its length."""
    out: list[str] = []
    i = 0
    in_class = False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            piece, i = _escape(pattern, i, in_class)
            out.append(piece)
            continue
        if in_class:
            in_class = c != "]"
            out.append("\\[" if c == "[" else c)  # a [ in a class is a member in ECMA
        elif c == "[":
            in_class = True
            # a leading ] is a member in RE2 but ends an empty class in ECMA
            negated = pattern[i + 1 : i + 2] == "^"
            start = i + 1 + negated
            if pattern[start : start + 1] == "]":  # ECMA's [] takes nothing, [^] anything
                out.append(_ANY if negated else _NOTHING)
                in_class = False
                i = start + 1
                continue
            out.append(pattern[i:start])
            i = start
            continue
        elif c == ".":
            out.append(_DOT)
        else:
            out.append(c)
        i += 1
    return "".join(out)


def weight(pattern: str) -> int:
    """The size ``pattern`` would have with every counted repeat written out (``x{2,5}`` is
    five ``x``, nested repeats multiply): a bound, up to a constant, on the instructions of
    its compiled program, found in one pass before anything is compiled. Past
    :data:`MAX_PROGRAM` the count stops (and says so: the result is then larger)."""
    sizes = [0]  # per open group: its size so far
    last = 0  # the size of the last atom, which a quantifier after it repeats
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":  # an escape: a character or a class (\d, \w), two instructions
            last = 2
            sizes[-1] += 2
            i += 2
            continue
        if c == "[":  # a class is one atom: skip to its end
            j = i + 1
            if pattern[j : j + 1] == "^":
                j += 1
            if pattern[j : j + 1] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            last = 2
            sizes[-1] += 2
            i = j + 1
            continue
        if c == "(":
            sizes.append(0)
            last = 0
        elif c == ")":
            inner = sizes.pop() + 1 if len(sizes) > 1 else 1
            sizes[-1] += inner
            last = inner
        elif c == "{":
            end = pattern.find("}", i)
            bounds = pattern[i + 1 : end].split(",") if end > i else []
            if 1 <= len(bounds) <= 2 and all(b.strip().isdigit() or b == "" for b in bounds):
                top = max((int(b[:6]) for b in bounds if b.strip()), default=1)
                sizes[-1] += last * top
                last = last * (top + 1)
                i = end + 1
                if sum(sizes) > MAX_PROGRAM:
                    return sum(sizes)
                continue
            last = 1
            sizes[-1] += 1
        elif c in "*+?|":
            sizes[-1] += 1
        else:
            last = 1
            sizes[-1] += 1
        i += 1
    return sum(sizes)


def _compile_cost(size: int) -> int:
    """The steps compiling a pattern of ``weight`` ``size`` may take: RE2's compiler is
    worse than linear in counted repeats (``[a-z]{1,1000}`` twice: 30 ms, 1,500 steps)."""
    return 1 + (size + size * size // 500) // 20


class _Compiled:
    """The patterns compiled so far, the most recent kept (a bounded cache, so a pattern
    seen before costs nothing: its compiling is charged only when it happens)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._kept: OrderedDict[str, Matcher | None] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, pattern: str) -> tuple[bool, Matcher | None]:
        with self._lock:
            if pattern in self._kept:
                self._kept.move_to_end(pattern)
                return True, self._kept[pattern]
        return False, None

    def put(self, pattern: str, matcher: Matcher | None) -> None:
        with self._lock:
            self._kept[pattern] = matcher
            if len(self._kept) > self._size:
                self._kept.popitem(last=False)


_COMPILED = _Compiled(1024)


def compiled(pattern: str) -> Matcher | None:
    """``pattern`` compiled for linear-time matching, or None when it cannot be checked
    safely (a feature RE2 lacks, too long, too large a program). Compiling is charged to
    the active work budget when it happens (a pattern compiled before costs nothing)."""
    found, matcher = _COMPILED.get(pattern)
    if found:
        return matcher
    if len(pattern) > MAX_PATTERN:
        return None
    size = weight(pattern)
    if size > MAX_PROGRAM:
        _COMPILED.put(pattern, None)
        return None
    charge(_compile_cost(size), "compiling a pattern")
    options = re2.Options()
    options.log_errors = False
    options.max_mem = _MAX_MEM
    try:
        done = re2.compile(_re2_spelling(pattern), options)
    except (re2.error, ValueError, TypeError):
        done = None
    matcher = Matcher(done) if done is not None and done.programsize <= MAX_PROGRAM else None
    _COMPILED.put(pattern, matcher)
    return matcher


def search(pattern: str, text: str) -> bool | None:
    """Whether ``text`` holds a match of ``pattern``; None when the pattern is not checked."""
    matcher = compiled(pattern)
    if matcher is None:
        return None
    return matcher.search(text)


def fits(pattern: str, text: str) -> str | None:
    """Why ``text`` does not fit ``pattern`` (None when it fits, or is not checked)."""
    if len(text) > MAX_TEXT:
        return f"longer than the {MAX_TEXT:,} characters a pattern is checked against"
    if search(pattern, text) is False:
        return "no match"
    return None


def matching_pattern(patterns: Any, key: str) -> str | None:
    """The first ``patternProperties`` pattern that takes ``key``; a pattern that is not
    checked takes none (:func:`has_unchecked` says whether one might)."""
    for pattern in patterns if isinstance(patterns, Mapping) else ():
        if isinstance(pattern, str) and len(key) <= MAX_TEXT and search(pattern, key):
            return pattern
    return None


def has_unchecked(patterns: Any) -> bool:
    """Whether a ``patternProperties`` holds a pattern that is not checked, which may take
    any field: such a field is neither refused nor typed by it."""
    return isinstance(patterns, Mapping) and any(
        isinstance(p, str) and compiled(p) is None for p in patterns
    )


#: Schema nodes visited when listing unchecked patterns, at most (a schema is bounded before).
_MAX_NODES = 100_000


def _walk(node: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every (place, pattern) in a schema, iteratively (a deep schema cannot blow the stack)."""
    stack = [(node, where)]
    seen = 0
    while stack and seen < _MAX_NODES:
        item, at = stack.pop()
        seen += 1
        if isinstance(item, Mapping):
            for key, child in item.items():
                place = f"{at}.{key}" if at else str(key)
                if key == "pattern" and isinstance(child, str):
                    yield place, child
                elif key == "patternProperties" and isinstance(child, Mapping):
                    yield from (
                        (f"{place}[{json.dumps(p)}]", p) for p in child if isinstance(p, str)
                    )
                    stack.extend((v, f"{place}[{json.dumps(p)}]") for p, v in child.items())
                elif key not in ("enum", "const", "default", "examples"):
                    stack.append((child, place))
        elif isinstance(item, list):
            stack.extend((child, f"{at}[{i}]") for i, child in enumerate(item))


@lru_cache(maxsize=256)
def _unchecked(dumped: str | bytes) -> tuple[str, ...]:
    found = [place for place, p in _walk(json.loads(dumped), "") if compiled(p) is None]
    return tuple(sorted(found))


def unchecked(dumped: str | bytes) -> tuple[str, ...]:
    """Where a schema (as canonical JSON) has a pattern that is not checked, as paths
    (``properties.host.pattern``), sorted."""
    return _unchecked(dumped)
