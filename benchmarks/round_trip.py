"""Whether each published template's detected family reads back the template's own calls.

For every template of three sets, printed apart — the corpus the tests use
(``tests/fixtures/chat_templates``), the development templates it lacks
(``tests/fixtures/unseen_templates``) and the held-out ones (``tests/fixtures/held_out``) —
``detect_format`` names a family; then the template renders an assistant turn making two
calls (detection's own ``DERIVE_CALLS``: a string and an integer, then a string holding
markup, quotes and a line break, and a boolean), and the detected family reads that text
back. A template *round-trips* when the family reads exactly those calls: the names, and the
arguments typed by the tools' schemas (the one way toolwire types arguments). A family that
writes one call a message (``one_call_per_message``) is given one call when the template
writes only one a turn; a template that writes both is read for both.

The figures: per set, ``round trip: X of Y`` where Y counts the templates that render calls
(the turn's text names both tools, or the first for a one-call family; a template that
ignores calls, or renders no text for them, is not counted), and ``wrong claims``: templates
for which a family was named but its reading of the template's own rendering fails — the
costly error, since a caller trusting the detection gets wrong calls or none. ``missed``
counts templates that render calls while detection named no family.

Held-out templates are measured here and nowhere else: no test reads them.

    python benchmarks/round_trip.py [--set corpus|unseen|held_out] [TEMPLATE ...]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolwire import detect_format, load_template
from toolwire.arguments import prepare_arguments
from toolwire.errors import LimitError, TemplateError, ToolwireError
from toolwire.formats.base import Family
from toolwire.formats.detect import DERIVE_CALLS, DERIVE_TOOLS, assistant_text
from toolwire.messages import ToolCall
from toolwire.templates import ChatTemplate

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SETS: dict[str, Path] = {
    "corpus": FIXTURES / "chat_templates",
    "unseen": FIXTURES / "unseen_templates",
    "held_out": FIXTURES / "held_out" / "chat_templates",
}
TITLES = {
    "corpus": "corpus (tests/fixtures/chat_templates)",
    "unseen": "unseen, development (tests/fixtures/unseen_templates)",
    "held_out": "held out (tests/fixtures/held_out/chat_templates)",
}
_SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in DERIVE_TOOLS}
_SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
_USER = {"role": "user", "content": "What will the weather be in Paris, and wake me at 07:30?"}


@dataclass(frozen=True)
class Row:
    """One template measured."""

    name: str
    format: str
    via: str
    #: The template's text for the turn names the calls (so the round trip is counted).
    renders_calls: bool
    round_trips: bool
    why: str = ""

    @property
    def wrong_claim(self) -> bool:
        """A family was named, the template renders calls, and the family misreads them."""
        return self.format != "none" and self.renders_calls and not self.round_trips

    @property
    def missed(self) -> bool:
        return self.format == "none" and self.renders_calls


def _turn(calls: Sequence[ToolCall], content: str | None, results: bool) -> list[dict[str, Any]]:
    turn: list[dict[str, Any]] = [
        {"role": "assistant", "content": content, "tool_calls": [c.to_openai() for c in calls]}
    ]
    for call in calls if results else ():
        turn.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": "{}"})
    return turn


def _renderings(
    template: ChatTemplate, calls: Sequence[ToolCall], family: Family | None, none_first: bool
) -> Iterator[tuple[str, bool, str]]:
    """(the model's text for the turn, whether thinking is open, how it was rendered), for
    each way of asking that the template accepts: some insist on a system message or on tool
    results after the calls, some write calls only beside a ``None`` content."""
    call_ids = family.call_ids if family is not None else "keep"
    contents: tuple[str | None, ...] = (None, "") if none_first else ("", None)
    for content in contents:
        for head in ([], [_SYSTEM]):
            for results in (False, True):
                try:
                    text, opened = assistant_text(
                        template,
                        [*head, _USER],
                        _turn(calls, content, results),
                        DERIVE_TOOLS,
                        call_ids=call_ids,
                        keep_call_none=content is None,
                    )
                except (TemplateError, LimitError) as exc:
                    yield "", False, f"refused: {str(exc).splitlines()[0][:120]}"
                    continue
                how = f"content={content!r} system={bool(head)} results={results}"
                yield text, opened, how


def _read(family: Family, text: str, opened: bool, calls: Sequence[ToolCall]) -> str:
    """Why ``family`` does not read ``text`` as ``calls`` ("" when it does)."""
    try:
        got = family.parse(text, DERIVE_TOOLS, reasoning_open=opened)
    except ToolwireError as exc:
        return f"raised {type(exc).__name__}: {str(exc)[:120]}"
    names = [c.name for c in got.calls]
    if names != [c.name for c in calls]:
        return f"read calls {names}, expected {[c.name for c in calls]}"
    for call, want in zip(got.calls, calls, strict=True):
        source = call.arguments_text if call.arguments_text.strip() else call.arguments
        try:
            typed = prepare_arguments(source, _SCHEMAS[want.name], text_values=call.text_values)
        except ToolwireError as exc:
            return f"arguments of {want.name} not typed: {str(exc)[:120]}"
        if typed.arguments != want.arguments:
            return f"arguments of {want.name} {typed.arguments!r}, expected {want.arguments!r}"
    return ""


def measure(path: Path) -> Row:
    """Detect one template's family and round-trip two calls through it."""
    name = path.name
    try:
        template = load_template(path)
        found = detect_format(template)
    except ToolwireError as exc:
        return Row(name, "error", "", False, False, f"not loaded: {str(exc)[:120]}")
    family = found.family
    one = family is not None and family.one_call_per_message
    failures: list[str] = []
    renders = False
    # a one-call family gets one call only when the template writes just one a turn: a
    # template that writes both is read for both
    for calls in (DERIVE_CALLS, DERIVE_CALLS[:1]) if one else (DERIVE_CALLS,):
        for text, opened, how in _renderings(template, calls, family, found.none_content):
            if not text:
                failures.append(how if how.startswith("refused") else f"{how}: no text")
                continue
            named = [c.name for c in calls if c.name in text]
            if len(named) < len(calls):
                failures.append(f"{how}: the turn names {named}")
                continue
            renders = True
            if family is None:
                return Row(name, found.format, found.via, True, False, "no family named")
            why = _read(family, text, opened, calls)
            if not why:
                note = " (one call a message)" if len(calls) == 1 else ""
                return Row(name, found.format, found.via, True, True, f"{how}{note}")
            failures.append(f"{how}: {why}")
        if renders:  # the template wrote every call: its reading is the verdict
            break
    why = failures[0] if failures else "nothing rendered"
    if renders:  # the first failure of a rendering that named the calls
        why = next((f for f in failures if "the turn names" not in f and "refused" not in f), why)
    return Row(name, found.format, found.via, renders, False, why)


def measure_set(directory: Path, names: Sequence[str] = ()) -> list[Row]:
    """Every ``*.jinja`` of one directory (or just ``names``), in name order."""
    paths = sorted(directory.glob("*.jinja"))
    if names:
        paths = [p for p in paths if p.name in names]
    return [measure(p) for p in paths]


def totals(rows: Sequence[Row]) -> dict[str, int]:
    """The figures of one set."""
    return {
        "templates": len(rows),
        "detected": sum(r.format not in ("none", "error") for r in rows),
        "render_calls": sum(r.renders_calls for r in rows),
        "round_trip": sum(r.round_trips for r in rows),
        "wrong_claims": sum(r.wrong_claim for r in rows),
        "missed": sum(r.missed for r in rows),
    }


def report(title: str, rows: Sequence[Row]) -> list[str]:
    """The printed table of one set and its totals."""
    lines = [f"\n{title}"]
    for r in rows:
        rt = "yes" if r.round_trips else ("no" if r.renders_calls else "-")
        detected = f"{r.format}/{r.via}" if r.via else r.format
        lines.append(f"  {r.name:<58} {detected:<24} {rt:<4} {r.why[:160]}")
    t = totals(rows)
    lines.append(
        f"  round trip: {t['round_trip']} of {t['render_calls']} (templates that render calls); "
        f"wrong claims: {t['wrong_claims']}; missed: {t['missed']}; "
        f"detected: {t['detected']} of {t['templates']} templates"
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=sorted(SETS), action="append", help="only these sets")
    parser.add_argument("names", nargs="*", help="only these template file names")
    args = parser.parse_args(argv)
    for key in args.set or list(SETS):
        rows = measure_set(SETS[key], args.names)
        if rows or not args.names:
            print("\n".join(report(TITLES[key], rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
