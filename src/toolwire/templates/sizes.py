"""How big a value is, or would become as text, found without building it.

The sandbox refuses an operation before it allocates, so it needs the size of what the
operation would make: ``str()`` of a list that holds one 4 MB string a thousand times is
4 GB, though the list itself is small. The walk here adds up an upper bound and stops as soon
as it passes the limit it was given, so its own cost is bounded by that limit (and it reads
the budget's clock as it goes).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from typing import Any

from jinja2 import Undefined
from jinja2.utils import Namespace
from markupsafe import Markup

from toolwire.errors import TemplateLimitError
from toolwire.templates.budget import TemplateBudget

__all__ = [
    "MAX_VALUE_CHARS",
    "MAX_VALUE_ITEMS",
    "check_chars",
    "check_compared",
    "check_items",
    "check_value",
    "format_spec_width",
    "printf_size",
    "text_size",
    "weight",
]

#: Largest string (characters) or bytes a template may build, pass to or get back from a
#: call or filter, or store in a ``namespace``; also the largest rendered prompt.
MAX_VALUE_CHARS = 4 * 1024 * 1024
#: Largest list, tuple, dict or set a template may build or hand to a call or filter.
#: Published templates hold a conversation's messages and tools, far below it; a bound on
#: items also bounds the work of any one filter over them.
MAX_VALUE_ITEMS = 100_000

_CHUNK = 65_536
_SEQUENCES = (list, tuple, set, frozenset)
_VIEWS: tuple[type, ...] = (type({}.keys()), type({}.values()), type({}.items()))


def check_chars(size: int, what: str) -> None:
    """Refuse a string of ``size`` characters before it is built."""
    if size > MAX_VALUE_CHARS:
        raise TemplateLimitError(
            f"chat template would build a str of {size:,} characters in {what} "
            f"(limit {MAX_VALUE_CHARS:,})"
        )


def check_items(count: int, what: str) -> None:
    """Refuse a collection of ``count`` items before it is built."""
    if count > MAX_VALUE_ITEMS:
        raise TemplateLimitError(
            f"chat template would build a collection of {count:,} items in {what} "
            f"(limit {MAX_VALUE_ITEMS:,})"
        )


def check_value(value: Any, what: str) -> None:
    """Refuse a string past :data:`MAX_VALUE_CHARS` or a collection past
    :data:`MAX_VALUE_ITEMS` (a value that exists, handed on: bound what the next step gets)."""
    if isinstance(value, (str, bytes, bytearray)):
        check_chars(len(value), what)
    elif isinstance(value, (*_SEQUENCES, dict)):
        check_items(len(value), what)


def weight(value: Any) -> int:
    """Bytes a newly built value occupies, not counting the items a collection shares with
    values that already exist (those were counted when they were built)."""
    return sys.getsizeof(value) if isinstance(value, (str, bytes, *_SEQUENCES, dict)) else 64


#: CPython's header of a compact non-ASCII string (``sys.getsizeof`` of one with no
#: characters would be this plus one terminating character).
_HEADER = sys.getsizeof("\xe9") - 2


def char_bytes(*texts: Any) -> int:
    """Bytes per character of a string built from ``texts``: CPython stores a string at the
    width of its widest character (1, 2 or 4 bytes), which its size tells without a scan."""
    width = 1
    for text in texts:
        if isinstance(text, str) and not text.isascii():
            width = max(width, (sys.getsizeof(text) - _HEADER) // (len(text) + 1))
    return min(max(width, 1), 4)


class _Over(Exception):
    """The walk passed its limit; it stops at once."""


class _Walk:
    """Adds up the length of ``str(value)`` (``repr`` for what a container holds)."""

    __slots__ = ("budget", "limit", "memo", "steps", "total")

    def __init__(self, limit: int, budget: TemplateBudget | None) -> None:
        self.limit = limit
        self.budget = budget
        self.total = 0
        self.steps = 0
        self.memo: dict[int, int] = {}

    def add(self, size: int) -> None:
        self.total += size
        if self.total > self.limit:
            raise _Over

    def tick(self) -> None:
        self.steps += 1
        if self.budget is not None and not self.steps % 4096:
            self.budget.check_time()

    def text(self, value: Any) -> None:
        """``str(value)``: a string is itself; anything else is its ``repr``."""
        if isinstance(value, Markup) or type(value) is str:
            self.add(len(value))
        elif isinstance(value, Undefined):
            self.add(0)
        else:
            self.repr(value)

    def repr(self, value: Any) -> None:
        self.tick()
        if isinstance(value, str):
            self.add(_repr_len(value) + (8 if isinstance(value, Markup) else 0))
        elif isinstance(value, (bytes, bytearray)):
            self.add(_repr_len(value) + (14 if isinstance(value, bytearray) else 0))
        elif value is None or isinstance(value, bool):
            self.add(5)
        elif isinstance(value, int):
            self.add(value.bit_length() * 30103 // 100_000 + 2)
        elif isinstance(value, float):
            self.add(24)
        elif isinstance(value, (*_SEQUENCES, dict, *_VIEWS, Namespace)):
            self.container(value)
        else:  # functions, macros, generators, loop objects, ranges: a short repr
            self.add(256)

    def container(self, value: Any) -> None:
        key = id(value)
        known = self.memo.get(key)
        if known is not None:
            self.add(known)
            return
        start = self.total
        self.add(len(type(value).__name__) + 14)  # brackets, a type name, a view's wrapper
        if isinstance(value, Namespace):
            value = object.__getattribute__(value, "_Namespace__attrs")
        items = value.items() if isinstance(value, Mapping) else value
        for item in items:
            if isinstance(value, Mapping):
                self.repr(item[0])
                self.repr(item[1])
                self.add(4)
            else:
                self.repr(item)
                self.add(2)
        self.memo[key] = self.total - start


def _repr_len(value: str | bytes | bytearray) -> int:
    """The exact length of ``repr(value)``, found a piece at a time so that the escapes of a
    long string never exist all at once."""
    if isinstance(value, str) and value.isascii() and value.isprintable():
        return len(value) + 2 + min(value.count("'"), value.count('"'))
    if len(value) <= _CHUNK:
        return len(repr(value))
    return 2 + sum(len(repr(value[i : i + _CHUNK])) - 2 for i in range(0, len(value), _CHUNK))


def text_size(value: Any, limit: int, budget: TemplateBudget | None = None) -> int:
    """An upper bound on ``len(str(value))``, or ``limit + 1`` as soon as it passes
    ``limit``. Deep values past Python's recursion limit raise :class:`RecursionError`, as
    ``str`` itself would."""
    walk = _Walk(limit, budget)
    try:
        walk.text(value)
    except _Over:
        return limit + 1
    return walk.total


def repr_size(value: Any, limit: int, budget: TemplateBudget | None = None) -> int:
    """An upper bound on ``len(repr(value))``, or ``limit + 1`` past ``limit``."""
    walk = _Walk(limit, budget)
    try:
        walk.repr(value)
    except _Over:
        return limit + 1
    return walk.total


_CONTAINERS = (*_SEQUENCES, dict, *_VIEWS)


def check_compared(left: Any, right: Any, budget: TemplateBudget | None) -> None:
    """Refuse to compare two containers whose text passes :data:`MAX_VALUE_CHARS`: Python
    compares a list item by item, so two lists that each hold one inner list twice, forty
    levels deep, are small but take 2**40 steps to compare (in C, where no clock is read)."""
    if isinstance(left, _CONTAINERS) and isinstance(right, _CONTAINERS):
        for side in (left, right):
            if text_size(side, MAX_VALUE_CHARS, budget) > MAX_VALUE_CHARS:
                raise TemplateLimitError(
                    f"chat template compared values of more than {MAX_VALUE_CHARS:,} "
                    "characters as text"
                )


#: The digits of a format spec: its width and precision (``>10.3f``), or a fill digit.
_DIGITS = re.compile(r"\d+")


def format_spec_width(spec: str) -> int:
    """The largest number in a ``format`` spec: a bound on the width or precision it asks
    for. Refuses a number too long to read."""
    widest = 0
    for digits in _DIGITS.findall(spec):
        if len(digits) > 9:
            raise TemplateLimitError(f"chat template asked for a format width of {digits[:12]}…")
        widest = max(widest, int(digits))
    return widest


#: One ``%`` conversion: mapping key, flags, width, precision, length modifier, type.
_PRINTF = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?(.)", re.DOTALL)


def printf_size(fmt: str, args: Any, budget: TemplateBudget | None) -> int:
    """An upper bound on ``len(fmt % args)``: the format's own text, the widest field each
    conversion asks for, and the text of every argument (as ``repr`` where a ``%r`` or
    ``%a`` asks for it)."""
    limit = MAX_VALUE_CHARS
    values = args if isinstance(args, tuple) else (args,)
    stars = [abs(v) for v in values if isinstance(v, int) and not isinstance(v, bool)]
    size = len(fmt)
    reprs = False
    for match in _PRINTF.finditer(fmt):
        for number in match.group(1, 2):
            if number == "*":
                size += max(stars, default=0)
            elif number:
                if len(number) > 9:
                    raise TemplateLimitError(f"chat template asked for a % width of {number[:12]}…")
                size += int(number)
        reprs = reprs or match.group(3) in "ra"
    if size > limit:
        return limit + 1
    measure = repr_size if reprs else text_size
    if isinstance(args, Mapping):
        values = tuple(args.values())
    for value in values:
        if size > limit:
            break
        size += measure(value, limit - size, budget)
    return size
