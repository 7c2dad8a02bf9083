"""The BFCL runs of a labbook (``bench --suite bfcl --labbook``) side by side: one page, its
two charts inside it and as PNGs beside it — the accuracy of each category in each column,
and what toolwire adds to the engine in each category.

Every line is read on its own and every value checked for its type before it is drawn, as
:mod:`.labbook` reads the other runs: a labbook is written by hand and by crash too.
"""

from __future__ import annotations

import html
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import LabbookError
from .labbook import MAX_LABBOOK_BYTES, MAX_LINE_BYTES

__all__ = ["BfclRun", "parse_bfcl", "write_bfcl_report"]

#: The columns a run may have, in the order shown, with their words.
COLUMNS = {
    "alone": "engine alone",
    "sent": "as sent",
    "recovered": "recovered",
    "constrained": "constrained",
}
#: The most runs drawn, and the most categories a run keeps.
MAX_RUNS = 12
MAX_CATEGORIES = 40


@dataclass(frozen=True)
class BfclRun:
    """One BFCL run as its labbook line says it: a label, its accuracy by category and
    column (None: not run), over all cases and in BFCL's summary groups."""

    line: int
    label: str
    cases: int
    categories: dict[str, dict[str, float | None]]
    overall: dict[str, float | None]
    groups: dict[str, dict[str, float | None]]
    date: str
    notes: str

    def columns(self) -> list[str]:
        return [c for c in COLUMNS if self.overall.get(c) is not None]

    def gain(self, category: str) -> float | None:
        """What toolwire adds in a category: its best column against the engine alone (as
        sent, when the engine was not asked alone)."""
        rates = self.categories.get(category, {})
        base = rates.get("alone", rates.get("sent"))
        best = [r for c in ("recovered", "constrained") if (r := rates.get(c)) is not None]
        return None if base is None or not best else max(best) - base


def _rate(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0.0 <= value <= 1.0 else None


def _rates(value: Any) -> dict[str, float | None]:
    given = value if isinstance(value, Mapping) else {}
    return {c: _rate(given.get(c)) for c in COLUMNS}


def _groups(value: Any) -> dict[str, dict[str, float | None]]:
    """BFCL's groups by column (``{column: {group: rate}}``) as ``{group: {column: rate}}``."""
    given = value if isinstance(value, Mapping) else {}
    out: dict[str, dict[str, float | None]] = {}
    for column in COLUMNS:
        rates = given.get(column)
        for group, rate in list(rates.items() if isinstance(rates, Mapping) else ())[:8]:
            out.setdefault(_text(group, 40), {})[column] = _rate(rate)
    return out


def _text(value: Any, most: int = 120) -> str:
    return value[:most] if isinstance(value, str) else ""


def parse_bfcl(data: bytes) -> list[BfclRun]:
    """The BFCL runs of a labbook's bytes (other lines are the other report's)."""
    if len(data) > MAX_LABBOOK_BYTES:
        raise LabbookError(f"the labbook is {len(data)} bytes; the limit is {MAX_LABBOOK_BYTES}")
    runs: list[BfclRun] = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip() or len(raw) > MAX_LINE_BYTES:
            continue
        try:
            entry = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):
            continue
        if not isinstance(entry, dict) or entry.get("suite") != "bfcl":
            continue
        given = entry.get("categories")
        categories = {
            _text(name, 60): _rates(rates)
            for name, rates in list(given.items() if isinstance(given, dict) else ())[
                :MAX_CATEGORIES
            ]
        }
        cases = entry.get("cases")
        model = _text(entry.get("model")) or "?"
        runs.append(
            BfclRun(
                line=number,
                label=f"#{len(runs) + 1} {model.rsplit('/', 1)[-1][:60]}",
                cases=cases if isinstance(cases, int) and not isinstance(cases, bool) else 0,
                categories=categories,
                overall=_rates(entry.get("overall")),
                groups=_groups(entry.get("groups")),
                date=_text(entry.get("date"), 40),
                notes=_text(entry.get("notes"), 300),
            )
        )
    return runs


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _table(run: BfclRun) -> str:
    e = html.escape
    cols = run.columns()
    head = "".join(f"<th>{e(COLUMNS[c])}</th>" for c in cols)
    rows = [
        f"<tr><td>{e(name)}</td>" + "".join(f"<td>{_percent(r.get(c))}</td>" for c in cols)
        for name, r in run.categories.items()
    ]
    rows.append(
        "<tr><td><b>all cases</b></td>"
        + "".join(f"<td><b>{_percent(run.overall.get(c))}</b></td>" for c in cols)
    )
    for group, rates in run.groups.items():
        cells = "".join(f"<td>{_percent(rates.get(c))}</td>" for c in cols)
        rows.append(f"<tr><td>{e(group)} (BFCL's group)</td>{cells}</tr>")
    return (
        f"<h3>{e(run.label)} — {run.cases} cases, {e(run.date)}</h3>"
        + (f"<p>{e(run.notes)}</p>" if run.notes else "")
        + f"<table><tr><th>category</th>{head}</tr>{''.join(rows)}</table>"
    )


def _draw(runs: Sequence[BfclRun]) -> list[tuple[str, str, bytes, bytes]]:
    """The two charts: (name, title, SVG, PNG); labels are text, never mathtext."""
    try:
        import matplotlib
    except ImportError:
        raise LabbookError(
            "drawing a report needs matplotlib: pip install 'toolwire[report]'"
        ) from None
    from .charts import RC

    with matplotlib.rc_context(RC):
        return _charts(runs)


def _charts(runs: Sequence[BfclRun]) -> list[tuple[str, str, bytes, bytes]]:
    from matplotlib.figure import Figure

    out = []
    width = 0.8 / len(COLUMNS)
    fig = Figure(figsize=(11, 3.2 * len(runs)), layout="constrained")
    for i, run in enumerate(runs):
        ax = fig.add_subplot(len(runs), 1, i + 1)
        names = list(run.categories)
        for k, col in enumerate(COLUMNS):
            values = [run.categories[n].get(col) for n in names]
            xs = [j + k * width for j, v in enumerate(values) if v is not None]
            ys = [v for v in values if v is not None]
            if ys:
                ax.bar(xs, ys, width, label=COLUMNS[col])
        ax.set_xticks([j + 1.5 * width for j in range(len(names))], names, rotation=30, ha="right")
        ax.set_ylim(0, 1)
        ax.set_title(run.label)
        ax.legend(fontsize="small", ncols=4)
    out.append(("bfcl-accuracy", "Accuracy by category and column", *_render(fig)))
    fig = Figure(figsize=(11, 3.2), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    names = list(dict.fromkeys(n for r in runs for n in r.categories))
    width = 0.8 / max(len(runs), 1)
    for k, run in enumerate(runs):
        gains = [run.gain(n) for n in names]
        xs = [j + k * width for j, g in enumerate(gains) if g is not None]
        ax.bar(xs, [g for g in gains if g is not None], width, label=run.label)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks([j + 0.4 for j in range(len(names))], names, rotation=30, ha="right")
    ax.set_title("What toolwire adds: its best column against the engine alone (or as sent)")
    ax.legend(fontsize="small")
    out.append(("bfcl-gain", "What toolwire adds, by category", *_render(fig)))
    return out


def _render(fig: Any) -> tuple[bytes, bytes]:
    svg, png = io.BytesIO(), io.BytesIO()
    fig.savefig(svg, format="svg", metadata={"Date": None})
    fig.savefig(png, format="png", dpi=110)
    return svg.getvalue(), png.getvalue()


def write_bfcl_report(runs: Sequence[BfclRun], page: Path, source: str) -> list[Path]:
    """The page for ``runs`` at ``page``, its charts as PNGs beside it; the PNGs' paths."""
    import base64

    shown = list(runs)[-MAX_RUNS:]
    charts = _draw(shown)
    pngs = [page.with_name(f"{page.stem}-{name.removeprefix('bfcl-')}.png") for name, *_ in charts]
    figures = "".join(
        f'<figure><img alt="{html.escape(title)}" src="data:image/svg+xml;base64,'
        f'{base64.b64encode(svg).decode()}"><figcaption>{html.escape(title)}</figcaption>'
        "</figure>"
        for _, title, svg, _ in charts
    )
    text = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>toolwire bench BFCL: {html.escape(source)}</title><style>"
        "body{font-family:sans-serif;max-width:70em;margin:auto}td,th{padding:2px 8px;"
        "text-align:right}td:first-child{text-align:left}</style></head><body>"
        f"<h1>BFCL v4 through toolwire</h1><p>{len(shown)} runs from "
        f"<code>{html.escape(source)}</code>. Columns: the engine alone (no toolwire in "
        "front), as sent (its own calls), recovered (toolwire's reading and typing of the "
        "same reply), constrained (a second generation under the tools' grammar).</p>"
        f"{figures}{''.join(_table(r) for r in shown)}</body></html>\n"
    )
    try:
        page.parent.mkdir(parents=True, exist_ok=True)
        for (_, _, _, png), path in zip(charts, pngs, strict=True):
            path.write_bytes(png)
        page.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise LabbookError(f"cannot write the report {page}: {exc.strerror}") from None
    return pngs
