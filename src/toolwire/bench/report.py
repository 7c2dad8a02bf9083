"""``toolwire bench report``: a labbook's runs side by side, as one self-contained HTML page.

The page carries its charts inside it (SVG as data URLs), so it can be mailed or attached to
an issue as one file; the same charts are written as PNG files beside it for places that
take only images. Everything from the labbook is escaped, the charts are images (which run
no script), and the page's content policy forbids scripts and outside requests, because a
labbook's notes are free text that anyone may have written.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import LabbookError
from .charts import Chart, draw_charts
from .labbook import (
    COUNTS,
    JUDGEMENTS,
    MAX_LABBOOK_BYTES,
    RATES,
    Judgement,
    Labbook,
    Run,
    parse_labbook,
)

__all__ = ["MAX_RUNS", "ReportFiles", "render_html", "write_report"]

#: At most this many runs are drawn: the latest ones. The page says how many were left out.
MAX_RUNS = 200

_MEANING = {
    "call_rate": "cases that expect a call and got one",
    "parse_rate": "replies with a call whose arguments could be read",
    "right_tool": "replies with a call that named the expected tool",
    "schema_valid": "calls to the right tool whose arguments fit its schema",
    "arguments_correct": "calls to the right tool whose arguments are the expected ones",
    "false_calls": "cases that expect no call and got one (lower is better)",
}

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:75rem;padding:0 1rem;
color:#222}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0;font-variant-numeric:tabular-nums}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f5f5f5}td.n{text-align:right}td.best{font-weight:bold;background:#eef7ee}
figure{margin:1rem 0}figure img{max-width:100%;height:auto}
figcaption{color:#555}code{font-size:.9em}.warn{color:#8a4b00}details{margin:.25rem 0}
"""


@dataclass(frozen=True)
class ReportFiles:
    """What ``write_report`` wrote, and what it read."""

    html: Path
    pngs: list[Path]
    labbook: Labbook
    shown: list[Run]


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _many(n: int, thing: str) -> str:
    return f"{n} {thing}" if n == 1 else f"{n} {thing}s"


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


_JUDGED: dict[Judgement, str] = {
    "sent": "the request strict, so the reply is the model's and engine's own",
    "recovered": "the same reply, with toolwire's recovery of calls the engine left in the text",
    "constrained": "the case asked again, not strict, with a call the model starts finished "
    "under a grammar of the tools (engines that can: in-process), as a caller gets it",
}


def _best(runs: Sequence[Run], key: str, judgement: Judgement) -> float | None:
    """The best value of one rate in one judgement, across runs (None with fewer than two)."""
    values = [v for r in runs if (v := r.rates_of(judgement).get(key)) is not None]
    if len(values) < 2:
        return None
    return min(values) if key == "false_calls" else max(values)


def _rates_table(runs: Sequence[Run]) -> str:
    """Each run's judgements side by side, one row each; a run shows the ones it has."""
    head = "".join(f"<th>{_e(t)}</th>" for t in RATES.values())
    best = {(j, k): _best(runs, k, j) for j in JUDGEMENTS for k in RATES}
    rows = []
    for r in runs:
        judgements = r.judgements
        for i, j in enumerate(judgements):
            rates = r.rates_of(j)
            cells = []
            for k in RATES:
                v = rates.get(k)
                mark = " best" if v is not None and v == best[j, k] else ""
                cells.append(f'<td class="n{mark}">{_percent(v)}</td>')
            span = f' rowspan="{len(judgements)}"' if len(judgements) > 1 else ""
            label = f"<th{span}>{_e(r.label)}</th>" if i == 0 else ""
            rows.append(f"<tr>{label}<td>{_e(JUDGEMENTS[j])}</td>{''.join(cells)}</tr>")
    return f"<table><tr><th>run</th><th>judged</th>{head}</tr>{''.join(rows)}</table>"


def _per_reply(run: Run, judgement: Judgement) -> str:
    seconds, replies = run.seconds_of(judgement), run.replies
    return "—" if seconds is None or not replies else f"{seconds / replies:.2f}"


def _counts_table(runs: Sequence[Run]) -> str:
    head = "".join(f"<th>{_e(t)}</th>" for t in COUNTS.values())
    rows = []
    for r in runs:
        cells = "".join(
            f'<td class="n">{"—" if r.counts.get(k) is None else r.counts[k]}</td>' for k in COUNTS
        )
        shown = "—" if r.replies is None else str(r.replies)
        per = "".join(f'<td class="n">{_per_reply(r, j)}</td>' for j in ("sent", "constrained"))
        rows.append(f'<tr><th>{_e(r.label)}</th><td class="n">{shown}</td>{cells}{per}</tr>')
    table = (
        f"<table><tr><th>run</th><th>replies</th>{head}<th>seconds per reply, as sent</th>"
        f"<th>seconds per reply, constrained</th></tr>{''.join(rows)}</table>"
    )
    notes = [
        f'<p class="warn">{_e(r.label)}: {r.counts["visible_calls"]} of {replies} replies left '
        "a call as visible text: the engine's parser missed the model's format.</p>"
        for r in runs
        if (replies := r.replies) is not None and r.counts.get("visible_calls")
    ]
    return table + "".join(notes)


def _conditions_table(runs: Sequence[Run]) -> str:
    heads = ["run", "line", "date", "model", "engine", "base URL", "temperature", "tool_choice"]
    heads += ["thinking", "prompt set", "repeat", "duration (s)", "notes"]
    rows = []
    for r in runs:
        thinking = "—" if r.thinking is None else ("on" if r.thinking else "off")
        values = [
            r.line,
            r.date,
            r.model,
            r.engine,
            r.base_url,
            "default" if r.temperature is None else f"{r.temperature:g}",
            r.tool_choice,
            thinking,
            r.prompts,
            "—" if r.repeat is None else r.repeat,
            "—" if r.duration is None else f"{r.duration:g}",
            r.notes,
        ]
        cells = "".join(f"<td>{_e(v)}</td>" for v in values)
        rows.append(f"<tr><th>{_e(r.label)}</th>{cells}</tr>")
    head = "".join(f"<th>{_e(h)}</th>" for h in heads)
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _failures(runs: Sequence[Run]) -> str:
    parts = []
    for r in runs:
        for failures, how in ((r.failures, ""), (r.constrained_failures, ", constrained")):
            if not failures:
                continue
            items = "".join(
                f"<li><code>{_e(case)}</code>: {_e('; '.join(found))}</li>"
                for case, found in failures.items()
            )
            parts.append(
                f"<details><summary>{_e(r.label)}{how}: {_many(len(failures), 'case')}"
                f"</summary><ul>{items}</ul></details>"
            )
    return "".join(parts) or "<p>No case failed in any run shown.</p>"


def _figure(chart: Chart, png: str | None) -> str:
    data = base64.b64encode(chart.svg).decode("ascii")
    link = f' (also <a href="{_e(png)}">{_e(png)}</a>)' if png else ""
    return (
        f'<figure><img alt="{_e(chart.title)}" src="data:image/svg+xml;base64,{data}">'
        f"<figcaption>{_e(chart.title)}{link}</figcaption></figure>"
    )


def render_html(
    book: Labbook,
    runs: Sequence[Run],
    charts: Sequence[Chart],
    *,
    source: str = "labbook",
    pngs: Sequence[str] = (),
) -> str:
    """The page: rates, what went wrong, conditions, failures, and the lines not read."""
    figures = [_figure(c, pngs[i] if i < len(pngs) else None) for i, c in enumerate(charts)]
    left_out = len(book.runs) - len(runs)
    intro = f"{_many(len(runs), 'run')} from <code>{_e(source)}</code>"
    if left_out:
        intro += f"; {_many(left_out, 'earlier run')} not shown"
    if book.skipped:
        lines = _many(len(book.skipped), "line")
        intro += f'; <span class="warn">{lines} not read (see below)</span>'
    skipped = ""
    if book.skipped:
        items = "".join(f"<li>line {n}: {_e(why)}</li>" for n, why in book.skipped[:200])
        more = len(book.skipped) - 200
        skipped = f"<h2>Lines not read</h2><ul>{items}</ul>" + (
            f"<p>and {more} more.</p>" if more > 0 else ""
        )
    judged = "".join(f"<li><b>{_e(JUDGEMENTS[k])}</b>: {_e(v)}</li>" for k, v in _JUDGED.items())
    meaning = "".join(f"<li><b>{_e(RATES[k])}</b>: {_e(v)}</li>" for k, v in _MEANING.items())
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>toolwire bench: {_e(source)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>How reliably each model and engine calls tools</h1><p>{intro}.</p>"
        f"<h2>Rates</h2><p>Each case judged three ways (a run shows the ones it has; older "
        f"runs, and engines that cannot constrain, have fewer):</p><ul>{judged}</ul>"
        f"{_rates_table(runs)}{figures[0] if figures else ''}"
        f"<p>Each rate is over the cases it means something for:</p><ul>{meaning}</ul>"
        f"<h2>What went wrong</h2>{_counts_table(runs)}{''.join(figures[1:])}"
        f"<h2>Conditions</h2>{_conditions_table(runs)}"
        f"<h2>Failures per case</h2>{_failures(runs)}{skipped}"
        "</body></html>\n"
    )


def write_report(labbook: str | Path, out: str | Path, *, last: int | None = None) -> ReportFiles:
    """Read ``labbook``, write the page to ``out`` and the charts as PNGs beside it.

    The PNGs are named after the page: ``report.html`` gets ``report-rates.png`` and so on.
    ``last`` keeps only the latest runs (at most :data:`MAX_RUNS` are drawn in any case).
    Raises :class:`LabbookError` when the labbook cannot be read or holds no runs.
    """
    if last is not None and last < 1:
        raise LabbookError(f"--last must be at least 1, not {last}")
    source, page = Path(labbook), Path(out)
    try:
        with source.open("rb") as f:
            data = f.read(MAX_LABBOOK_BYTES + 1)
    except OSError as exc:
        raise LabbookError(f"cannot read the labbook {source}: {exc.strerror}") from None
    book = parse_labbook(data)
    if not book.runs:
        why = "; ".join(f"line {n}: {w}" for n, w in book.skipped[:3])
        raise LabbookError(
            f"the labbook {source} holds no bench runs" + (f" ({why})" if why else "")
        )
    keep = min(MAX_RUNS, last) if last else MAX_RUNS
    runs = book.runs[-keep:]
    charts = draw_charts(runs)
    pngs = [page.with_name(f"{page.stem}-{c.name}.png") for c in charts]
    try:
        page.parent.mkdir(parents=True, exist_ok=True)
        for chart, png in zip(charts, pngs, strict=True):
            png.write_bytes(chart.png)
        text = render_html(book, runs, charts, source=source.name, pngs=[p.name for p in pngs])
        page.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise LabbookError(f"cannot write the report {page}: {exc.strerror}") from None
    return ReportFiles(page, pngs, book, list(runs))
