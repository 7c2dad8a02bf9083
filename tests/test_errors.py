"""One error tree: every mistake in a call to toolwire is a UsageError, which is also the
ValueError callers caught before the tree existed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import toolwire
from toolwire.chat import CalculatorError, calculate
from toolwire.conversation import resolve_settings
from toolwire.errors import FormatError, ToolwireError, UsageError
from toolwire.formats.registry import get_family
from toolwire.schemas import to_dialect
from toolwire.templates import ChatTemplate, normalize_tools, shape_messages

_CALL = {"role": "assistant", "tool_calls": []}


def _message_with_call(call: Any) -> list[dict[str, Any]]:
    return [{**_CALL, "tool_calls": [call]}]


MISUSES: dict[str, tuple[Callable[[], object], str]] = {
    "call_ids": (lambda: shape_messages([], call_ids="digits"), "call_ids must be"),  # type: ignore[arg-type]
    "message not a mapping": (lambda: shape_messages(["hi"]), "message 0 is a str"),  # type: ignore[list-item]
    "call not a mapping": (
        lambda: shape_messages(_message_with_call("f()")),
        "a tool call is a str",
    ),
    "call function not a mapping": (
        lambda: shape_messages(_message_with_call({"function": "f"})),
        "'function' is not a mapping",
    ),
    "call without a name": (
        lambda: shape_messages(_message_with_call({"function": {"arguments": "{}"}})),
        "has no name",
    ),
    "tool not a mapping": (lambda: normalize_tools(["f"]), "tool 0 is a str"),  # type: ignore[list-item]
    "tool not a function": (
        lambda: normalize_tools([{"type": "code_interpreter"}]),
        "only function tools",
    ),
    "tool function not a mapping": (
        lambda: normalize_tools([{"type": "function", "function": "f"}]),
        "'function' is not a mapping",
    ),
    "tool without a name": (lambda: normalize_tools([{"parameters": {}}]), "has no name"),
    "rendered bad tool": (
        lambda: ChatTemplate("{{ messages }}").render([], [{"parameters": {}}]),
        "has no name",
    ),
    "explicit setting": (
        lambda: resolve_settings({"max_tool_iters": -1}, environ={}),
        "explicit setting",
    ),
    "stored setting": (
        lambda: resolve_settings(None, {"strict": "yes"}, environ={}),
        "stored setting",
    ),
    "schema dialect": (lambda: to_dialect({"type": "object"}, "openapi"), "unknown schema"),
    "tool format": (lambda: get_family("no-such-format"), "unknown tool format"),
    "calculator": (lambda: calculate("__import__('os')"), "only numbers"),
}


@pytest.mark.parametrize("case", sorted(MISUSES))
def test_misuse_raises_a_usage_error_that_is_still_a_value_error(case: str) -> None:
    call, message = MISUSES[case]
    with pytest.raises(UsageError, match=message) as info:
        call()
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, ToolwireError)


def test_usage_error_family() -> None:
    assert issubclass(FormatError, UsageError)
    assert issubclass(CalculatorError, UsageError)
    assert toolwire.UsageError is UsageError
    assert "UsageError" in toolwire.__all__
