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

On an engine that can constrain (``can_constrain``), each case is asked a third way, and
that takes a second generation, because a grammar changes what the model writes: not
strict, constrained, and its calls are judged as the caller gets them
(``constrained_rates``). In-process, a call the model starts is finished under a grammar of
the declared tools. A remote engine with a tools API (vLLM, llama-server: see
:mod:`toolwire.backends.engines`) constrains a call the turn requires, so there a case that
expects a call is asked with ``tool_choice`` ``required`` (the engine then decodes it under
the tools' schemas), and a case that expects none is asked as before: its call rate says
little, its right tool, schema and arguments are the grammar's gain, and false calls stay
honest. The gap between recovered and constrained is what the grammar adds; the seconds of
each pass (``seconds``) are what it costs. Other engines have no such pass: their
constrained rates are None, not a copy of another judgement.

Arguments are judged as a caller receives them: typed by the tool's schema in
:func:`~toolwire.arguments.prepare_arguments` (not strict), whichever way the call came.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from ..arguments import prepare_arguments
from ..errors import ArgumentsError, ToolwireError, UsageError
from ..events import CallEnd, TextDelta
from ..formats.recovery import recover_calls
from ..pipeline import Backend, Request
from .cases import Case, PromptSet, check_arguments
from .labbook import JUDGEMENTS, RATE_KEYS, RATES, Judgement

__all__ = ["Call", "Outcome", "Report", "run_bench"]

T = TypeVar("T")

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
    #: The constrained pass (a second generation; empty when it did not run): its calls as
    #: the caller gets them, their failures, its text and its request error.
    constrained_calls: list[Call] = field(default_factory=list)
    constrained_failures: list[str] = field(default_factory=list)
    constrained_text: str = ""
    constrained_error: str = ""

    def judged(self, judgement: Judgement) -> tuple[list[Call], list[str], str]:
        """One judgement of this case: its calls, their failures, and the request error."""
        if judgement == "recovered":
            return self.recovered_calls, self.recovered_failures, self.error
        if judgement == "constrained":
            return self.constrained_calls, self.constrained_failures, self.constrained_error
        return self.calls, self.failures, self.error


@dataclass
class Report:
    prompts: str
    outcomes: list[Outcome]
    #: Seconds the whole run took.
    duration: float = 0.0
    #: Whether each case was asked a second time, constrained.
    constrained: bool = False
    #: Seconds each generating pass took: ``sent`` and, when it ran, ``constrained``.
    seconds: dict[str, float] = field(default_factory=dict)

    def judgements(self) -> list[Judgement]:
        """The judgements this run made: the constrained one only when its pass ran."""
        return [j for j in JUDGEMENTS if j != "constrained" or self.constrained]

    def rates(self, judgement: Judgement = "sent") -> dict[str, float | None]:
        """The six rates of one judgement (all None for a constrained pass that did not run).

        Raises :class:`~toolwire.errors.UsageError` for a judgement that is not one of
        :data:`~toolwire.bench.labbook.JUDGEMENTS`.
        """
        if judgement not in JUDGEMENTS:
            raise UsageError(f"no judgement {judgement!r}: one of {', '.join(JUDGEMENTS)}")

        def calls(o: Outcome) -> list[Call]:
            return o.judged(judgement)[0]

        def failures(o: Outcome) -> list[str]:
            return o.judged(judgement)[1]

        ran = judgement in self.judgements()
        ok = [o for o in self.outcomes if ran and not o.judged(judgement)[2]]
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

    def counts(self) -> dict[str, int | None]:
        return {
            "runs": len(self.outcomes),
            "visible_calls": sum(o.visible_call for o in self.outcomes),
            "multiple_calls": sum(len(o.calls) > 1 for o in self.outcomes),
            "request_errors": sum(bool(o.error) for o in self.outcomes),
            "recovered": sum(bool(o.recovered_calls) and not o.calls for o in self.outcomes),
            "constrained_errors": (
                sum(bool(o.constrained_error) for o in self.outcomes) if self.constrained else None
            ),
        }

    def failures(self, judgement: Judgement = "sent") -> dict[str, list[str]]:
        """Per case, its first distinct failures as sent (or in another judgement)."""
        out: dict[str, list[str]] = {}
        for o in self.outcomes:
            _, found, error = o.judged(judgement)
            for f in found + ([f"error: {error}"] if error else []):
                seen = out.setdefault(o.case.id, [])
                if f not in seen and len(seen) < 3:
                    seen.append(f)
        return {k: v for k, v in out.items() if v}

    def to_json(self) -> dict[str, Any]:
        """The run as the labbook keeps it; the constrained judgement is None when its pass
        did not run (an engine that cannot constrain, or turned off)."""
        rates: dict[str, Any] = {
            RATE_KEYS[j]: self.rates(j) if j in self.judgements() else None for j in JUDGEMENTS
        }
        return {
            "prompts": self.prompts,
            **rates,
            "counts": self.counts(),
            "failures": self.failures(),
            "constrained_failures": self.failures("constrained") if self.constrained else None,
            "duration": round(self.duration, 2),
            "seconds": {
                "sent": round(self.seconds.get("sent", self.duration), 2),
                "constrained": (
                    round(self.seconds["constrained"], 2) if "constrained" in self.seconds else None
                ),
            },
        }


def _parsed(call: Call) -> bool:
    if call.arguments or not call.text.strip():
        return True
    try:
        return isinstance(json.loads(call.text), dict)
    except ValueError:
        return False


class _Reply(NamedTuple):
    calls: list[Call]
    text: str
    error: str


async def _ask(
    backend: Backend,
    prompts: PromptSet,
    case: Case,
    options: dict[str, Any],
    timeout: float,
    *,
    constrained: bool,
) -> _Reply:
    """One generation for a case: strict (as the engine sends it), or constrained (not
    strict, so the caller's recovery applies, and a started call finished under a grammar)."""
    settings = {**options, "strict": not constrained, "constrained": constrained}
    request = Request([{"role": "user", "content": case.prompt}], prompts.tools, **settings)
    calls: list[Call] = []
    text: list[str] = []

    async def collect() -> None:
        async for event in backend.stream(request):
            if isinstance(event, TextDelta):
                text.append(event.text)
            elif isinstance(event, CallEnd):
                c = event.call
                calls.append(Call(c.name, c.arguments, c.arguments_text, c.text_values))

    try:
        await asyncio.wait_for(collect(), timeout)
    except asyncio.TimeoutError:
        return _Reply([], "", f"no reply within {timeout:g} s")
    except ToolwireError as exc:
        return _Reply([], "", str(exc)[:200])
    return _Reply(calls, "".join(text), "")


async def _one(
    backend: Backend, prompts: PromptSet, case: Case, options: dict[str, Any], timeout: float
) -> Outcome:
    # strict: the reply as the engine sent it; recovery is judged apart, below
    outcome = Outcome(case)
    reply = await _ask(backend, prompts, case, options, timeout, constrained=False)
    if reply.error:
        outcome.error = reply.error
        return outcome
    outcome.calls, outcome.text = reply.calls, reply.text
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


async def _constrained(
    backend: Backend, prompts: PromptSet, outcome: Outcome, options: dict[str, Any], timeout: float
) -> None:
    """The case asked again, constrained; its calls judged as the caller gets them. An
    engine with a tools API constrains a required call: a case that expects one requires it."""
    if getattr(backend, "native_tools", False) and outcome.case.call:
        options = {**options, "tool_choice": "required"}
    reply = await _ask(backend, prompts, outcome.case, options, timeout, constrained=True)
    outcome.constrained_text, outcome.constrained_error = reply.text, reply.error
    if reply.error:
        return
    outcome.constrained_calls = reply.calls
    outcome.constrained_failures = _judge(outcome.case, reply.calls, prompts)
    if _MARKUP.search(reply.text):
        outcome.constrained_failures.insert(0, "call markup left in the text, constrained")


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


class Paced:
    """Work run ``concurrency`` at a time; ``progress`` is told the jobs done and the jobs in
    all (every bench's runner paces its replies so)."""

    def __init__(
        self, concurrency: int, total: int, progress: Callable[[int, int], None] | None
    ) -> None:
        self._gate = asyncio.Semaphore(max(1, concurrency))
        self._total, self._progress, self._done = total, progress, 0

    async def run(self, work: Awaitable[T]) -> T:
        async with self._gate:
            result = await work
        self._done += 1
        if self._progress:
            self._progress(self._done, self._total)
        return result


async def run_bench(
    backend: Backend,
    prompts: PromptSet,
    *,
    repeat: int = 1,
    concurrency: int = 1,
    timeout: float = 120.0,
    options: dict[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
    constrained: bool = False,
) -> Report:
    """Run every case ``repeat`` times, ``concurrency`` at a time.

    ``constrained``: when the backend can constrain (its ``can_constrain``), ask every case
    a second time, constrained, after the first pass; a backend that cannot gets no second
    pass, whatever this says. ``progress`` is told the replies done and the replies in all.
    """
    jobs = [case for _ in range(repeat) for case in prompts.cases]
    second = constrained and bool(getattr(backend, "can_constrain", False))
    job = Paced(concurrency, len(jobs) * (2 if second else 1), progress).run
    settings = dict(options or {})

    started = time.monotonic()
    outcomes = await asyncio.gather(
        *(job(_one(backend, prompts, c, settings, timeout)) for c in jobs)
    )
    seconds = {"sent": time.monotonic() - started}
    if second:
        begun = time.monotonic()
        await asyncio.gather(
            *(job(_constrained(backend, prompts, o, settings, timeout)) for o in outcomes)
        )
        seconds["constrained"] = time.monotonic() - begun
    return Report(
        f"{prompts.name} v{prompts.version}",
        list(outcomes),
        time.monotonic() - started,
        constrained=second,
        seconds=seconds,
    )


def summary(report: Report) -> str:
    """The report in words, for the terminal: the three judgements side by side."""
    lines = [
        f"prompt set {report.prompts}, {report.counts()['runs']} runs, {report.duration:.1f} s"
    ]
    if report.constrained:
        sent, constrained = report.seconds.get("sent", 0.0), report.seconds["constrained"]
        lines[0] += f" ({sent:.1f} s as sent, {constrained:.1f} s constrained)"
    widths = {"sent": 9, "recovered": 11, "constrained": 13}
    table = {j: report.rates(j) for j in JUDGEMENTS}
    lines.append(f"  {'':<18}" + "".join(f"{JUDGEMENTS[j]:>{widths[j]}}" for j in JUDGEMENTS))
    for key, words in RATES.items():
        cells = "".join(
            f"{'n/a' if (v := table[j][key]) is None else f'{v:.1%}':>{widths[j]}}"
            for j in JUDGEMENTS
        )
        lines.append(f"  {words:<18}{cells}")
    counts = report.counts()
    if not report.constrained:
        lines.append(
            "  constrained: n/a, no constrained pass "
            "(the engine cannot constrain calls, or it was turned off)"
        )
    lines.append(
        f"  calls left as visible text: {counts['visible_calls']}"
        + (" (the engine's parser missed the model's format)" if counts["visible_calls"] else "")
    )
    lines.append(f"  calls toolwire recovered from the text: {counts['recovered']}")
    lines.append(f"  several calls in one reply: {counts['multiple_calls']}")
    lines.append(f"  request errors: {counts['request_errors']}")
    if report.constrained:
        lines.append(f"  request errors, constrained: {counts['constrained_errors']}")
    for judgement, title in (("sent", "first failures"), ("constrained", "constrained")):
        failures = report.failures(judgement) if judgement in report.judgements() else {}
        if failures:
            lines.append(f"  {title}:")
            for case in list(failures)[:12]:
                lines.append(f"    {case}: {'; '.join(failures[case])}")
    return "\n".join(lines)
