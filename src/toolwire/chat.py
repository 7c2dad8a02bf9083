"""``toolwire chat``: a conversation in the terminal with a few safe demo tools.

The demo tools only compute or read: ``calculator`` (arithmetic, parsed and evaluated by
hand — never ``eval``), ``current_time`` and ``word_count``. Each call and its result are
printed as they happen, and the answer streams as it comes. Given a ``toolbox`` (the tools
of MCP servers, say) the chat uses it instead, and ``confirm`` is asked before each call.
"""

from __future__ import annotations

import ast
import datetime
import json
import math
import operator
import sys
from collections.abc import Callable, Iterable
from typing import Any, TextIO
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .conversation import Conversation
from .errors import UsageError
from .events import CallEnd, Event, Notice, TextDelta, ToolResult, ToolRun
from .loop import Confirm, run_loop_sync
from .messages import ToolCall
from .pipeline import Backend
from .tools import Toolbox

__all__ = ["CalculatorError", "calculate", "chat", "demo_toolbox"]

_MAX_EXPRESSION = 200
_MAX_EXPONENT = 1000
_MAX_MAGNITUDE = 10**300

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class CalculatorError(UsageError):
    """An expression the calculator will not evaluate, with the reason (still a ``ValueError``)."""


def calculate(expression: str) -> int | float:
    """Evaluate arithmetic: numbers, + - * / // % **, parentheses. Nothing else is run."""
    if len(expression) > _MAX_EXPRESSION:
        raise CalculatorError(f"the expression is longer than {_MAX_EXPRESSION} characters")
    try:
        tree = ast.parse(expression.replace("^", "**"), mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"not arithmetic: {exc.msg}") from None
    return _eval(tree.body)


def _eval(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        number: int | float = node.value  # type: ignore[assignment]
        if isinstance(number, float) and not math.isfinite(number):
            raise CalculatorError("the number is too large")
        return number
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))  # type: ignore[no-any-return]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise CalculatorError(f"exponents above {_MAX_EXPONENT} are not computed")
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        except OverflowError:
            raise CalculatorError("the result is too large") from None
        if isinstance(value, complex):
            raise CalculatorError("the result is not a real number")
        if abs(value) > _MAX_MAGNITUDE or (isinstance(value, float) and not math.isfinite(value)):
            raise CalculatorError("the result is too large")
        return value  # type: ignore[no-any-return]
    raise CalculatorError(
        f"only numbers and + - * / // % ** are allowed, not {type(node).__name__}"
    )


def demo_toolbox() -> Toolbox:
    """The safe demo tools."""
    box = Toolbox()

    @box.tool(read_only=True)
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression exactly, e.g. "12*(3+4)" or "2**10".

        Args:
            expression: Numbers with + - * / // % ** and parentheses.
        """
        try:
            return str(calculate(expression))
        except CalculatorError as exc:
            return f"error: {exc}"

    @box.tool(read_only=True)
    def current_time(timezone: str = "UTC") -> str:
        """The current date and time.

        Args:
            timezone: An IANA time zone such as "Europe/Paris".
        """
        try:
            zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            return f"error: unknown time zone {timezone!r}"
        return datetime.datetime.now(zone).isoformat(timespec="seconds")

    @box.tool(read_only=True)
    def word_count(text: str) -> int:
        """Count the words in a text.

        Args:
            text: The text.
        """
        return len(text.split())

    return box


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def show(events: Iterable[Event], out: TextIO) -> None:
    """Print a reply's events: text as it comes, each call and its result on a line."""
    at_line_start = True
    made: dict[str, ToolCall] = {}
    shown: set[str] = set()
    for event in events:
        if isinstance(event, CallEnd):
            made[event.call.id] = event.call
            continue
        if isinstance(event, TextDelta):
            out.write(event.text)
            at_line_start = event.text.endswith("\n")
        elif isinstance(event, (ToolRun, ToolResult, Notice)):
            if not at_line_start:
                out.write("\n")
            if isinstance(event, ToolRun):
                shown.add(event.call.id)
                args = json.dumps(event.call.arguments, ensure_ascii=False)
                out.write(f"→ {event.call.name}({_short(args)})\n")
            elif isinstance(event, ToolResult):
                if event.call_id not in shown and event.call_id in made:
                    call = made[event.call_id]  # refused before it ran: still show the call
                    raw = call.arguments_text or json.dumps(call.arguments, ensure_ascii=False)
                    out.write(f"→ {call.name}({_short(raw)})\n")
                mark = "" if event.status == "ok" else f" [{event.status}]"
                out.write(f"← {_short(event.content)}{mark}\n")
            else:
                out.write(f"({event.message})\n")
            at_line_start = True
        out.flush()
    if not at_line_start:
        out.write("\n")


def chat(
    backend: Backend,
    *,
    once: str | None = None,
    settings: dict[str, Any] | None = None,
    request_options: dict[str, Any] | None = None,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
    conversation: Conversation | None = None,
    toolbox: Toolbox | None = None,
    confirm: Confirm | None = None,
) -> int:
    """Run a chat: one prompt (``once``) or lines from ``stdin`` until it ends.

    ``settings`` are this run's (the flags): they go before the ``conversation``'s own, which
    a resumed stored conversation brings with it and keeps. ``toolbox`` replaces the demo
    tools; ``confirm`` is asked before each call runs (a refusal is what the model reads)."""
    out = out or sys.stdout
    stdin = stdin or sys.stdin
    box = toolbox if toolbox is not None else demo_toolbox()
    conversation = conversation if conversation is not None else Conversation()
    prompts: Iterable[str] = [once] if once is not None else _lines(stdin, out)
    for prompt in prompts:
        conversation.add_user(prompt)
        events = run_loop_sync(
            backend,
            conversation,
            box,
            settings=settings,
            request_options=request_options or {},
            confirm=confirm,
        )
        show(events, out)
    return 0


def _lines(stdin: TextIO, out: TextIO) -> Iterable[str]:
    while True:
        out.write("> ")
        out.flush()
        line = stdin.readline()
        if not line or line.strip() in ("exit", "quit"):
            return
        if line.strip():
            yield line.strip()
