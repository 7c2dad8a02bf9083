"""The sandbox chat templates render in, and the guards that bound their work.

Chat templates are code from strangers: a GGUF file carries one, and rendering it must neither
run anything nor hang nor exhaust memory. Rendering happens in Jinja's
``ImmutableSandboxedEnvironment`` configured like Hugging Face transformers (so published
templates behave as their authors tested them), tightened where transformers is lenient:

* an unsafe attribute (``__globals__``, ``__class__``, ``list.append`` …) raises
  :class:`jinja2.exceptions.SecurityError` at once, where Jinja would hand back an undefined
  value that renders as an empty string;
* compiling runs nothing (the constant-folding optimizer is off, and no guarded operation
  can be folded);
* every size is checked before the allocation: operators (``+``, ``*``, ``**``, ``%``,
  ``~``), slices, string methods and filters with widths or counts (:mod:`.bounds`), output
  of any value (:mod:`.sizes` measures ``str()`` of a list without building it);
* every loop step, every guarded allocation and the clock are counted against one
  :class:`~toolwire.templates.budget.TemplateBudget` per operation, which the render puts in
  the template's context, under a key no template can name.

A refusal raises :class:`~toolwire.errors.TemplateLimitError`. A host that renders hostile
templates at scale may still run them in a process with an OS memory limit.
"""

from __future__ import annotations

import functools
import operator
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from string import Formatter
from typing import Any

import jinja2
from jinja2 import nodes, pass_context
from jinja2.exceptions import SecurityError
from jinja2.ext import Extension, loopcontrols
from jinja2.parser import Parser
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedFormatter
from jinja2.utils import _PassArg
from jinja2.visitor import NodeTransformer
from markupsafe import EscapeFormatter, Markup

from toolwire.templates.bounds import (
    FILTER_CHECKS,
    MAX_INT_BITS,
    charge_result,
    check_int_bits,
    filter_check,
    method_check,
    sum_filter,
)
from toolwire.templates.budget import (
    BUDGET_KEY,
    MAX_ITERATIONS,
    MAX_RENDER_BYTES,
    MAX_RENDER_SECONDS,
    TemplateBudget,
    budget_of,
)
from toolwire.templates.sizes import (
    MAX_VALUE_CHARS,
    MAX_VALUE_ITEMS,
    char_bytes,
    check_chars,
    check_compared,
    check_items,
    check_value,
    format_spec_width,
    printf_size,
    repr_size,
    text_size,
)
from toolwire.templates.values import (
    MAX_RANGE,
    TemplateList,
    TemplateRaised,
    counted_range,
    from_json,
    lipsum,
    namespace,
    raise_exception,
    strftime_now,
    tojson,
)

__all__ = [
    "BUDGET_KEY",
    "MAX_INT_BITS",
    "MAX_ITERATIONS",
    "MAX_OUTPUT_CHARS",
    "MAX_RANGE",
    "MAX_RENDER_BYTES",
    "MAX_RENDER_SECONDS",
    "MAX_TEMPLATE_BYTES",
    "MAX_VALUE_CHARS",
    "MAX_VALUE_ITEMS",
    "TEMPLATE_FILENAME",
    "ChatSandbox",
    "Guards",
    "TemplateBudget",
    "TemplateRaised",
    "add_guards",
    "environment",
]

#: Largest template source accepted (UTF-8 bytes). Published templates are under 32 KiB.
MAX_TEMPLATE_BYTES = 1024 * 1024
#: Largest rendered prompt (characters); rendering stops as soon as the output passes it.
MAX_OUTPUT_CHARS = MAX_VALUE_CHARS

#: The file name Jinja gives template frames in tracebacks; errors look it up to report a line.
TEMPLATE_FILENAME = "<chat template>"
#: The hidden filter every ``{% set x %}…{% endset %}`` block's text passes through.
_CAPTURED = "toolwire captured"


def _bounded_concat(parts: Iterable[str]) -> str:
    """The environment's ``concat``: joins the output a macro, a ``{% set %}`` block or a
    ``caller()`` collected, refused before joining past :data:`MAX_VALUE_CHARS` (what it
    builds is charged where the text arrives: a call's result or the ``set`` block's)."""
    texts = list(parts)
    check_chars(sum(len(text) for text in texts), "captured output")
    return "".join(texts)


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
    of :meth:`concat`, each slice a call of :meth:`subscript`, each with the render's context
    (which holds the budget). The calls go through an extension attribute, which template
    code cannot name or shadow.
    """

    def loop(self, context: Context, iterable: Iterable[Any]) -> Iterator[Any]:
        """Spend one loop step per item."""
        budget = budget_of(context)
        for item in iterable:
            budget.spend()
            yield item

    def concat(self, context: Context, *parts: Any) -> str:
        """``a ~ b ~ …``, refused before joining when the result would pass the size limit."""
        budget = budget_of(context)
        size = 0
        for part in parts:
            size += text_size(part, MAX_VALUE_CHARS, budget)
            check_chars(size, "a ~ concatenation")
        budget.charge(size * char_bytes(*parts) + 64, "a ~ concatenation")
        return "".join([str(part) for part in parts])

    def compare(self, context: Context, left: Any, op: str, right: Any) -> Any:
        """``left op right`` (``==``, ``<``, ``in`` …), measured first when both sides are
        containers (see :func:`~toolwire.templates.sizes.check_compared`)."""
        check_compared(left, right, budget_of(context))
        return _COMPARE[op](left, right)

    def subscript(self, context: Context, obj: Any, start: Any, stop: Any, step: Any) -> Any:
        """``obj[start:stop:step]``, charged before the copy is made."""
        key = slice(start, stop, step)
        if isinstance(obj, (str, bytes, list, tuple)):
            try:
                count = len(range(len(obj))[key])
            except (TypeError, ValueError):
                count = 0  # the slice itself raises below
            per_item = (
                char_bytes(obj) if isinstance(obj, str) else 1 if isinstance(obj, bytes) else 8
            )
            budget_of(context).charge(count * per_item + 64, "a slice")
        return obj[key]


_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "lteq": operator.le,
    "gt": operator.gt,
    "gteq": operator.ge,
    "in": lambda a, b: a in b,
    "notin": lambda a, b: a not in b,
}
#: Jinja's tests that compare their two values.
_COMPARING_TESTS = frozenset(
    {"==", "eq", "equalto", "!=", "ne", ">", "gt", "greaterthan", "ge", ">=", "<", "lt"}
    | {"lessthan", "<=", "le", "in"}
)


def _bounded_test(test: Callable[..., Any]) -> Callable[..., Any]:
    """A comparing test (``x is eq(y)``, ``select('in', y)``), measured like ``==``."""

    @pass_context
    @functools.wraps(test)
    def bounded(context: Context, value: Any, other: Any) -> bool:
        check_compared(value, other, budget_of(context))
        return bool(test(value, other))

    return bounded


@pass_context
def _captured(context: Context, text: str) -> str:
    """The hidden filter of ``{% set x %}`` blocks: charges the captured text."""
    charge_result(budget_of(context), text, "a {% set %} block")
    return text


class _Guarder(NodeTransformer):
    def _call(self, method: str, args: list[Any], lineno: int) -> nodes.Call:
        attr = nodes.ExtensionAttribute(Guards.identifier, method, lineno=lineno)
        return nodes.Call(attr, [nodes.ContextReference(), *args], [], None, None, lineno=lineno)

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = self._call("loop", [node.iter], node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return self._call("concat", list(node.nodes), node.lineno)

    def visit_Compare(self, node: nodes.Compare) -> nodes.Node:
        # a < b < c becomes compare(a, <, b) and compare(b, <, c), as Python reads it
        self.generic_visit(node)
        left = node.expr
        result: nodes.Expr | None = None
        for operand in node.ops:
            op = nodes.Const(operand.op, lineno=node.lineno)
            call = self._call("compare", [left, op, operand.expr], node.lineno)
            result = call if result is None else nodes.And(result, call, lineno=node.lineno)
            left = operand.expr
        return result if result is not None else node

    def visit_Getitem(self, node: nodes.Getitem) -> nodes.Node:
        self.generic_visit(node)
        if not isinstance(node.arg, nodes.Slice):
            return node
        bounds = [
            part if part is not None else nodes.Const(None, lineno=node.lineno)
            for part in (node.arg.start, node.arg.stop, node.arg.step)
        ]
        return self._call("subscript", [node.node, *bounds], node.lineno)

    def visit_AssignBlock(self, node: nodes.AssignBlock) -> nodes.Node:
        self.generic_visit(node)
        node.filter = nodes.Filter(node.filter, _CAPTURED, [], [], None, None, lineno=node.lineno)
        return node


def add_guards(tree: nodes.Template) -> nodes.Template:
    """Route every ``for`` loop, ``~``, slice and ``{% set %}`` block in ``tree`` through
    :class:`Guards`."""
    _Guarder().visit(tree)
    return tree


def _bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap filter ``name`` so that its arguments are checked (and, for a filter with a
    check in :data:`~toolwire.templates.bounds.FILTER_CHECKS`, its result's size computed
    and charged) before it runs, and its result bounded after."""
    wants = _PassArg.from_obj(func)
    checked = name in FILTER_CHECKS

    @functools.wraps(func)
    def bounded(context: Context, *args: Any, **kwargs: Any) -> Any:
        budget = budget_of(context)
        args, kwargs = filter_check(name, budget, context, args, kwargs)
        if wants is _PassArg.context:
            result = func(context, *args, **kwargs)
        elif wants is _PassArg.eval_context:
            result = func(context.eval_ctx, *args, **kwargs)
        elif wants is _PassArg.environment:
            result = func(context.environment, *args, **kwargs)
        else:
            result = func(*args, **kwargs)
        if checked or (args and result is args[0]):
            check_value(result, f"the {name} filter's result")
        else:
            charge_result(budget, result, f"the {name} filter's result")
        return result

    bounded.jinja_pass_arg = _PassArg.context  # type: ignore[attr-defined]
    return bounded


@pass_context
def _finalize(context: Context, value: Any) -> Any:
    """Every ``{{ value }}`` is measured before Jinja calls ``str()`` on it: a small list
    may print as gigabytes."""
    if type(value) is str or isinstance(value, Markup):
        return value
    budget = budget_of(context)
    size = text_size(value, MAX_VALUE_CHARS, budget)
    check_chars(size, "output")
    budget.charge(size * 4 + 64, "output")
    return value


class _BoundedFormatter(SandboxedFormatter):
    """``str.format`` that measures each field before formatting it and refuses once the
    text would pass the size limit."""

    def __init__(self, env: ChatSandbox, budget: TemplateBudget, **kwargs: Any) -> None:
        super().__init__(env, **kwargs)
        self._budget = budget
        self._size = 0

    def vformat(self, format_string: str, args: Sequence[Any], kwargs: Any) -> str:
        self._size = len(format_string)
        check_chars(self._size, "str.format")
        return super().vformat(format_string, args, kwargs)

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        """``!r``, ``!s`` and ``!a`` build the text before :meth:`format_field` sees it:
        measure it first (``!a`` escapes a character into at most ten)."""
        if conversion in ("r", "s", "a"):
            measure = text_size if conversion == "s" else repr_size
            size = measure(value, MAX_VALUE_CHARS, self._budget)
            check_chars(size * (10 if conversion == "a" else 1), "str.format")
        return super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> Any:
        width = format_spec_width(format_spec)
        self._size += max(width, text_size(value, MAX_VALUE_CHARS, self._budget))
        check_chars(self._size, "str.format")
        self._budget.check_time()
        return super().format_field(value, format_spec)


class _BoundedEscapeFormatter(_BoundedFormatter, EscapeFormatter):
    pass


class ChatSandbox(ImmutableSandboxedEnvironment):
    """The environment every chat template compiles in (see the module docstring)."""

    intercepted_binops = frozenset({"+", "*", "**", "%"})
    concat = staticmethod(_bounded_concat)

    def unsafe_undefined(self, obj: Any, attribute: str) -> jinja2.Undefined:
        raise SecurityError(
            f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe"
        )

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if type(obj) is TemplateList and attr in ("append", "pop"):
            return True
        return super().is_safe_attribute(obj, attr, value)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """``str.format`` / ``format_map`` through :class:`_BoundedFormatter`."""
        if not isinstance(value, (types.MethodType, types.BuiltinMethodType)):
            return None
        if value.__name__ not in ("format", "format_map") or not isinstance(value.__self__, str):
            return None
        text: str = value.__self__
        is_map = value.__name__ == "format_map"
        env = self

        @pass_context
        def bounded_format(context: Context, *args: Any, **kwargs: Any) -> str:
            budget = budget_of(context)
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                kwargs, args = args[0], ()
            formatter: Formatter
            if isinstance(text, Markup):
                formatter = _BoundedEscapeFormatter(env, budget, escape=text.escape)
            else:
                formatter = _BoundedFormatter(env, budget)
            result = type(text)(formatter.vformat(text, args, kwargs))
            charge_result(budget, result, "str.format")
            return result

        return bounded_format

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        budget = budget_of(context)
        texts = (str, bytes)
        sequences = (str, bytes, list, tuple)
        if operator == "+":
            if isinstance(left, sequences) and isinstance(right, sequences):
                size = len(left) + len(right)
                if isinstance(left, texts):
                    check_chars(size, "a + addition")
                    budget.charge(size * char_bytes(left, right) + 64, "a + addition")
                else:
                    check_items(size, "a + addition")
                    budget.charge(8 * size + 64, "a + addition")
            elif isinstance(left, int) and isinstance(right, int):
                check_int_bits(max(left.bit_length(), right.bit_length()) + 1, "a + addition")
        elif operator == "%" and isinstance(left, str):
            size = printf_size(left, right, budget)
            check_chars(size, "a % format")
            args = right if isinstance(right, tuple) else (right,)
            budget.charge(size * char_bytes(left, *args) + 64, "a % format")
        elif operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, sequences) and isinstance(times, int):
                    size = len(seq) * max(times, 0)
                    if isinstance(seq, texts):
                        check_chars(size, "a * repetition")
                        budget.charge(size * char_bytes(seq) + 64, "a * repetition")
                    else:
                        check_items(size, "a * repetition")
                        budget.charge(8 * size + 64, "a * repetition")
            if isinstance(left, int) and isinstance(right, int):
                check_int_bits(left.bit_length() + right.bit_length(), "a * product")
        elif operator == "**" and isinstance(left, int) and isinstance(right, int):
            grows = right > 0 and abs(left) > 1
            check_int_bits(left.bit_length() * right if grows else 1, "a ** power")
        return super().call_binop(context, operator, left, right)

    def call(
        __self,  # Jinja's own signature: dunder names keep these positional
        __context: Context,
        __obj: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        if isinstance(getattr(__obj, "__self__", None), Guards):
            return __context.call(__obj, *args, **kwargs)  # the guards check for themselves
        budget = budget_of(__context)
        for arg in args:
            check_value(arg, "a call argument")
        for key, arg in kwargs.items():
            if key not in ("_loop_vars", "_block_vars", "caller"):
                check_value(arg, "a call argument")
        args, kwargs, builds = method_check(budget, __obj, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        owner = getattr(__obj, "__self__", None)
        if builds and result is not owner and not any(result is arg for arg in args):
            charge_result(budget, result, "a call result")
        else:
            check_value(result, "a call result")
        return result


@functools.lru_cache(maxsize=1)
def environment() -> ChatSandbox:
    """The shared sandbox. Built once: an environment holds no per-render state (the budget
    travels in each render's context), and building one is the slow part of a first render."""
    env = ChatSandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        optimized=False,
        finalize=_finalize,
        extensions=[loopcontrols, GenerationTag, Guards],
    )
    filters = dict(env.filters)
    filters["tojson"] = tojson
    filters["from_json"] = from_json
    filters["sum"] = jinja2.pass_environment(sum_filter)
    env.filters = {name: _bounded_filter(name, f) for name, f in filters.items()}
    env.filters[_CAPTURED] = _captured
    tests: dict[str, Any] = env.tests  # Jinja types its tests as plain functions
    for name in _COMPARING_TESTS & set(tests):
        tests[name] = _bounded_test(tests[name])
    env.globals["range"] = counted_range
    env.globals["lipsum"] = lipsum
    env.globals["namespace"] = namespace
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env
