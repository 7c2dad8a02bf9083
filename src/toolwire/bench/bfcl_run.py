"""``toolwire bench --suite bfcl``: BFCL's single-turn categories through toolwire, scored by
BFCL's own AST check (:mod:`.bfcl_check`), with the columns only toolwire can give.

Each case's own functions become its tools as BFCL converts them; its question is asked as a
fresh conversation. Every case is judged in up to four columns:

* **sent** — the engine's own calls, untouched: the request is strict, so toolwire reads
  nothing the engine did not give as a call (an upstream's ``tool_calls``; in-process, the
  family's grammar of the model's own markup);
* **recovered** — toolwire's reading and typing of the same reply: a call left in the text
  recovered, the arguments typed by their schema, as a caller through toolwire gets them;
* **constrained** — a second generation where the engine can constrain (in-process, a call
  finished under the tools' grammar; vLLM and llama-server, a case that expects a call asked
  with ``tool_choice: required``);
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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..arguments import prepare_arguments
from ..errors import ArgumentsError, ToolwireError
from ..events import CallEnd, Notice, TextDelta
from ..formats.recovery import recover_calls
from ..pipeline import Backend, Request
from .bfcl_check import Verdict, check, decode_openai_calls
from .bfcl_data import BfclCase

__all__ = ["COLUMNS", "BfclOutcome", "BfclReport", "run_bfcl"]

T = TypeVar("T")

#: The columns, in the order shown.
COLUMNS = ("alone", "sent", "recovered", "constrained")
#: An engine's own call as BFCL reads it: the name, the arguments' JSON text.
Wire = tuple[str, str]


@dataclass
class BfclOutcome:
    """One case's verdicts, by column (a column not run is absent), and what toolwire did."""

    case: BfclCase
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    calls: dict[str, list[Wire] | None] = field(default_factory=dict)
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

    def mean(self, column: str) -> float | None:
        """The unweighted mean over the categories, as BFCL sums up a group of them."""
        rates = [self.accuracy(column, c) for c in self.categories()]
        known = [r for r in rates if r is not None]
        return sum(known) / len(known) if known else None

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
            "mean": {col: self.mean(col) for col in self.columns},
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


def _schema(case: BfclCase, name: str) -> Mapping[str, Any] | None:
    for tool in case.tools:
        if tool["function"]["name"] == name:
            parameters = tool["function"].get("parameters")
            return parameters if isinstance(parameters, Mapping) else None
    return None


def _typed(case: BfclCase, calls: Sequence[Wire]) -> tuple[list[Wire], bool]:
    """The calls as a caller through toolwire gets them: each one's arguments typed by its
    schema (not strictly); whether that changed any."""
    out: list[Wire] = []
    changed = False
    for name, text in calls:
        schema = _schema(case, name)
        if schema is None:
            out.append((name, text))
            continue
        try:
            typed = prepare_arguments(text, schema, strict=False, name=name).arguments
        except ArgumentsError:
            out.append((name, text))
            continue
        new = json.dumps(typed, ensure_ascii=False)
        try:
            changed |= json.loads(text) != typed
        except ValueError:
            changed = True
        out.append((name, new))
    return out, changed


def _score(case: BfclCase, calls: Sequence[Wire] | None) -> Verdict:
    decoded = decode_openai_calls(calls) if calls else None
    return check(case.functions, decoded, case.ground_truth, case.category)


async def _turn(
    backend: Backend, case: BfclCase, options: Mapping[str, Any], timeout: float, *, strict: bool
) -> tuple[list[Wire], str, list[str]]:
    """One generation: its calls (name, arguments text), its text, its notices' codes."""
    settings = {**options, "strict": strict, "constrained": not strict}
    request = Request(case.question[0], case.tools, **settings)
    calls: list[Wire] = []
    text: list[str] = []
    told: list[str] = []

    async def collect() -> None:
        async for event in backend.stream(request):
            if isinstance(event, TextDelta):
                text.append(event.text)
            elif isinstance(event, CallEnd):
                calls.append((event.call.name, event.call.arguments_text))
            elif isinstance(event, Notice):
                told.append(event.code)

    await asyncio.wait_for(collect(), timeout)
    return calls, "".join(text), told


async def _case(
    backend: Backend,
    case: BfclCase,
    options: Mapping[str, Any],
    timeout: float,
    alone: Callable[[BfclCase], Awaitable[list[Wire]]] | None,
) -> BfclOutcome:
    outcome = BfclOutcome(case)
    if alone is not None:
        try:
            own = await alone(case)
            outcome.calls["alone"] = own
            outcome.verdicts["alone"] = _score(case, own)
        except (ToolwireError, OSError, ValueError, asyncio.TimeoutError) as exc:
            outcome.errors["alone"] = str(exc)[:200] or type(exc).__name__
            outcome.verdicts["alone"] = _score(case, None)  # as BFCL: the error is text
    try:
        calls, text, told = await _turn(backend, case, options, timeout, strict=True)
    except (ToolwireError, asyncio.TimeoutError) as exc:
        outcome.errors["sent"] = str(exc)[:200] or type(exc).__name__
        outcome.verdicts["sent"] = outcome.verdicts["recovered"] = _score(case, None)
        return outcome
    outcome.notices = told
    outcome.calls["sent"] = calls
    outcome.verdicts["sent"] = _score(case, calls)
    found: list[Wire] = calls
    how = ""
    if not calls:
        recovered = recover_calls(text, case.tools)
        if recovered:
            found = [(name, text) for name, _, text in recovered[0]]
            how = "a call recovered from the text"
    typed, changed = _typed(case, found)
    if changed:
        how = ", ".join(filter(None, [how, "arguments typed by the schema"]))
    outcome.calls["recovered"] = typed
    outcome.verdicts["recovered"] = _score(case, typed)
    if how:
        outcome.changed_by["recovered"] = how
    return outcome


async def _constrained(
    backend: Backend, outcome: BfclOutcome, options: Mapping[str, Any], timeout: float
) -> None:
    """The case asked again, constrained (a case that expects a call requires it where the
    engine constrains only a required call)."""
    case = outcome.case
    settings = dict(options)
    how = ["a call finished under the tools' grammar"]
    if getattr(backend, "native_tools", False) and case.ground_truth is not None:
        settings["tool_choice"] = "required"
        how = ["a call required, which the engine decodes under the tools' schemas"]
    try:
        calls, _, told = await _turn(backend, case, settings, timeout, strict=False)
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
    alone: Callable[[BfclCase], Awaitable[list[Wire]]] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BfclReport:
    """Every case through toolwire (and the engine alone, when ``alone`` asks it), then,
    where the backend can constrain, every case again constrained."""
    second = constrained and bool(getattr(backend, "can_constrain", False))
    total = len(cases) * (2 if second else 1)
    gate = asyncio.Semaphore(max(1, concurrency))
    settings = dict(options or {})
    done = 0

    async def job(work: Awaitable[T]) -> T:
        nonlocal done
        async with gate:
            result = await work
        done += 1
        if progress:
            progress(done, total)
        return result

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
) -> Callable[[BfclCase], Awaitable[list[Wire]]]:
    """A case asked of an OpenAI-compatible engine with nothing in front: BFCL's tools and
    question as they are, its ``tool_calls`` read as BFCL reads them (text is no call)."""
    from ..backends.http import new_client

    client = new_client(timeout)
    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    extra = {k: v for k, v in (options or {}).items() if k in ("temperature", "max_tokens")}

    async def ask(case: BfclCase) -> list[Wire]:
        body = {"model": model, "messages": case.question[0], "tools": case.tools, **extra}
        reply = await asyncio.wait_for(client.post(url, json=body, headers=headers), timeout)
        if reply.status_code != 200:
            raise ValueError(f"the engine answered {reply.status_code}: {reply.text[:160]}")
        message = reply.json()["choices"][0]["message"]
        return [
            (c["function"]["name"], c["function"].get("arguments") or "{}")
            for c in message.get("tool_calls") or ()
        ]

    return ask


def summary(report: BfclReport) -> str:
    """The report in words: accuracy by category and column, BFCL-style, then each case
    toolwire changed, both ways."""
    names = {"alone": "engine alone", "sent": "as sent", "recovered": "recovered"}
    names["constrained"] = "constrained"
    cols = report.columns
    head = f"  {'category':<24}" + "".join(f"{names[c]:>14}" for c in cols)
    lines = [f"BFCL v4, {len(report.outcomes)} cases", head]

    def cells(values: Mapping[str, float | None]) -> str:
        return "".join(f"{'n/a' if v is None else f'{v:.1%}':>14}" for v in values.values())

    for category in report.categories():
        count = sum(o.case.category == category for o in report.outcomes)
        rates = {c: report.accuracy(c, category) for c in cols}
        lines.append(f"  {f'{category} ({count})':<24}" + cells(rates))
    lines.append(f"  {'all cases':<24}" + cells({c: report.accuracy(c) for c in cols}))
    lines.append(f"  {'mean of categories':<24}" + cells({c: report.mean(c) for c in cols}))
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
            why = outcome.changed_by.get(column) or (outcome.verdicts[column].error_type or "")
            lines.append(f"    {'+' if now else '-'} {outcome.case.id}: {why}")
    return "\n".join(lines)
