"""``toolwire bench --suite bfcl``: BFCL's single-turn categories through toolwire, scored by
BFCL's own AST check (:mod:`.bfcl_check`), with the columns only toolwire can give.

Each case's own functions become its tools as BFCL converts them; its question is asked as a
fresh conversation. Every case is judged in up to four columns:

* **sent** — the engine's own calls, untouched: the request is strict, so toolwire reads
  nothing the engine did not give as a call (an upstream's ``tool_calls``; in-process, the
  family's grammar of the model's own markup);
* **recovered** — toolwire's reading and typing of the same reply, as a caller through
  toolwire gets it: the engine's raw reply is recorded as it is read strictly, then read
  again by the reply pipeline, not strict (:class:`_Tap`), so the two columns judge one
  generation;
* **constrained** — a second generation where the engine can constrain (in-process, a call
  finished under the tools' grammar; vLLM and llama-server, a case that expects a call asked
  with ``tool_choice: required`` — so there the column knows which cases expect a call, as
  the grammar's gain, not the model's choice);
* **alone** — the engine without toolwire in front (``engine_alone``: its Chat Completions
  URL), BFCL's tools sent to it as they are and its ``tool_calls`` read as BFCL reads them.

A reply is scored as BFCL scores an OpenAI function-calling model: no calls, or arguments that
are not JSON, is "nothing decoded" (which passes the irrelevance categories); an engine error
too. Every case whose verdict toolwire changed (recovered or constrained against sent, and
toolwire against the engine alone) is listed, both ways, with what changed it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from ..errors import ToolwireError
from ..events import CallEnd, Event, Notice
from ..pipeline import Backend, Request
from ..pipeline.reply import reply
from ..pipeline.transport import Transport
from .bfcl_alone import EngineAlone, Wire
from .bfcl_check import Verdict, check
from .bfcl_data import MULTI_TURN, BfclCase
from .bfcl_multi import Conversed, Recorded, converse
from .run import Paced

__all__ = ["COLUMNS", "BfclOutcome", "BfclReport", "run_bfcl"]

T = TypeVar("T")

#: The columns, in the order shown.
COLUMNS = ("alone", "sent", "recovered", "constrained")
#: The engine alone: called with a single-turn case, its calls (an :class:`EngineAlone` also
#: converses through a multi-turn one).
Alone = Callable[[BfclCase], Awaitable[list[Wire]]]


@dataclass
class BfclOutcome:
    """One case's verdicts, by column (a column not run is absent), and what toolwire did."""

    case: BfclCase
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    #: Single-turn: the calls, each (name, arguments); multi-turn: by turn and step.
    calls: dict[str, Any] = field(default_factory=dict)
    #: Why a column's calls differ from the sent ones (recovered from the text, typed).
    changed_by: dict[str, str] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)


@dataclass
class BfclReport:
    outcomes: list[BfclOutcome]
    seconds: dict[str, float]
    columns: tuple[str, ...]

    def categories(self) -> list[str]:
        return list(dict.fromkeys(o.case.category for o in self.outcomes))

    def accuracy(self, column: str, category: str | None = None) -> float | None:
        """The share of cases the column got right (None: the column was not run)."""
        judged = [
            o.verdicts[column].valid
            for o in self.outcomes
            if column in o.verdicts and (category is None or o.case.category == category)
        ]
        return sum(judged) / len(judged) if judged else None

    def groups(self, column: str) -> dict[str, float | None]:
        """BFCL's summary groups of the categories run: Non-Live AST the unweighted mean of
        simple, multiple, parallel and parallel_multiple; Live AST the live ones weighted
        by their sizes in BFCL (not the sample's); Irrelevance the mean of its two;
        Relevance live_relevance. A group none of whose categories ran is absent."""
        run = set(self.categories())
        out: dict[str, float | None] = {}
        for group, members in _GROUPS.items():
            rates = {c: self.accuracy(column, c) for c in members if c in run}
            known = {c: r for c, r in rates.items() if r is not None}
            if not rates:
                continue
            if not known:
                out[group] = None
            elif group == "live AST":
                weight = sum(_LIVE_SIZES[c] for c in known)
                out[group] = sum(r * _LIVE_SIZES[c] for c, r in known.items()) / weight
            else:
                out[group] = sum(known.values()) / len(known)
        return out

    def failed(self, column: str) -> int:
        """The cases whose column failed to run (an engine error, a timeout)."""
        return sum(column in o.errors for o in self.outcomes)

    def changed(self, column: str, against: str) -> list[tuple[BfclOutcome, bool]]:
        """The cases whose verdict ``column`` changed against ``against``: (the case, whether
        ``column`` got it right)."""
        out = []
        for o in self.outcomes:
            if column in o.verdicts and against in o.verdicts:
                now, before = o.verdicts[column].valid, o.verdicts[against].valid
                if now != before:
                    out.append((o, now))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "suite": "bfcl",
            "columns": list(self.columns),
            "cases": len(self.outcomes),
            "seconds": self.seconds,
            "categories": {
                c: {col: self.accuracy(col, c) for col in self.columns} for c in self.categories()
            },
            "overall": {col: self.accuracy(col) for col in self.columns},
            "groups": {col: self.groups(col) for col in self.columns},
            "errors": {col: self.failed(col) for col in self.columns},
            "outcomes": [
                {
                    "id": o.case.id,
                    "category": o.case.category,
                    "verdicts": {
                        col: {"valid": v.valid, "error_type": v.error_type, "errors": v.errors[:3]}
                        for col, v in o.verdicts.items()
                    },
                    "calls": o.calls,
                    "changed_by": o.changed_by,
                    "notices": o.notices,
                    "errors": o.errors,
                }
                for o in self.outcomes
            ],
        }


#: BFCL's summary groups (its ``eval_runner_helper``), and the live categories' sizes in
#: BFCL v4, by which it weights the Live AST group.
_GROUPS = {
    "non-live AST": ("simple_python", "multiple", "parallel", "parallel_multiple"),
    "live AST": ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"),
    "irrelevance": ("irrelevance", "live_irrelevance"),
    "relevance": ("live_relevance",),
    "multi turn": MULTI_TURN,
}
_LIVE_SIZES = {
    "live_simple": 258,
    "live_multiple": 1053,
    "live_parallel": 16,
    "live_parallel_multiple": 24,
}
#: The categories whose cases expect no call (the rest expect one, or more).
_NO_CALL = ("irrelevance", "live_irrelevance")


def _score(case: BfclCase, calls: Sequence[Wire] | None) -> Verdict:
    """A reply's calls scored as BFCL scores an OpenAI-style model: arguments that are not
    JSON (BFCL's ``json.loads`` fails) or no calls at all are nothing decoded."""
    decoded: list[dict[str, Any]] | None = []
    for name, text in calls or ():
        try:
            decoded.append({name: json.loads(text)})  # type: ignore[union-attr]
        except (ValueError, TypeError, RecursionError):
            decoded = None
            break
    if not calls:
        decoded = None
    try:
        return check(case.functions, decoded, case.ground_truth, case.category)
    except (ToolwireError, RecursionError) as exc:  # a case BFCL's checker cannot take
        return Verdict(False, "checker_error", [str(exc)[:200]])


class _Tap:
    """A transport that records the raw events of each of its sends, then gives them again:
    one generation read by the reply pipeline twice (strict, then not). A send past the
    recorded ones (the pipeline asking the model again) is the model's, live."""

    def __init__(self, inner: Transport) -> None:
        self._inner = inner
        self.sends: list[list[Event]] = []
        self.replaying = False
        self._next = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def send(self, prepared: Any) -> AsyncGenerator[Event, None]:
        if self.replaying and self._next < len(self.sends):
            recorded = self.sends[self._next]
            self._next += 1
            for event in recorded:
                yield event
            return
        kept: list[Event] = []
        if not self.replaying:
            self.sends.append(kept)
        async for event in self._inner.send(prepared):
            kept.append(event)
            yield event

    def native_calls(self) -> list[Wire]:
        """The engine's own calls in the first send, as it sent them."""
        return [
            (e.call.name, e.call.arguments_text)
            for e in (self.sends[0] if self.sends else ())
            if isinstance(e, CallEnd)
        ]


def _wire(event: CallEnd, *, typed: bool) -> Wire:
    """A call as BFCL reads it: typed as a caller gets it (``typed``), or as the engine's
    grammar gave it (a family that writes every value as text gives them typed: its own
    reading, not toolwire's repair)."""
    if typed or event.call.text_values:
        return event.call.name, event.arguments or event.call.arguments_text
    return event.call.name, event.call.arguments_text


async def _collect(
    transport: Any, request: Request, timeout: float, *, typed: bool
) -> tuple[list[Wire], list[str]]:
    calls: list[Wire] = []
    told: list[str] = []

    async def run() -> None:
        async for event in reply(cast(Transport, transport), request):
            if isinstance(event, CallEnd):
                calls.append(_wire(event, typed=typed))
            elif isinstance(event, Notice):
                told.append(event.code)

    await asyncio.wait_for(run(), timeout)
    return calls, told


async def _conversed(outcome: BfclOutcome, column: str, conversed: Conversed) -> None:
    outcome.calls[column] = conversed.calls()
    outcome.verdicts[column] = await asyncio.to_thread(conversed.verdict, outcome.case)
    if conversed.failed or conversed.error:
        outcome.errors[column] = conversed.failed or conversed.error or ""


async def _multi(
    backend: Backend,
    case: BfclCase,
    options: Mapping[str, Any],
    timeout: float,
    alone: Alone | None,
) -> BfclOutcome:
    """A multi-turn case: the engine alone's conversation, then toolwire's strict and as a
    caller runs it (sharing their generations while the conversations agree)."""
    outcome = BfclOutcome(case)
    talk = getattr(alone, "converse", None)
    if talk is not None:
        try:
            await _conversed(outcome, "alone", await talk(case))
        except Exception as exc:  # as BFCL keeps it: the error fails the case
            failed = Conversed()
            failed.failed = str(exc)[:200] or type(exc).__name__
            await _conversed(outcome, "alone", failed)
    source: Any = Recorded(backend) if isinstance(backend, Transport) else backend
    for column, strict in (("sent", True), ("recovered", False)):
        conversed = await converse(
            source, case, options, strict=strict, constrained=False, timeout=timeout
        )
        await _conversed(outcome, column, conversed)
        if not strict:
            outcome.notices = conversed.notices
    if outcome.calls["recovered"] != outcome.calls["sent"]:
        told = ", ".join(dict.fromkeys(outcome.notices)) or "read as written"
        outcome.changed_by["recovered"] = told
    return outcome


async def _case(
    backend: Backend,
    case: BfclCase,
    options: Mapping[str, Any],
    timeout: float,
    alone: Alone | None,
) -> BfclOutcome:
    if case.multi is not None:
        return await _multi(backend, case, options, timeout, alone)
    outcome = BfclOutcome(case)
    if alone is not None:
        try:
            own: list[Wire] | None = await alone(case)
        except Exception as exc:  # as BFCL keeps it: the error is the reply, no call
            outcome.errors["alone"] = str(exc)[:200] or type(exc).__name__
            own = None
        outcome.calls["alone"] = own
        outcome.verdicts["alone"] = _score(case, own)
    tools = case.tools or None
    settings = {**options, "constrained": False}
    tap = _Tap(backend) if isinstance(backend, Transport) else None
    source: Any = tap if tap is not None else backend
    strict = Request(case.question[0], tools, strict=True, **settings)
    try:
        if tap is None:
            raise TypeError("not a transport")
        calls, _ = await _collect(source, strict, timeout, typed=False)
    except (ToolwireError, asyncio.TimeoutError, TypeError) as exc:
        outcome.errors["sent"] = str(exc)[:200] or type(exc).__name__
        calls = tap.native_calls() if tap is not None else []  # the engine's, as sent
    outcome.calls["sent"] = calls
    outcome.verdicts["sent"] = _score(case, calls)
    if tap is not None:
        tap.replaying = True
    loose = Request(case.question[0], tools, strict=False, **settings)
    try:
        typed, told = await _collect(source, loose, timeout, typed=True)
    except (ToolwireError, asyncio.TimeoutError) as exc:
        outcome.errors["recovered"] = str(exc)[:200] or type(exc).__name__
        typed, told = [], []
    outcome.notices = told
    outcome.calls["recovered"] = typed
    outcome.verdicts["recovered"] = _score(case, typed)
    if typed != calls:
        outcome.changed_by["recovered"] = ", ".join(dict.fromkeys(told)) or "read as written"
    return outcome


async def _constrained(
    backend: Backend, outcome: BfclOutcome, options: Mapping[str, Any], timeout: float
) -> None:
    """The case asked again, constrained (a case that expects a call requires it where the
    engine constrains only a required call). A multi-turn case is conversed again
    constrained where the engine constrains free calls (in-process): a turn cannot
    require a call, since it ends with a reply that makes none."""
    case = outcome.case
    if case.multi is not None:
        if getattr(backend, "native_tools", False):
            return
        conversed = await converse(
            backend, case, options, strict=False, constrained=True, timeout=timeout
        )
        await _conversed(outcome, "constrained", conversed)
        outcome.changed_by["constrained"] = "calls finished under the tools' grammar"
        return
    settings = {**options, "constrained": True}
    how = ["a call finished under the tools' grammar"]
    if getattr(backend, "native_tools", False) and case.category not in _NO_CALL:
        settings["tool_choice"] = "required"
        how = ["a call required (the case expects one), decoded under the tools' schemas"]
    request = Request(case.question[0], case.tools or None, strict=False, **settings)
    try:
        calls, told = await _collect(backend, request, timeout, typed=True)
    except (ToolwireError, asyncio.TimeoutError) as exc:
        outcome.errors["constrained"] = str(exc)[:200] or type(exc).__name__
        outcome.verdicts["constrained"] = _score(case, None)
        return
    outcome.calls["constrained"] = calls
    outcome.verdicts["constrained"] = _score(case, calls)
    if told:
        how.append("notices: " + ", ".join(dict.fromkeys(told)))
    outcome.changed_by["constrained"] = "; ".join(how)


async def run_bfcl(
    backend: Backend,
    cases: Sequence[BfclCase],
    *,
    concurrency: int = 1,
    timeout: float = 120.0,
    options: Mapping[str, Any] | None = None,
    constrained: bool = True,
    alone: Alone | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BfclReport:
    """Every case through toolwire (and the engine alone, when ``alone`` asks it), then,
    where the backend can constrain, every case again constrained."""
    second = constrained and bool(getattr(backend, "can_constrain", False))
    job = Paced(concurrency, len(cases) * (2 if second else 1), progress).run
    settings = dict(options or {})

    started = time.monotonic()
    outcomes = await asyncio.gather(
        *(job(_case(backend, c, settings, timeout, alone)) for c in cases)
    )
    seconds = {"sent": time.monotonic() - started}
    if second:
        begun = time.monotonic()
        await asyncio.gather(*(job(_constrained(backend, o, settings, timeout)) for o in outcomes))
        seconds["constrained"] = time.monotonic() - begun
    columns = tuple(c for c in COLUMNS if any(c in o.verdicts for o in outcomes))
    return BfclReport(list(outcomes), seconds, columns)


def engine_alone(
    base_url: str,
    model: str,
    *,
    api_key: str | None = None,
    options: Mapping[str, Any] | None = None,
    timeout: float = 120.0,
) -> EngineAlone:
    """The engine at an OpenAI-compatible URL asked with nothing in front (:mod:`.bfcl_alone`):
    called with a case, its calls; its ``converse`` runs a multi-turn case."""
    return EngineAlone(base_url, model, api_key=api_key, options=options, timeout=timeout)


def summary(report: BfclReport) -> str:
    """The report in words: accuracy by category and column, BFCL-style, then each case
    toolwire changed, both ways."""
    names = {"alone": "engine alone", "sent": "as sent", "recovered": "recovered"}
    names["constrained"] = "constrained"
    cols = report.columns
    head = f"  {'category':<30}" + "".join(f"{names[c]:>14}" for c in cols)
    lines = [f"BFCL v4, {len(report.outcomes)} cases", head]

    def cells(values: Mapping[str, float | None]) -> str:
        return "".join(f"{'n/a' if v is None else f'{v:.1%}':>14}" for v in values.values())

    for category in report.categories():
        count = sum(o.case.category == category for o in report.outcomes)
        rates = {c: report.accuracy(c, category) for c in cols}
        lines.append(f"  {f'{category} ({count})':<30}" + cells(rates))
    lines.append(f"  {'all cases':<30}" + cells({c: report.accuracy(c) for c in cols}))
    grouped = {c: report.groups(c) for c in cols}
    for group in _GROUPS:
        if any(group in g for g in grouped.values()):
            lines.append(f"  {group:<30}" + cells({c: grouped[c].get(group) for c in cols}))
    if any(report.failed(c) for c in cols):
        errs = ", ".join(f"{names[c]} {report.failed(c)}" for c in cols if report.failed(c))
        lines.append(f"  cases that failed to run (scored as no call): {errs}")
        for outcome in report.outcomes:  # each with why, so that a failure can be explained
            for column, why in outcome.errors.items():
                lines.append(f"    ! {outcome.case.id} ({names[column]}): {why[:160]}")
    pairs = [("recovered", "sent"), ("constrained", "sent"), ("recovered", "alone")]
    for column, against in pairs:
        if column not in cols or against not in cols:
            continue
        moved = report.changed(column, against)
        gained = sum(now for _, now in moved)
        lines.append(
            f"  {names[column]} against {names[against]}: {gained} gained, "
            f"{len(moved) - gained} lost"
        )
        for outcome, now in moved:
            why = outcome.changed_by.get(column, "") if against == "sent" else ""
            why = why or outcome.verdicts[column if not now else against].error_type
            lines.append(f"    {'+' if now else '-'} {outcome.case.id}: {why}")
    return "\n".join(lines)
