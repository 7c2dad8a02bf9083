"""``toolwire bench``: how reliably a model, at its quantisation, on its engine, calls tools.

Each case is asked as a fresh conversation with the prompt set's tools; the reply's calls
are judged. Six rates, each over the cases it means something for: call rate and right tool
over cases that expect a call; parse rate over replies with a call; schema valid and
arguments correct over replies that called the right tool; false calls over cases that
expect none. Beside them: replies that left a call as visible text (the engine's parser
missed the model's format), several calls in one reply, and request errors.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..arguments import prepare_arguments
from ..backends.base import Backend, Request
from ..errors import ArgumentsError, ToolwireError
from ..events import CallEnd, TextDelta
from ..formats.drift import recover_calls
from .cases import Case, PromptSet, check_arguments

__all__ = ["Outcome", "Report", "run_bench"]

_MARKUP = re.compile(
    r"<tool_call>|</?function[=>]|\[TOOL_CALLS\]|<\|python_tag\|>|<\|channel\|>|\[TOOL_REQUEST\]"
)


@dataclass
class Outcome:
    case: Case
    calls: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)
    text: str = ""
    error: str = ""
    failures: list[str] = field(default_factory=list)
    visible_call: bool = False


@dataclass
class Report:
    prompts: str
    outcomes: list[Outcome]
    duration: float = 0.0

    def rates(self) -> dict[str, float | None]:
        ok = [o for o in self.outcomes if not o.error]
        want = [o for o in ok if o.case.call]
        none = [o for o in ok if not o.case.call]
        called = [o for o in want if o.calls]
        any_call = [o for o in ok if o.calls]
        parsed = [o for o in any_call if all(_parsed(c) for c in o.calls)]
        right = [o for o in called if o.calls[0][0] == o.case.call]
        valid = [o for o in right if "schema" not in " ".join(o.failures)]
        correct = [
            o
            for o in right
            if not any(f.startswith("args:") for f in o.failures)
            and "schema" not in " ".join(o.failures)
        ]

        def rate(part: list[Outcome], whole: list[Outcome]) -> float | None:
            return len(part) / len(whole) if whole else None

        return {
            "call_rate": rate(called, want),
            "parse_rate": rate(parsed, any_call),
            "right_tool": rate(right, called),
            "schema_valid": rate(valid, right),
            "arguments_correct": rate(correct, right),
            "false_calls": rate([o for o in none if o.calls], none),
        }

    def counts(self) -> dict[str, int]:
        return {
            "runs": len(self.outcomes),
            "visible_calls": sum(o.visible_call for o in self.outcomes),
            "multiple_calls": sum(len(o.calls) > 1 for o in self.outcomes),
            "request_errors": sum(bool(o.error) for o in self.outcomes),
        }

    def failures(self) -> dict[str, list[str]]:
        """Per case, its first distinct failures."""
        out: dict[str, list[str]] = {}
        for o in self.outcomes:
            for f in o.failures + ([f"error: {o.error}"] if o.error else []):
                seen = out.setdefault(o.case.id, [])
                if f not in seen and len(seen) < 3:
                    seen.append(f)
        return {k: v for k, v in out.items() if v}

    def to_json(self) -> dict[str, Any]:
        return {
            "prompts": self.prompts,
            "rates": self.rates(),
            "counts": self.counts(),
            "failures": self.failures(),
            "duration": round(self.duration, 2),
        }


def _parsed(call: tuple[str, dict[str, Any], str]) -> bool:
    _, arguments, text = call
    if arguments or not text.strip():
        return True
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


async def _one(
    backend: Backend, prompts: PromptSet, case: Case, options: dict[str, Any], timeout: float
) -> Outcome:
    request = Request([{"role": "user", "content": case.prompt}], prompts.tools, **options)
    outcome = Outcome(case)
    text: list[str] = []

    async def collect() -> None:
        async for event in backend.stream(request):
            if isinstance(event, TextDelta):
                text.append(event.text)
            elif isinstance(event, CallEnd):
                c = event.call
                outcome.calls.append((c.name, c.arguments, c.arguments_text))

    try:
        await asyncio.wait_for(collect(), timeout)
    except asyncio.TimeoutError:
        outcome.error = f"no reply within {timeout:g} s"
        return outcome
    except ToolwireError as exc:
        outcome.error = str(exc)[:200]
        return outcome
    outcome.text = "".join(text)
    outcome.visible_call = bool(
        _MARKUP.search(outcome.text) or recover_calls(outcome.text, prompts.tools, lenient=True)
    )
    if outcome.visible_call:
        outcome.failures.append(
            "a call left as visible text: the engine's parser missed the model's format"
        )
    _judge(outcome, prompts)
    return outcome


def _judge(outcome: Outcome, prompts: PromptSet) -> None:
    case = outcome.case
    if not case.call:
        if outcome.calls:
            outcome.failures.append(f"called {outcome.calls[0][0]} with no call expected")
        return
    if not outcome.calls:
        outcome.failures.append("no call")
        return
    name, arguments, text = outcome.calls[0]
    if name != case.call:
        outcome.failures.append(f"called {name}, not {case.call}")
        return
    schema = next(
        t["function"].get("parameters", {}) for t in prompts.tools if t["function"]["name"] == name
    )
    try:
        done = prepare_arguments(text if text.strip() else arguments, schema, name=name)
    except ArgumentsError as exc:
        outcome.failures.append("schema: " + (exc.problems[0] if exc.problems else exc.kind))
        return
    problems = check_arguments(case, done.arguments)
    if problems:
        outcome.failures.append("args: " + ", ".join(problems))


async def run_bench(
    backend: Backend,
    prompts: PromptSet,
    *,
    repeat: int = 1,
    concurrency: int = 1,
    timeout: float = 120.0,
    options: dict[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """Run every case ``repeat`` times, ``concurrency`` at a time."""
    jobs = [case for _ in range(repeat) for case in prompts.cases]
    gate = asyncio.Semaphore(max(1, concurrency))
    done = 0
    started = time.monotonic()

    async def job(case: Case) -> Outcome:
        nonlocal done
        async with gate:
            outcome = await _one(backend, prompts, case, dict(options or {}), timeout)
        done += 1
        if progress:
            progress(done, len(jobs))
        return outcome

    outcomes = await asyncio.gather(*(job(c) for c in jobs))
    return Report(f"{prompts.name} v{prompts.version}", list(outcomes), time.monotonic() - started)


def summary(report: Report) -> str:
    """The report in words, for the terminal."""
    lines = [
        f"prompt set {report.prompts}, {report.counts()['runs']} runs, {report.duration:.1f} s"
    ]
    for key, value in report.rates().items():
        shown = "n/a" if value is None else f"{value:6.1%}"
        lines.append(f"  {key.replace('_', ' '):<18} {shown}")
    counts = report.counts()
    lines.append(
        f"  calls left as visible text: {counts['visible_calls']}"
        + (" (the engine's parser missed the model's format)" if counts["visible_calls"] else "")
    )
    lines.append(f"  several calls in one reply: {counts['multiple_calls']}")
    lines.append(f"  request errors: {counts['request_errors']}")
    failures = report.failures()
    if failures:
        lines.append("  first failures:")
        for case in list(failures)[:12]:
            lines.append(f"    {case}: {'; '.join(failures[case])}")
    return "\n".join(lines)
