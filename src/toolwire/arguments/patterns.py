"""A schema's ``pattern`` matched in linear time, or said to be unchecked — never a hang.

A tool schema comes from whoever declares the tool, and a call's arguments from a model that
a prompt can steer: Python's ``re`` backtracks, so ``^(a+)+$`` against 26 ``a`` and a ``!``
takes seconds and each more character doubles it. Every schema pattern is matched here with
RE2 (``google-re2``), whose work grows linearly with the text, within a memory bound for the
compiled program. JSON Schema patterns are ECMA-262 and unanchored, so a pattern is
*searched* for, and ECMA's escapes and classes are written the way RE2 spells them (ECMA's
``.`` stops at any line terminator, its ``\\s`` is Unicode white space, ``\\uXXXX`` is a code
point, ``(?<name>…)`` a named group).

A pattern RE2 cannot take (a back-reference, a look-around) or one longer than
:data:`MAX_PATTERN` cannot be checked safely: it is not checked — a value is not refused for
it, a field is not taken or refused by it — and :func:`unchecked` lists where such patterns
sit, so the caller can say so (the ``pattern-not-checked`` notice). Text longer than
:data:`MAX_TEXT` is not matched at all: it does not fit (:func:`fits` says why).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

import re2

__all__ = [
    "MAX_PATTERN",
    "MAX_TEXT",
    "Matcher",
    "compiled",
    "fits",
    "has_unchecked",
    "matching_pattern",
    "search",
    "unchecked",
]

#: The longest pattern compiled (characters); a longer one is not checked.
MAX_PATTERN = 4096
#: The longest text a pattern is matched against (characters); a longer one does not fit.
MAX_TEXT = 1_000_000
#: RE2's memory bound for one compiled pattern (bytes): a pattern past it is not checked.
_MAX_MEM = 8 << 20

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
    """One compiled pattern: :meth:`search` says whether the text holds a match."""

    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled

    def search(self, text: str) -> bool:
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


@lru_cache(maxsize=1024)
def compiled(pattern: str) -> Matcher | None:
    """``pattern`` compiled for linear-time matching, or None when it cannot be checked
    safely (a feature RE2 lacks, too long, past the memory bound)."""
    if len(pattern) > MAX_PATTERN:
        return None
    options = re2.Options()
    options.log_errors = False
    options.max_mem = _MAX_MEM
    try:
        return Matcher(re2.compile(_re2_spelling(pattern), options))
    except (re2.error, ValueError, TypeError):
        return None


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
