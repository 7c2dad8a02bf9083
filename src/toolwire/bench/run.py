"""``toolwire bench``: how reliably a model, at its quantisation, on its engine, calls tools.

Each case is asked as a fresh conversation with the prompt set's tools; the reply's calls
are judged. Six rates, each over the cases it means something for: call rate and right tool
over cases that expect a call; parse rate over replies with a call; schema valid and
arguments correct over replies that called the right tool; false calls over cases that
expect none. Beside them: replies that left a call as visible text (the engine's parser
missed the model's format), several calls in one reply, and request errors.

Each reply is judged twice. First as the engine sent it: the request is made strict, so
toolwire's drift recovery stays out of the way and the rates are the model's and engine's
own. Then with that recovery applied to the same reply (``recovered_rates``): what a caller
going through toolwire gets. The gap between the two is what the engine's parser misses.

Arguments are judged as a caller receives them: typed by the tool's schema in
:func:`~toolwire.arguments.prepare_arguments` (not strict), whichever way the call came.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..arguments import prepare_arguments
from ..errors import ArgumentsError, ToolwireError
from ..events import CallEnd, TextDelta
from ..formats.drift import recover_calls
from ..pipeline import Backend, Request
from .cases import Case, PromptSet, check_arguments

__all__ = ["Call", "Outcome", "Report", "run_bench"]

_MARKUP = re.compile(
    r"<tool_call>|</?function[=>]|\[TOOL_CALLS\]|<\|python_tag\|>|<\|channel\|>|\[TOOL_REQUEST\]"
)


class Call(NamedTuple):
    """One call as the bench keeps it: the name, the arguments as the grammar gave them (not
    yet typed), the argument text the model wrote, and whether the grammar writes every value
    as text (see :attr:`toolwire.ToolCall.text_values`)."""

    name: str
    arguments: dict[str, Any]
    text: str
    text_values: bool = False


@dataclass
class Outcome:
    case: Case
    calls: list[Call] = field(default_factory=list)
    text: str = ""
    error: str = ""
    failures: list[str] = field(default_factory=list)
    visible_call: bool = False
    #: The calls once toolwire's drift recovery has read the text, and their failures.
    recovered_calls: list[Call] = field(default_factory=list)
    recovered_failures: list[str] = field(default_factory=list)


@dataclass
class Report:
    prompts: str
    outcomes: list[Outcome]
    duration: float = 0.0

    def rates(self, *, recovered: bool = False) -> dict[str, float | None]:
        """The six rates, as the engine sent each reply or (``recovered``) after recovery."""

        def calls(o: Outcome) -> list[Call]:
            return o.recovered_calls if recovered else o.calls

        def failures(o: Outcome) -> list[str]:
            return o.recovered_failures if recovered else o.failures

        ok = [o for o in self.outcomes if not o.error]
        want = [o for o in ok if o.case.call]
        none = [o for o in ok if not o.case.call]
        called = [o for o in want if calls(o)]
        any_call = [o for o in ok if calls(o)]
        parsed = [o for o in any_call if all(_parsed(c) for c in calls(o))]
        right = [o for o in called if calls(o)[0].name == o.case.call]
        valid = [o for o in right if not any(f.startswith("schema:") for f in failures(o))]
        correct = [o for o in valid if not any(f.startswith("args:") for f in failures(o))]

        def rate(part: list[Outcome], whole: list[Outcome]) -> float | None:
            return len(part) / len(whole) if whole else None

        return {
            "call_rate": rate(called, want),
            "parse_rate": rate(parsed, any_call),
            "right_tool": rate(right, called),
            "schema_valid": rate(valid, right),
            "arguments_correct": rate(correct, right),
            "false_calls": rate([o for o in none if calls(o)], none),
        }

    def counts(self) -> dict[str, int]:
        return {
            "runs": len(self.outcomes),
            "visible_calls": sum(o.visible_call for o in self.outcomes),
            "multiple_calls": sum(len(o.calls) > 1 for o in self.outcomes),
            "request_errors": sum(bool(o.error) for o in self.outcomes),
            "recovered": sum(bool(o.recovered_calls) and not o.calls for o in self.outcomes),
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
            "recovered_rates": self.rates(recovered=True),
            "counts": self.counts(),
            "failures": self.failures(),
            "duration": round(self.duration, 2),
        }


def _parsed(call: Call) -> bool:
    if call.arguments or not call.text.strip():
        return True
    try:
        return isinstance(json.loads(call.text), dict)
    except ValueError:
        return False


async def _one(
    backend: Backend, prompts: PromptSet, case: Case, options: dict[str, Any], timeout: float
) -> Outcome:
    # strict: the reply as the engine sent it; recovery is judged apart, below
    request = Request(
        [{"role": "user", "content": case.prompt}], prompts.tools, **options, strict=True
    )
    outcome = Outcome(case)
    text: list[str] = []

    async def collect() -> None:
        async for event in backend.stream(request):
            if isinstance(event, TextDelta):
                text.append(event.text)
            elif isinstance(event, CallEnd):
                c = event.call
                outcome.calls.append(Call(c.name, c.arguments, c.arguments_text, c.text_values))

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
    outcome.failures = _judge(case, outcome.calls, prompts)
    if outcome.visible_call:
        outcome.failures.insert(
            0, "a call left as visible text: the engine's parser missed the model's format"
        )
    outcome.recovered_calls = outcome.calls
    outcome.recovered_failures = [f for f in outcome.failures if not f.startswith("a call left")]
    if not outcome.calls:
        found = recover_calls(outcome.text, prompts.tools)
        if found:
            outcome.recovered_calls = [Call(*call) for call in found[0]]
            outcome.recovered_failures = _judge(case, outcome.recovered_calls, prompts)
    return outcome


def _judge(case: Case, calls: list[Call], prompts: PromptSet) -> list[str]:
    """What is wrong with a reply's first call for this case (empty when it is right).

    The arguments are judged as a caller receives them: typed by the tool's schema, not
    strictly. When they cannot be typed, that is a ``schema:`` failure, and the values as
    the model sent them are still checked, so the report says what they were.
    """
    if not case.call:
        return [f"called {calls[0].name} with no call expected"] if calls else []
    if not calls:
        return ["no call"]
    call = calls[0]
    if call.name != case.call:
        return [f"called {call.name}, not {case.call}"]
    schema = next(
        t["function"].get("parameters", {})
        for t in prompts.tools
        if t["function"]["name"] == call.name
    )
    raw = call.text if call.text.strip() else call.arguments
    failures: list[str] = []
    try:
        arguments = prepare_arguments(
            raw, schema, strict=False, name=call.name, text_values=call.text_values
        ).arguments
    except ArgumentsError as exc:
        failures.append("schema: " + (exc.problems[0] if exc.problems else exc.kind))
        arguments = call.arguments
    problems = check_arguments(case, arguments)
    return failures + (["args: " + ", ".join(problems)] if problems else [])


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
    recovered = report.rates(recovered=True)
    lines.append(f"  {'':<18} {'as sent':>8} {'recovered':>10}")
    for key, value in report.rates().items():
        shown = "n/a" if value is None else f"{value:.1%}"
        fixed = "n/a" if recovered[key] is None else f"{recovered[key]:.1%}"
        lines.append(f"  {key.replace('_', ' '):<18} {shown:>8} {fixed:>10}")
    counts = report.counts()
    lines.append(
        f"  calls left as visible text: {counts['visible_calls']}"
        + (" (the engine's parser missed the model's format)" if counts["visible_calls"] else "")
    )
    lines.append(f"  calls toolwire recovered from the text: {counts['recovered']}")
    lines.append(f"  several calls in one reply: {counts['multiple_calls']}")
    lines.append(f"  request errors: {counts['request_errors']}")
    failures = report.failures()
    if failures:
        lines.append("  first failures:")
        for case in list(failures)[:12]:
            lines.append(f"    {case}: {'; '.join(failures[case])}")
    return "\n".join(lines)
