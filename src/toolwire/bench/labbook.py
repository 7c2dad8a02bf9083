"""Reading a bench labbook: one JSON line per run, appended by ``toolwire bench --labbook``.

A labbook grows by hand and by crash as well as by the bench: a line cut short when a run
was killed, a line pasted from elsewhere, a note with markup in it. So every line is read on
its own, and a line that is not a bench run is named with its reason rather than stopping
the report: nothing is dropped without saying so. Every value is checked for its type
before it is drawn, and every string is cut to a length a page can show.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import LabbookError

__all__ = [
    "COUNTS",
    "JUDGEMENTS",
    "MAX_LABBOOK_BYTES",
    "MAX_LINE_BYTES",
    "RATES",
    "RATE_KEYS",
    "Judgement",
    "Labbook",
    "Run",
    "parse_labbook",
]

#: The six rates, in the order a report shows them, with the words it shows them in.
RATES: dict[str, str] = {
    "call_rate": "call rate",
    "parse_rate": "parse rate",
    "right_tool": "right tool",
    "schema_valid": "schema valid",
    "arguments_correct": "arguments correct",
    "false_calls": "false calls",
}

#: The ways a reply is judged: ``sent``, the strict request's reply as the engine sent it;
#: ``recovered``, that same reply text with toolwire's drift recovery; ``constrained``, the
#: case asked again (a second generation) with a started call finished under a grammar of
#: the tools, as a caller gets it. Each with the words a report shows it in.
Judgement = Literal["sent", "recovered", "constrained"]
JUDGEMENTS: dict[Judgement, str] = {
    "sent": "as sent",
    "recovered": "recovered",
    "constrained": "constrained",
}
#: The labbook key each judgement's rates are stored under.
RATE_KEYS: dict[Judgement, str] = {
    "sent": "rates",
    "recovered": "recovered_rates",
    "constrained": "constrained_rates",
}

#: What went wrong beside the rates, counted over a run's replies.
COUNTS: dict[str, str] = {
    "visible_calls": "calls left as visible text",
    "recovered": "calls toolwire recovered",
    "multiple_calls": "several calls in one reply",
    "request_errors": "request errors",
    "constrained_errors": "request errors, constrained",
}

#: A labbook larger than this is refused whole.
MAX_LABBOOK_BYTES = 64 * 1024 * 1024
#: A line longer than this is not read (a run's line is a few kilobytes).
MAX_LINE_BYTES = 1024 * 1024
#: Strings are cut to this many characters.
MAX_TEXT = 400
#: At most this many cases' failures are kept per run.
MAX_FAILED_CASES = 100

#: Counts larger than this are not believed.
MAX_COUNT = 10**12
#: Characters that break a page or a chart (controls, non-characters) become U+FFFD.
_UNSHOWABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")

_TEXTS = ("model", "engine", "base_url", "tool_choice", "date", "notes", "prompts")


@dataclass
class Run:
    """One bench run as a report draws it: its rates, counts and conditions."""

    number: int
    line: int
    rates: dict[str, float | None]
    counts: dict[str, int | None]
    model: str = ""
    engine: str = ""
    base_url: str = ""
    tool_choice: str = ""
    date: str = ""
    notes: str = ""
    prompts: str = ""
    temperature: float | None = None
    thinking: bool | None = None
    repeat: int | None = None
    duration: float | None = None
    failures: dict[str, list[str]] = field(default_factory=dict)
    #: The rates once toolwire's drift recovery has read each reply (older runs lack them).
    recovered_rates: dict[str, float | None] | None = None
    #: The rates of the constrained pass (older runs, and engines that cannot, lack them).
    constrained_rates: dict[str, float | None] | None = None
    #: The constrained pass's failures per case.
    constrained_failures: dict[str, list[str]] = field(default_factory=dict)
    #: Seconds each generating pass took (``sent``, ``constrained``), when the run says.
    seconds: dict[str, float | None] = field(default_factory=dict)

    def rates_of(self, judgement: Judgement = "sent") -> dict[str, float | None]:
        """One judgement's rates (empty when the run lacks it: older runs, other engines)."""
        if judgement == "recovered":
            return self.recovered_rates or {}
        if judgement == "constrained":
            return self.constrained_rates or {}
        return self.rates

    @property
    def judgements(self) -> list[Judgement]:
        """The judgements this run has rates for, in the order a report shows them."""
        return [j for j in JUDGEMENTS if j == "sent" or self.rates_of(j)]

    def seconds_of(self, judgement: Judgement) -> float | None:
        """Seconds a generating pass took. A run written before passes were timed apart had
        one pass, as sent, so its whole duration is that pass's."""
        if judgement == "sent":
            sent = self.seconds.get("sent")
            return sent if sent is not None else self.duration
        return self.seconds.get(judgement)

    @property
    def replies(self) -> int | None:
        return self.counts.get("runs")

    @property
    def short_model(self) -> str:
        """The model's name as a chart label shows it: a file or repository name, cut short."""
        name = self.model or self.engine or "?"
        if name.endswith(")") and "(" in name:
            name = name[name.rindex("(") + 1 : -1]
        name = name.rstrip("/").rsplit("/", 1)[-1] or name
        return name if len(name) <= 40 else name[:39] + "…"

    @property
    def label(self) -> str:
        return f"#{self.number} {self.short_model}"


@dataclass
class Labbook:
    """The runs read from a labbook, and each line that was not one, with the reason."""

    runs: list[Run]
    skipped: list[tuple[int, str]]
    lines: int


class _NotARun(Exception):
    pass


def _text(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) > MAX_TEXT:
        text = text[: MAX_TEXT - 1] + "…"
    # a lone surrogate (JSON allows the escape) cannot be written as UTF-8, nor drawn
    text = text.encode("utf-8", "replace").decode("utf-8")
    return _UNSHOWABLE.sub("\ufffd", text)


def _number(value: Any, where: str, *, low: float = 0.0, high: float | None = None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _NotARun(f"{where} must be a number or null, not {_text(value)[:40]}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not (math.isfinite(number) and number >= low and (high is None or number <= high)):
        span = f"from {low:g} to {high:g}" if high is not None else f"of at least {low:g}"
        raise _NotARun(f"{where} must be a number {span}, not {value}")
    return number


def _count(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise _NotARun(
            f"{where} must be a whole number from 0 to {MAX_COUNT}, not {_text(value)[:40]}"
        )
    return value


def _failures(value: Any) -> dict[str, list[str]]:
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, list[str]] = {}
    for case, found in list(value.items())[:MAX_FAILED_CASES]:
        items = found if isinstance(found, list) else [found]
        out[_text(case)] = [_text(f) for f in items[:5]]
    return out


def _rates(value: Any, key: str) -> dict[str, float | None] | None:
    """A judgement's rates, or None when the run has none (older runs, other engines)."""
    if not isinstance(value, Mapping):
        return None
    return {k: _number(value.get(k), f"{key}.{k}", high=1.0) for k in RATES}


def _run(entry: Any, number: int, line: int) -> Run:
    if not isinstance(entry, Mapping):
        raise _NotARun("not a JSON object")
    if entry.get("suite") == "bfcl":
        raise _NotARun("a BFCL run: drawn on the BFCL page (bench report writes it beside)")
    rates = entry.get("rates")
    if not isinstance(rates, Mapping):
        raise _NotARun("no 'rates' object: not a bench run")
    counts = entry.get("counts")
    counts = counts if isinstance(counts, Mapping) else {}
    # runs written before the glossary settled on "recovery" call them healed_rates
    key = "recovered_rates" if "recovered_rates" in entry else "healed_rates"
    seconds = entry.get("seconds")
    seconds = seconds if isinstance(seconds, Mapping) else {}
    temperature = entry.get("temperature")
    thinking = entry.get("thinking")
    repeat = entry.get("repeat")
    return Run(
        number=number,
        line=line,
        rates={k: _number(rates.get(k), f"rates.{k}", high=1.0) for k in RATES},
        counts={k: _count(counts.get(k), f"counts.{k}") for k in ("runs", *COUNTS)},
        temperature=_number(temperature, "temperature", low=-1e9),
        thinking=thinking if isinstance(thinking, bool) else None,
        repeat=_count(repeat, "repeat"),
        duration=_number(entry.get("duration"), "duration"),
        failures=_failures(entry.get("failures")),
        recovered_rates=_rates(entry.get(key), key),
        constrained_rates=_rates(entry.get(RATE_KEYS["constrained"]), RATE_KEYS["constrained"]),
        constrained_failures=_failures(entry.get("constrained_failures")),
        seconds={k: _number(seconds.get(k), f"seconds.{k}") for k in ("sent", "constrained")},
        **{k: _text(entry.get(k)) for k in _TEXTS},
    )


def parse_labbook(data: bytes) -> Labbook:
    """Every run in a labbook's bytes, and every line that is not one with its reason.

    Raises :class:`LabbookError` only when the whole labbook is too large; a bad line is
    reported in ``skipped`` and the rest are read.
    """
    if len(data) > MAX_LABBOOK_BYTES:
        raise LabbookError(
            f"the labbook is {len(data)} bytes; the limit is {MAX_LABBOOK_BYTES} bytes"
        )
    runs: list[Run] = []
    skipped: list[tuple[int, str]] = []
    lines = data.split(b"\n")
    if lines and not lines[-1].strip():
        lines.pop()
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        if len(raw) > MAX_LINE_BYTES:
            skipped.append((number, f"longer than {MAX_LINE_BYTES} bytes"))
            continue
        try:
            entry = json.loads(raw.decode("utf-8"))
            runs.append(_run(entry, len(runs) + 1, number))
        except UnicodeDecodeError:
            skipped.append((number, "not UTF-8 text"))
        except RecursionError:
            skipped.append((number, "nested too deeply"))
        except ValueError as exc:
            skipped.append((number, f"not JSON ({exc})"))
        except _NotARun as exc:
            skipped.append((number, str(exc)))
    return Labbook(runs, skipped, len(lines))
