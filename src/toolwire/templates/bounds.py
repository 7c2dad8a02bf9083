"""Size checks made before a template's calls and filters allocate.

Each string method or filter whose result can be far larger than its input (a width, a
count, a repeated replacement, a join, an indent) has a check here that computes the size of
the result from the arguments, or bounds the work by rewriting them (``split`` gets a bounded
``maxsplit``, ``join`` a list it can measure), and refuses before anything is built. What a
check lets through is charged to the operation's :class:`~toolwire.templates.budget.TemplateBudget`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from jinja2.filters import make_attrgetter
from jinja2.runtime import Context, LoopContext
from jinja2.utils import Namespace

from toolwire.errors import TemplateLimitError
from toolwire.templates.budget import TemplateBudget
from toolwire.templates.sizes import (
    MAX_VALUE_CHARS,
    MAX_VALUE_ITEMS,
    char_bytes,
    check_chars,
    check_compared,
    check_items,
    check_value,
    printf_size,
    repr_size,
    text_size,
    weight,
)

__all__ = [
    "FILTER_CHECKS",
    "MAX_INT_BITS",
    "MAX_JSON_INDENT",
    "bounded_json",
    "charge_result",
    "check_int_bits",
    "filter_check",
    "materialize",
    "method_check",
    "sum_filter",
    "ticking",
]

#: Largest integer (in bits) template arithmetic may produce (``*``, ``**``, ``+``).
MAX_INT_BITS = 4096
#: Widest ``tojson`` indent accepted (published templates use 2 or 4).
MAX_JSON_INDENT = 64

#: What ``str.splitlines`` splits on.
_LINE_BREAKS = ("\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")

Args = tuple[Any, ...]
Kwargs = dict[str, Any]


def check_int_bits(bits: int, what: str) -> None:
    """Refuse an integer of ``bits`` bits before it is computed."""
    if bits > MAX_INT_BITS:
        raise TemplateLimitError(
            f"chat template would build an integer of {bits:,} bits in {what} "
            f"(limit {MAX_INT_BITS:,})"
        )


def ticking(budget: TemplateBudget, iterable: Iterable[Any]) -> Iterator[Any]:
    """``iterable``, spending one loop step per item."""
    for item in iterable:
        budget.spend()
        yield item


def materialize(budget: TemplateBudget, iterable: Any, what: str) -> list[Any]:
    """The items of ``iterable`` as a list, refused past :data:`MAX_VALUE_ITEMS` items and
    reading the clock as it goes (a generator may do work per item)."""
    if isinstance(iterable, (str, bytes, list, tuple, dict, set, frozenset)):
        check_items(len(iterable), what)
        return list(iterable)
    items: list[Any] = []
    for item in iterable:
        items.append(item)
        if len(items) > MAX_VALUE_ITEMS:
            check_items(len(items), what)
        if not len(items) % 1024:
            budget.check_time()
    return items


def _arg(args: Args, kwargs: Kwargs, index: int, name: str, default: Any) -> Any:
    """The argument at ``index`` (counting after the value) or named ``name``."""
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text_of(value: Any, budget: TemplateBudget) -> int:
    return len(value) if isinstance(value, str) else text_size(value, MAX_VALUE_CHARS, budget)


def _charge_chars(budget: TemplateBudget, size: int, what: str, *texts: Any) -> None:
    check_chars(size, what)
    budget.charge(size * char_bytes(*texts), what)


# --- string methods ------------------------------------------------------------------------------

MethodCheck = Callable[[TemplateBudget, Any, Args, Kwargs], tuple[Args, Kwargs]]


def _padding(budget: TemplateBudget, s: Any, args: Args, kwargs: Kwargs) -> tuple[Args, Kwargs]:
    width = _int(_arg(args, kwargs, 0, "width", 0))
    _charge_chars(budget, max(len(s), width), "a padded string", s, *args)
    return args, kwargs


def _expandtabs(budget: TemplateBudget, s: Any, args: Args, kwargs: Kwargs) -> tuple[Args, Kwargs]:
    tab = _int(_arg(args, kwargs, 0, "tabsize", 8))
    count = s.count("\t" if isinstance(s, str) else b"\t")
    _charge_chars(budget, len(s) + count * max(tab, 0), "expandtabs", s)
    return args, kwargs


def replaced_size(s: Any, old: Any, new: Any, count: Any) -> int:
    """The length of ``s.replace(old, new, count)``, without replacing."""
    if not isinstance(old, type(s)) or not isinstance(new, type(s)):
        return len(s)  # the method itself refuses the types
    times = s.count(old) if old else len(s) + 1
    if isinstance(count, int) and count >= 0:
        times = min(times, count)
    return len(s) + times * max(0, len(new) - len(old))


def _replace(budget: TemplateBudget, s: Any, args: Args, kwargs: Kwargs) -> tuple[Args, Kwargs]:
    old, new = _arg(args, kwargs, 0, "old", ""), _arg(args, kwargs, 1, "new", "")
    size = replaced_size(s, old, new, _arg(args, kwargs, 2, "count", -1))
    _charge_chars(budget, size, "replace", s, new)
    return args, kwargs


def _join(budget: TemplateBudget, s: Any, args: Args, kwargs: Kwargs) -> tuple[Args, Kwargs]:
    if not args:
        return args, kwargs
    parts = materialize(budget, args[0], "join")
    lengths = sum(len(p) for p in parts if isinstance(p, (str, bytes)))
    size = lengths + len(s) * max(len(parts) - 1, 0)
    _charge_chars(budget, size, "join", s, *parts)
    return (parts, *args[1:]), kwargs


def _encode(budget: TemplateBudget, s: Any, args: Args, kwargs: Kwargs) -> tuple[Args, Kwargs]:
    _charge_chars(budget, len(s) * 10 + 8, "encode")
    return args, kwargs


def _translate(budget: TemplateBudget, s: Any, args: Args, kwargs: Kwargs) -> tuple[Args, Kwargs]:
    table = args[0] if args else None
    widest = 1
    if isinstance(table, Mapping):
        check_items(len(table), "translate")
        widest = max((len(v) for v in table.values() if isinstance(v, str)), default=1)
    _charge_chars(budget, len(s) * max(widest, 1), "translate", s)
    return args, kwargs


def _case(budget: TemplateBudget, s: Any, args: Args, kwargs: Kwargs) -> tuple[Args, Kwargs]:
    _charge_chars(budget, grown_case_size(s), "a change of case", s)
    return args, kwargs


def grown_case_size(s: Any) -> int:
    """The length ``upper()``/``lower()``/``title()`` give ``s`` (a character may become
    three): measured a piece at a time only when it could pass the limit."""
    if not isinstance(s, str) or s.isascii() or len(s) * 3 <= MAX_VALUE_CHARS:
        return len(s) * (1 if not isinstance(s, str) or s.isascii() else 3)
    return sum(len(s[i : i + 65536].upper()) for i in range(0, len(s), 65536))


def _split(budget: TemplateBudget, s: Any, args: Args, kwargs: Kwargs) -> tuple[Args, Kwargs]:
    if set(kwargs) - {"sep", "maxsplit"}:
        return args, kwargs  # the method refuses them itself
    sep = _arg(args, kwargs, 0, "sep", None)
    asked = _arg(args, kwargs, 1, "maxsplit", -1)
    bounded = MAX_VALUE_ITEMS if not isinstance(asked, int) or asked < 0 else asked
    # a bounded maxsplit makes at most MAX_VALUE_ITEMS + 1 items; the result check refuses it
    budget.charge(len(s) * char_bytes(s) + 64 * (min(bounded, len(s)) + 1), "split")
    return (sep, min(bounded, MAX_VALUE_ITEMS)), {}


def _splitlines(budget: TemplateBudget, s: Any, args: Args, kwargs: Kwargs) -> tuple[Args, Kwargs]:
    breaks = (b"\n", b"\r") if isinstance(s, bytes) else _LINE_BREAKS
    count = sum(s.count(mark) for mark in breaks) + 1
    check_items(count, "splitlines")
    budget.charge(len(s) * char_bytes(s) + 64 * count, "splitlines")
    return args, kwargs


def _to_bytes(budget: TemplateBudget, n: Any, args: Args, kwargs: Kwargs) -> tuple[Args, Kwargs]:
    length = _int(_arg(args, kwargs, 0, "length", 1))
    _charge_chars(budget, length, "to_bytes")
    return args, kwargs


def _fromkeys(budget: TemplateBudget, cls: Any, args: Args, kwargs: Kwargs) -> tuple[Args, Kwargs]:
    if not args:
        return args, kwargs
    keys = materialize(budget, args[0], "fromkeys")
    budget.charge(100 * len(keys), "fromkeys")
    return (keys, *args[1:]), kwargs


_STRING_METHODS: dict[str, MethodCheck] = {
    "ljust": _padding,
    "rjust": _padding,
    "center": _padding,
    "zfill": _padding,
    "expandtabs": _expandtabs,
    "replace": _replace,
    "join": _join,
    "encode": _encode,
    "translate": _translate,
    "upper": _case,
    "lower": _case,
    "title": _case,
    "capitalize": _case,
    "swapcase": _case,
    "casefold": _case,
    "split": _split,
    "rsplit": _split,
    "splitlines": _splitlines,
}
#: Methods of containers that only look up or move what exists (their results are not new).
_LOOKUPS = frozenset({"get", "pop", "index", "count", "keys", "values", "items", "append"})


def method_check(
    budget: TemplateBudget, obj: Any, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs, bool]:
    """Check a call of ``obj`` before it runs: the arguments to pass (possibly rewritten to
    bound the work) and whether its result is a new value to charge."""
    owner = getattr(obj, "__self__", None)
    name = getattr(obj, "__name__", "")
    if isinstance(owner, (str, bytes)):
        check = _STRING_METHODS.get(name)
        if check is not None:
            args, kwargs = check(budget, owner, args, kwargs)
        return args, kwargs, True
    if isinstance(owner, int) and name == "to_bytes":
        args, kwargs = _to_bytes(budget, owner, args, kwargs)
        return args, kwargs, True
    if isinstance(owner, type) and name == "fromkeys":
        args, kwargs = _fromkeys(budget, owner, args, kwargs)
        return args, kwargs, True
    if isinstance(owner, LoopContext) and name == "changed":  # compares with the last
        for arg in args:
            check_compared(arg, arg, budget)
    if isinstance(obj, LoopContext) and args:  # a recursive loop's next level counts too
        return (ticking(budget, args[0]), *args[1:]), kwargs, True
    if isinstance(owner, (list, dict, set, Namespace)):
        return args, kwargs, name not in _LOOKUPS
    return args, kwargs, True


# --- filters -------------------------------------------------------------------------------------

FilterCheck = Callable[[TemplateBudget, Context, Args, Kwargs], tuple[Args, Kwargs]]


def _f_center(
    budget: TemplateBudget, ctx: Context, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    width = _int(_arg(args, kwargs, 1, "width", 80))
    _charge_chars(budget, max(_text_of(args[0], budget), width), "center", args[0])
    return args, kwargs


def _f_indent(
    budget: TemplateBudget, ctx: Context, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    width = _arg(args, kwargs, 1, "width", 4)
    pad = len(width) if isinstance(width, str) else _int(width)
    value = args[0]
    lines = value.count("\n") + 1 if isinstance(value, str) else 1
    size = _text_of(value, budget) + lines * pad
    _charge_chars(budget, size, "indent", value, width)
    return args, kwargs


def _wordwise(size: int, what: str) -> None:
    """``wordwrap`` and ``urlize`` work word by word in Python: their text is bounded like a
    collection's items, so that one call cannot outlast the time budget by much."""
    if size > MAX_VALUE_ITEMS:
        raise TemplateLimitError(
            f"chat template passed {size:,} characters to {what} (limit {MAX_VALUE_ITEMS:,})"
        )


def _f_wordwrap(
    budget: TemplateBudget, ctx: Context, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    wrap = _arg(args, kwargs, 4, "wrapstring", None)
    wrap_len = len(wrap) if isinstance(wrap, str) else 2
    size = _text_of(args[0], budget)
    _wordwise(size, "wordwrap")
    _charge_chars(budget, size + (size + 1) * wrap_len, "wordwrap", args[0], wrap)
    return args, kwargs


def _f_replace(
    budget: TemplateBudget, ctx: Context, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    value = args[0]
    if not isinstance(value, str):
        check_chars(_text_of(value, budget), "replace")
        value = str(value)
    old, new = _arg(args, kwargs, 1, "old", ""), _arg(args, kwargs, 2, "new", "")
    size = replaced_size(value, str(old), str(new), _arg(args, kwargs, 3, "count", None))
    _charge_chars(budget, size, "replace", value, str(new))
    return args, kwargs


def _f_format(
    budget: TemplateBudget, ctx: Context, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    fmt = args[0] if isinstance(args[0], str) else ""
    size = printf_size(fmt, kwargs or tuple(args[1:]), budget)
    _charge_chars(budget, size, "a format filter", fmt)
    return args, kwargs


def _f_join(
    budget: TemplateBudget, ctx: Context, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    items = materialize(budget, args[0], "join")
    sep = _arg(args, kwargs, 1, "d", "")
    attribute = _arg(args, kwargs, 2, "attribute", None)
    if attribute is not None:
        getter = make_attrgetter(ctx.environment, attribute)
        items = [getter(item) for item in items]
    size = len(str(sep)) * max(len(items) - 1, 0)
    for item in items:
        size += _text_of(item, budget)
        check_chars(size, "join")
    _charge_chars(budget, size, "join", sep, *items)
    return (items, sep), {}


def _f_string(
    budget: TemplateBudget, ctx: Context, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    _charge_chars(budget, _text_of(args[0], budget), "string", args[0])
    return args, kwargs


def _f_pprint(
    budget: TemplateBudget, ctx: Context, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    # pprint indents what does not fit a line: bound it at a few times the repr
    size = repr_size(args[0], MAX_VALUE_CHARS // 8, budget) * 8
    _charge_chars(budget, size, "pprint")
    return args, kwargs


def _f_escape(
    budget: TemplateBudget, ctx: Context, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    value = args[0]
    size = _text_of(value, budget)
    if isinstance(value, str) and size * 5 > MAX_VALUE_CHARS:
        size += 4 * sum(value.count(c) for c in "&<>\"'")
    elif not isinstance(value, str):
        size *= 5
    _charge_chars(budget, size, "escape", value)
    return args, kwargs


def _f_counted(limit_name: str, index: int) -> FilterCheck:
    """A filter whose argument at ``index`` is a count of items it builds."""

    def check(
        budget: TemplateBudget, ctx: Context, args: Args, kwargs: Kwargs
    ) -> tuple[Args, Kwargs]:
        count = _int(_arg(args, kwargs, index, limit_name, 0))
        check_items(count, limit_name)
        budget.charge(64 * count, limit_name)
        return args, kwargs

    return check


def _f_list(
    budget: TemplateBudget, ctx: Context, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    items = materialize(budget, args[0], "list")
    budget.charge(8 * len(items) + 64, "list")
    return (items, *args[1:]), kwargs


def _f_sum(budget: TemplateBudget, ctx: Context, args: Args, kwargs: Kwargs) -> tuple[Args, Kwargs]:
    items = materialize(budget, args[0], "sum")
    attribute = _arg(args, kwargs, 1, "attribute", None)
    if attribute is not None:
        getter = make_attrgetter(ctx.environment, attribute)
        items = [getter(item) for item in items]
    start = _arg(args, kwargs, 2, "start", 0)
    if isinstance(start, (list, tuple, str)):
        total = len(start) + sum(len(i) for i in items if isinstance(i, (list, tuple, str)))
        check_items(total, "sum")
        budget.charge(8 * total + 64, "sum")
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool):
            check_int_bits(item.bit_length() + 32, "sum")
    return (items, None, start), {}


def sum_filter(
    environment: Any, iterable: Iterable[Any], attribute: Any = None, start: Any = 0
) -> Any:
    """Jinja's ``sum``, adding lists or tuples in one pass: ``sum()`` copies the total so far
    at every item, which a template could make quadratic."""
    if attribute is not None:
        iterable = map(make_attrgetter(environment, attribute), iterable)
    if isinstance(start, (list, tuple)):
        items = list(iterable)
        if all(isinstance(item, type(start)) for item in items):
            return type(start)(itertools.chain(start, *items))
        iterable = items
    return sum(iterable, start)


def _f_urlize(
    budget: TemplateBudget, ctx: Context, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    value = args[0]
    size = _text_of(value, budget)
    _wordwise(size, "urlize")
    extra = sum(
        len(str(x))
        for x in (_arg(args, kwargs, 3, "target", ""), _arg(args, kwargs, 4, "rel", ""))
        if x
    )
    links = (value.count(".") + value.count("@") + 1) if isinstance(value, str) else size
    _charge_chars(budget, 2 * size + links * (extra + 64), "urlize", value)
    return args, kwargs


def _f_grows(factor: int, what: str) -> FilterCheck:
    """A filter whose text is at most ``factor`` times its input's."""

    def check(
        budget: TemplateBudget, ctx: Context, args: Args, kwargs: Kwargs
    ) -> tuple[Args, Kwargs]:
        _charge_chars(budget, _text_of(args[0], budget) * factor, what)
        return args, kwargs

    return check


def _f_case(
    budget: TemplateBudget, ctx: Context, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    value = args[0]
    size = grown_case_size(value) if isinstance(value, str) else _text_of(value, budget) * 3
    _charge_chars(budget, size, "a change of case", value)
    return args, kwargs


def _f_from_json(
    budget: TemplateBudget, ctx: Context, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    text = args[0]
    if isinstance(text, str):
        check_chars(len(text), "from_json")
        # every value but the first follows a comma or opens a container: a bound on the
        # values json.loads would build, checked before it builds them
        values = text.count(",") + text.count("[") + text.count("{") + 1
        check_items(values, "from_json")
        budget.charge(len(text) + 64 * values, "from_json")
    return args, kwargs


def _f_compares(
    budget: TemplateBudget, ctx: Context, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    """A filter that compares, hashes or lowers every item (``sort``, ``unique`` …): a list
    holding one 4 MB string a thousand times is small, but sorting it compares gigabytes.
    The text of its items is bounded like one value's."""
    value = args[0]
    if not isinstance(value, (str, list, tuple, dict, set, frozenset)):
        value = materialize(budget, value, "a filter's items")
    if text_size(value, MAX_VALUE_CHARS, budget) > MAX_VALUE_CHARS:
        raise TemplateLimitError(
            f"chat template passed items of more than {MAX_VALUE_CHARS:,} characters in all "
            "to a filter that compares them"
        )
    return (value, *args[1:]), kwargs


FILTER_CHECKS: dict[str, FilterCheck] = {
    "sort": _f_compares,
    "unique": _f_compares,
    "dictsort": _f_compares,
    "groupby": _f_compares,
    "min": _f_compares,
    "max": _f_compares,
    "center": _f_center,
    "indent": _f_indent,
    "wordwrap": _f_wordwrap,
    "replace": _f_replace,
    "format": _f_format,
    "join": _f_join,
    "string": _f_string,
    "pprint": _f_pprint,
    "e": _f_escape,
    "escape": _f_escape,
    "forceescape": _f_escape,
    "batch": _f_counted("linecount", 1),
    "slice": _f_counted("slices", 1),
    "list": _f_list,
    "sum": _f_sum,
    "urlize": _f_urlize,
    "urlencode": _f_grows(12, "urlencode"),
    "xmlattr": _f_grows(6, "xmlattr"),
    "upper": _f_case,
    "lower": _f_case,
    "title": _f_case,
    "capitalize": _f_case,
    "from_json": _f_from_json,
}


def filter_check(
    name: str, budget: TemplateBudget, ctx: Context, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    """Check filter ``name`` applied to ``args[0]`` before it runs; the arguments to pass."""
    budget.check_time()
    for arg in args[1:]:
        check_value(arg, f"the {name} filter's arguments")
    check = FILTER_CHECKS.get(name)
    if check is None or not args:
        return args, kwargs
    return check(budget, ctx, args, kwargs)


def bounded_json(budget: TemplateBudget, value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)`` written a piece at a time, refused as soon as it
    passes :data:`MAX_VALUE_CHARS` (the pieces are never joined past it)."""
    indent = options.get("indent")
    width = len(indent) if isinstance(indent, str) else _int(indent)
    if width > MAX_JSON_INDENT:
        raise TemplateLimitError(
            f"chat template asked tojson for an indent of {width:,} (limit {MAX_JSON_INDENT})"
        )
    encoder = json.JSONEncoder(**options)
    chunks: list[str] = []
    pieces: list[str] = []
    size = 0
    for piece in encoder.iterencode(value):
        size += len(piece)
        check_chars(size, "tojson")
        pieces.append(piece)
        if len(pieces) >= 4096:  # small pieces cost far more than their characters
            chunks.append("".join(pieces))
            pieces.clear()
            budget.check_time()
    chunks.append("".join(pieces))
    budget.charge(size * char_bytes(*chunks) + 64, "tojson")
    return "".join(chunks)


def charge_result(budget: TemplateBudget, result: Any, what: str) -> None:
    """Bound and charge a value a guarded operation has just built."""
    check_value(result, what)
    budget.charge(weight(result), what)
