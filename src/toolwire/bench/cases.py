"""A prompt set: tools plus cases, each expecting one named call with checkable arguments,
or no call at all. Pure: loading, validating and judging, no I/O beyond reading the file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ToolwireError

__all__ = ["Case", "PromptSet", "check_arguments", "load_prompts"]


@dataclass(frozen=True)
class Case:
    id: str
    prompt: str
    call: str | None  # the tool expected, or None for no call
    args: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class PromptSet:
    name: str
    version: int
    tools: list[dict[str, Any]]
    cases: list[Case]


def load_prompts(path: str | Path | None = None) -> PromptSet:
    """The shipped set, or the one at ``path`` (the same format)."""
    try:
        if path is None:
            text = resources.files("toolwire.bench").joinpath("prompts.json").read_text("utf-8")
        else:
            text = Path(path).read_text(encoding="utf-8")
        data = json.loads(text)
        cases = [
            Case(
                str(c["id"]),
                str(c["prompt"]),
                c["expect"].get("call"),
                dict(c["expect"].get("args") or {}),
            )
            for c in data["cases"]
        ]
        return PromptSet(str(data["name"]), int(data["version"]), list(data["tools"]), cases)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ToolwireError(f"cannot read the prompt set {path or '(shipped)'}: {exc}") from None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return None


def _matches(check: dict[str, Any], value: Any) -> bool:
    if "equals" in check:
        want = check["equals"]
        a, b = _number(want), _number(value)
        if a is not None and b is not None:
            return a == b
        return bool(value == want)
    if "contains" in check:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return str(check["contains"]).lower() in text.lower()
    if "one_of" in check:
        return any(_matches({"equals": option}, value) for option in check["one_of"])
    return False


def check_arguments(case: Case, arguments: dict[str, Any]) -> list[str]:
    """What is wrong with the arguments for this case (empty when they are right)."""
    problems = []
    for name, check in case.args.items():
        if name not in arguments:
            problems.append(f"{name} missing")
        elif not _matches(check, arguments[name]):
            problems.append(f"{name}={json.dumps(arguments[name], ensure_ascii=False)[:40]}")
    return problems
