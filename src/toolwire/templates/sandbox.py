"""The sandbox chat templates render in, and the limits that bound their work.

Chat templates are code from strangers: a GGUF file carries one, and rendering it must neither
run anything nor hang nor exhaust memory. Rendering happens in Jinja's
``ImmutableSandboxedEnvironment`` configured like Hugging Face transformers (so published
templates behave as their authors tested them), tightened where transformers is lenient:

* an unsafe attribute (``__globals__``, ``__class__``, ``list.append`` …) raises
  :class:`jinja2.exceptions.SecurityError` at once, where Jinja would hand back an undefined
  value that renders as an empty string;
* compiling runs nothing (the constant-folding optimizer is off);
* every ``for`` loop and every item of ``range`` spends from one budget per render, which
  also carries a deadline;
* values that could grow without bound (``+``, ``*``, ``**``, ``%``, ``~``, call arguments
  and results, filter results, namespace attributes, captured macro and block output) are
  checked against a size limit.

These bound the common ways a template could burn time or memory; they are not a hard memory
cap. A host that renders hostile templates at scale should still run them in a process with
an OS memory limit.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any, NoReturn, overload

import jinja2
from jinja2 import nodes
from jinja2.exceptions import SecurityError, TemplateRuntimeError
from jinja2.ext import Extension, loopcontrols
from jinja2.parser import Parser
from jinja2.runtime import Context
from jinja2.sandbox import MAX_RANGE as _JINJA_MAX_RANGE
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace
from jinja2.visitor import NodeTransformer

from toolwire.errors import LimitError

__all__ = [
    "MAX_ITERATIONS",
    "MAX_OUTPUT_CHARS",
    "MAX_POWER_BITS",
    "MAX_RANGE",
    "MAX_RENDER_SECONDS",
    "MAX_TEMPLATE_BYTES",
    "MAX_VALUE_CHARS",
    "TEMPLATE_FILENAME",
    "ChatSandbox",
    "Guards",
    "TemplateRaised",
    "add_guards",
    "budget",
    "environment",
]

#: Largest template source accepted (UTF-8 bytes). Published templates are under 32 KiB.
MAX_TEMPLATE_BYTES = 1024 * 1024
#: Largest rendered prompt (characters); rendering stops as soon as the output passes it.
MAX_OUTPUT_CHARS = 4 * 1024 * 1024
#: Loop iterations (each ``for`` item and each item drawn from ``range``) allowed in one render.
MAX_ITERATIONS = 1_000_000
#: Wall-clock time one render may spend looping; checked between loop iterations. Published
#: templates render in under a millisecond.
MAX_RENDER_SECONDS = 10.0
#: Largest single ``range(...)`` (Jinja's own sandbox limit).
MAX_RANGE = _JINJA_MAX_RANGE
#: Largest string or collection a template may build (with ``+``, ``*``, ``%``, ``~`` or as
#: captured macro / block output), pass to or get back from a call or filter, or store in a
#: ``namespace``.
MAX_VALUE_CHARS = MAX_OUTPUT_CHARS
#: Largest integer (in bits) that ``**`` may produce.
MAX_POWER_BITS = 4096

#: The file name Jinja gives template frames in tracebacks; errors look it up to report a line.
TEMPLATE_FILENAME = "<chat template>"


class TemplateRaised(TemplateRuntimeError):
    """Raised by a template's own ``raise_exception(message)``; carries its message verbatim."""


class _Budget:
    """The work one render may still do. Held in a context variable, so that renders in
    different threads (or interleaved generators) never share a count.

    Besides counting iterations it reads the clock at each one (tens of nanoseconds, against
    microseconds for a Jinja loop step): the count bounds how often a loop body runs, not
    how slow one run is (a filter over a large list), and the deadline bounds that.
    """

    __slots__ = ("deadline", "left", "seconds", "total")

    def __init__(self, iterations: int, seconds: float) -> None:
        self.total = iterations
        self.left = iterations
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def spend(self, units: int = 1) -> None:
        self.left -= units
        if self.left < 0:
            raise LimitError(
                f"chat template ran more than {self.total:,} loop iterations in one render"
            )
        if time.monotonic() > self.deadline:
            raise LimitError(f"chat template looped for more than {self.seconds} s in one render")


_BUDGET: ContextVar[_Budget | None] = ContextVar("toolwire_template_budget", default=None)


@contextmanager
def budget(iterations: int | None = None, seconds: float | None = None) -> Iterator[None]:
    """Give the renders inside a ``with budget():`` block a fresh budget: ``iterations``
    (default :data:`MAX_ITERATIONS`) and ``seconds`` (default :data:`MAX_RENDER_SECONDS`)."""
    token = _BUDGET.set(
        _Budget(
            MAX_ITERATIONS if iterations is None else iterations,
            MAX_RENDER_SECONDS if seconds is None else seconds,
        )
    )
    try:
        yield
    finally:
        _BUDGET.reset(token)


def _spend(units: int = 1) -> None:
    current = _BUDGET.get()
    if current is not None:
        current.spend(units)


def _check_joined(parts: Sequence[str], what: str) -> None:
    """Refuse to join strings whose total length passes :data:`MAX_VALUE_CHARS`."""
    total = sum(len(part) for part in parts)
    if total > MAX_VALUE_CHARS:
        raise LimitError(
            f"chat template built a str of {total:,} characters in {what} "
            f"(limit {MAX_VALUE_CHARS:,})"
        )


def _bounded_concat(parts: Iterable[str]) -> str:
    """The environment's ``concat``: joins the output a macro, a ``{% set %}`` block or a
    ``caller()`` collected, which never reaches the streamed output's limit."""
    texts = list(parts)
    _check_joined(texts, "captured output")
    return "".join(texts)


def _check_size(value: Any, what: str) -> None:
    """Refuse a string or collection past :data:`MAX_VALUE_CHARS`."""
    sized = isinstance(value, (str, bytes, list, tuple, dict, set, frozenset))
    if sized and len(value) > MAX_VALUE_CHARS:
        raise LimitError(
            f"chat template built a {type(value).__name__} of {len(value):,} items "
            f"in {what} (limit {MAX_VALUE_CHARS:,})"
        )


class _CountedRange(Sequence[int]):
    """``range`` that spends one unit of the render budget per item it yields.

    Templates index ``range`` results, take ``|length`` of them and reverse them, so this is a
    full sequence rather than a generator; only iteration spends.
    """

    __slots__ = ("_range",)

    def __init__(self, rng: range) -> None:
        self._range = rng

    def __len__(self) -> int:
        return len(self._range)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> _CountedRange: ...

    def __getitem__(self, index: int | slice) -> int | _CountedRange:
        if isinstance(index, slice):
            return _CountedRange(self._range[index])
        return self._range[index]

    def __iter__(self) -> Iterator[int]:
        for item in self._range:
            _spend()
            yield item

    def __reversed__(self) -> Iterator[int]:
        return iter(_CountedRange(self._range[::-1]))

    def __contains__(self, item: object) -> bool:
        return item in self._range

    def __repr__(self) -> str:
        return repr(self._range)


def _range(*args: int) -> _CountedRange:
    rng = range(*args)
    if len(rng) > MAX_RANGE:
        raise LimitError(
            f"chat template asked for a range of {len(rng):,} items (limit {MAX_RANGE:,})"
        )
    return _CountedRange(rng)


def _raise_exception(message: Any) -> NoReturn:
    raise TemplateRaised(str(message))


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _tojson(
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
    Generators (from ``map``, ``select`` …) serialise as lists, as in llama.cpp.
    """
    return json.dumps(
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
    if isinstance(value, (Iterator, _CountedRange)):
        return list(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _from_json(text: str) -> Any:
    """llama.cpp's ``from_json`` filter (DeepSeek V3.2 and V4 templates use it)."""
    _check_size(text, "from_json")
    return json.loads(text)


class _TemplateList(list[Any]):
    """A list a template keeps in its own ``namespace``. It may grow one item at a time:
    Kimi K2's template queues tool-call ids with ``ns.ids.append`` / ``ns.ids.pop(0)``, which
    llama.cpp allows; every other list stays immutable."""


def _own(value: Any) -> Any:
    """A list stored in a namespace becomes the template's own copy (the caller's data is
    never appended to); copying spends one budget unit per item, so a loop cannot copy a
    large list over and over for free."""
    if isinstance(value, list) and not isinstance(value, _TemplateList):
        _spend(len(value))
        return _TemplateList(value)
    return value


class _TemplateNamespace(Namespace):
    """``namespace()`` whose attributes are size-checked, so a loop cannot double a string
    held in it until memory runs out."""

    def __setitem__(self, name: str, value: Any) -> None:
        _check_size(value, f"namespace attribute {name!r}")
        Namespace.__setitem__(self, name, _own(value))


def _namespace(*args: Any, **kwargs: Any) -> Namespace:
    attrs = dict(*args, **kwargs)
    for value in attrs.values():
        _check_size(value, "namespace()")
    return _TemplateNamespace({key: _own(value) for key, value in attrs.items()})


class GenerationTag(Extension):
    """``{% generation %}…{% endgeneration %}`` renders its body, nothing more.

    transformers' AssistantTracker uses the tag to mark assistant tokens for training masks;
    for a prompt only the body matters.
    """

    tags = {"generation"}  # noqa: RUF012 - Jinja's declared type is a plain set

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Callable[[], str]) -> str:
        return caller()


class Guards(Extension):
    """Runtime checks that :func:`add_guards` splices into a template before it compiles.

    Not a tag: each ``for`` loop's iterable becomes a call of :meth:`loop`, each ``~`` a call
    of :meth:`concat`. The calls go through an extension attribute, which template code
    cannot name or shadow.
    """

    def loop(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """Spend one unit of the render budget per item."""
        for item in iterable:
            _spend()
            yield item

    def concat(self, *parts: Any) -> str:
        """``a ~ b ~ …``, refused before joining when the result would pass the size limit."""
        texts = [str(part) for part in parts]
        _check_joined(texts, "a ~ concatenation")
        return "".join(texts)


class _Guarder(NodeTransformer):
    def _call(self, method: str, args: list[Any], lineno: int) -> nodes.Call:
        attr = nodes.ExtensionAttribute(Guards.identifier, method, lineno=lineno)
        return nodes.Call(attr, args, [], None, None, lineno=lineno)

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = self._call("loop", [node.iter], node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return self._call("concat", list(node.nodes), node.lineno)


def add_guards(tree: nodes.Template) -> nodes.Template:
    """Route every ``for`` loop and every ``~`` in ``tree`` through :class:`Guards`."""
    _Guarder().visit(tree)
    return tree


#: Filters whose integer arguments are widths: ``center(10**9)`` would allocate a gigabyte.
_WIDTH_FILTERS = frozenset({"center", "indent", "wordwrap"})


def _bounded_filter(func: Callable[..., Any], *, widths: bool = False) -> Callable[..., Any]:
    """Wrap a filter so that its result is size-checked and, for ``widths``, a huge width is
    refused before the filter allocates it."""

    @functools.wraps(func)  # keeps Jinja's pass_context / pass_eval_context marker
    def bounded(*args: Any, **kwargs: Any) -> Any:
        if widths:
            for arg in (*args[1:], *kwargs.values()):
                if isinstance(arg, int) and abs(arg) > MAX_VALUE_CHARS:
                    raise LimitError(
                        f"chat template passed a width of {arg} to a filter "
                        f"(limit {MAX_VALUE_CHARS:,})"
                    )
        result = func(*args, **kwargs)
        _check_size(result, "a filter result")
        return result

    return bounded


class ChatSandbox(ImmutableSandboxedEnvironment):
    """The environment every chat template compiles in (see the module docstring)."""

    intercepted_binops = frozenset({"+", "*", "**", "%"})
    concat = staticmethod(_bounded_concat)

    def unsafe_undefined(self, obj: Any, attribute: str) -> jinja2.Undefined:
        raise SecurityError(
            f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe"
        )

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if isinstance(obj, _TemplateList) and attr in ("append", "pop"):
            return True
        return super().is_safe_attribute(obj, attr, value)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "+":
            grows = isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple))
            if grows and len(left) + len(right) > MAX_VALUE_CHARS:
                raise LimitError(
                    f"chat template added up a {type(left).__name__} past {MAX_VALUE_CHARS:,} items"
                )
        elif operator == "%" and isinstance(left, str):
            args = right if isinstance(right, tuple) else (right,)
            _check_joined([left, *(arg for arg in args if isinstance(arg, str))], "a % format")
            result = super().call_binop(context, operator, left, right)
            _check_size(result, "a % format")
            return result
        elif operator == "*":
            for seq, times in ((left, right), (right, left)):
                repeats = isinstance(seq, (str, list, tuple)) and isinstance(times, int)
                if repeats and len(seq) * times > MAX_VALUE_CHARS:
                    raise LimitError(
                        f"chat template repeated a {type(seq).__name__} past "
                        f"{MAX_VALUE_CHARS:,} items"
                    )
        elif operator == "**" and isinstance(left, int) and isinstance(right, int):
            big = right > 0 and max(left.bit_length(), 1) * right > MAX_POWER_BITS
            if big:
                raise LimitError(f"chat template raised to a power past {MAX_POWER_BITS} bits")
        return super().call_binop(context, operator, left, right)

    def call(
        __self,  # Jinja's own signature: dunder names keep these positional
        __context: Context,
        __obj: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        for arg in args:
            _check_size(arg, "a call argument")
        for key, arg in kwargs.items():
            if key not in ("_loop_vars", "_block_vars", "caller"):
                _check_size(arg, "a call argument")
        result = super().call(__context, __obj, *args, **kwargs)
        _check_size(result, "a call result")
        return result


@functools.lru_cache(maxsize=1)
def environment() -> ChatSandbox:
    """The shared sandbox. Built once: an environment holds no per-render state (the budget
    lives in a context variable), and building one is the slow part of a first render."""
    env = ChatSandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        optimized=False,
        extensions=[loopcontrols, GenerationTag, Guards],
    )
    env.filters = {
        name: _bounded_filter(f, widths=name in _WIDTH_FILTERS) for name, f in env.filters.items()
    }
    env.filters["tojson"] = _bounded_filter(_tojson)
    env.filters["from_json"] = _bounded_filter(_from_json)
    env.globals["range"] = _range
    env.globals["namespace"] = _namespace
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env
