"""The values and functions a chat template gets from the sandbox.

``range``, ``namespace`` and ``lipsum`` replace Jinja's own with versions that spend from the
render's :class:`~toolwire.templates.budget.TemplateBudget` (they take it from the render's
context); ``raise_exception``, ``strftime_now``, ``tojson`` and ``from_json`` are what
Hugging Face transformers and llama.cpp give templates.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, NoReturn, overload

from jinja2 import pass_context
from jinja2.exceptions import TemplateRuntimeError
from jinja2.runtime import Context
from jinja2.sandbox import MAX_RANGE as _JINJA_MAX_RANGE
from jinja2.utils import Namespace, generate_lorem_ipsum

from toolwire.errors import TemplateLimitError
from toolwire.templates.bounds import bounded_json
from toolwire.templates.budget import TemplateBudget, budget_of
from toolwire.templates.sizes import check_chars, check_items, check_value, weight

__all__ = [
    "MAX_RANGE",
    "CountedRange",
    "TemplateList",
    "TemplateRaised",
    "counted_range",
    "from_json",
    "lipsum",
    "namespace",
    "raise_exception",
    "strftime_now",
    "tojson",
]

#: Largest single ``range(...)`` (Jinja's own sandbox limit).
MAX_RANGE = _JINJA_MAX_RANGE


class TemplateRaised(TemplateRuntimeError):
    """Raised by a template's own ``raise_exception(message)``; carries its message verbatim."""


class CountedRange(Sequence[int]):
    """``range`` that spends one loop step of the budget per item it yields.

    Templates index ``range`` results, take ``|length`` of them and reverse them, so this is a
    full sequence rather than a generator; only iteration spends.
    """

    __slots__ = ("_budget", "_range")

    def __init__(self, rng: range, budget: TemplateBudget) -> None:
        self._range = rng
        self._budget = budget

    def __len__(self) -> int:
        return len(self._range)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> CountedRange: ...

    def __getitem__(self, index: int | slice) -> int | CountedRange:
        if isinstance(index, slice):
            return CountedRange(self._range[index], self._budget)
        return self._range[index]

    def __iter__(self) -> Iterator[int]:
        for item in self._range:
            self._budget.spend()
            yield item

    def __reversed__(self) -> Iterator[int]:
        return iter(CountedRange(self._range[::-1], self._budget))

    def __contains__(self, item: object) -> bool:
        return item in self._range

    def __repr__(self) -> str:
        return repr(self._range)


@pass_context
def counted_range(context: Context, *args: int) -> CountedRange:
    rng = range(*args)
    if len(rng) > MAX_RANGE:
        raise TemplateLimitError(
            f"chat template asked for a range of {len(rng):,} items (limit {MAX_RANGE:,})"
        )
    return CountedRange(rng, budget_of(context))


@pass_context
def lipsum(context: Context, n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    """Jinja's ``lipsum``, refused before it writes past the size limit (each of ``n``
    paragraphs has up to ``max`` words of up to 15 characters)."""
    count = n if isinstance(n, int) else 0
    words = max if isinstance(max, int) else 0
    size = count * (words * 16 + 16)
    check_chars(size, "lipsum")
    budget_of(context).charge(size, "lipsum")
    return generate_lorem_ipsum(n, html, min, max)


def raise_exception(message: Any) -> NoReturn:
    raise TemplateRaised(str(message))


def strftime_now(fmt: str) -> str:
    check_chars(len(fmt) * 16, "strftime_now")
    return datetime.now().strftime(fmt)


@pass_context
def tojson(
    context: Context,
    value: Any,
    ensure_ascii: bool = False,
    indent: int | str | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """transformers' ``tojson``: plain ``json.dumps``, non-ASCII kept by default.

    Jinja's built-in escapes ``<``, ``>``, ``&`` and ``'`` for HTML, which would change the
    prompt a model was trained on. The result is a plain ``str``: a ``Markup`` would escape
    whatever a template later appends to it with ``+`` or ``%``, and autoescape is off anyway.
    Generators (from ``map``, ``select`` …) serialise as lists, as in llama.cpp. The text is
    written a piece at a time and refused as soon as it passes the size limit.
    """
    return bounded_json(
        budget_of(context),
        value,
        ensure_ascii=ensure_ascii,
        indent=indent,
        separators=separators,
        sort_keys=sort_keys,
        default=_json_default,
    )


def _json_default(value: Any) -> Any:
    """Serialise what Jinja itself produces: ``map``/``select`` results are generators
    (llama.cpp's DeepSeek R1 template writes ``tools | map(attribute='function') | tojson``)."""
    if isinstance(value, (Iterator, CountedRange)):
        items = []
        for item in value:
            items.append(item)
            check_items(len(items), "tojson")
        return items
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def from_json(text: str) -> Any:
    """llama.cpp's ``from_json`` filter (DeepSeek V3.2 and V4 templates use it)."""
    return json.loads(text)


class TemplateList(list[Any]):
    """A list a template keeps in its own ``namespace``. It may grow one item at a time:
    Kimi K2's template queues tool-call ids with ``ns.ids.append`` / ``ns.ids.pop(0)``, which
    llama.cpp allows; every other list stays immutable."""


def _own(value: Any, budget: TemplateBudget) -> Any:
    """A list stored in a namespace becomes the template's own copy (the caller's data is
    never appended to); copying spends one loop step per item, so a loop cannot copy a
    large list over and over for free."""
    if isinstance(value, list) and not isinstance(value, TemplateList):
        budget.spend(len(value))
        budget.charge(8 * len(value) + 64, "a namespace list")
        return TemplateList(value)
    return value


class _TemplateNamespace(Namespace):
    """``namespace()`` whose attributes are size-checked, so a loop cannot double a string
    held in it until memory runs out. It keeps the budget of the render that made it."""

    def __setitem__(self, name: str, value: Any) -> None:
        check_value(value, f"namespace attribute {name!r}")
        if isinstance(value, TemplateList):
            check_items(len(value) + 1, f"namespace attribute {name!r}")
        budget: TemplateBudget = object.__getattribute__(self, "_toolwire_budget")
        attrs: dict[str, Any] = object.__getattribute__(self, "_Namespace__attrs")
        old = attrs.get(name)
        Namespace.__setitem__(self, name, _own(value, budget))
        # held now by ``old`` and getrefcount's argument alone: freed on return
        if old is not None and sys.getrefcount(old) <= 2:
            budget.refund(weight(old))


@pass_context
def namespace(context: Context, *args: Any, **kwargs: Any) -> Namespace:
    budget = budget_of(context)
    attrs = dict(*args, **kwargs)
    for value in attrs.values():
        check_value(value, "namespace()")
    made = _TemplateNamespace({key: _own(value, budget) for key, value in attrs.items()})
    object.__setattr__(made, "_toolwire_budget", budget)
    return made
