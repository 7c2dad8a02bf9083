"""The charts of a bench report, drawn with matplotlib as SVG (for the page) and PNG.

matplotlib is an optional dependency (``toolwire[report]``): only the report draws. It is
used through ``Figure`` alone, never ``pyplot``, so nothing global is touched and no display
is needed. Labels come from the labbook, which anyone may have written, so mathtext is off:
a ``$`` in a model's name is a dollar sign, not a formula that fails to parse.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import LabbookError
from .labbook import COUNTS, JUDGEMENTS, RATES, Judgement, Run

__all__ = ["RC", "Chart", "draw_charts"]

#: How every report chart is drawn: labels are text, never mathtext; the SVG the same for the
#: same figures.
RC: Any = {  # (matplotlib types its keys as a Literal of every setting)
    "text.parse_math": False,
    "svg.fonttype": "path",
    "svg.hashsalt": "toolwire",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}

_LOWER_IS_BETTER = {
    "false_calls",
    "visible_calls",
    "multiple_calls",
    "request_errors",
    "constrained_errors",
    "seconds",
}


@dataclass(frozen=True)
class Chart:
    """One chart: a name for its PNG file, a title, and the drawing in both forms."""

    name: str
    title: str
    svg: bytes
    png: bytes


def _colours(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"] if n <= 10 else colormaps["viridis"]
    return [cmap(i if n <= 10 else i / max(n - 1, 1)) for i in range(n)]


#: How each judgement's bar is drawn beside the others: solid as sent, pale recovered,
#: hatched and outlined constrained (told apart without colour, which names the run).
_STYLES: dict[Judgement, dict[str, Any]] = {
    "sent": {},
    "recovered": {"alpha": 0.45},
    "constrained": {"fill": False, "hatch": "////", "linewidth": 0.8},
}

_SHOWN: dict[Judgement, str] = {"sent": "solid", "recovered": "pale", "constrained": "hatched"}

#: One bar's value (None: nothing to draw) and the text written beside it.
Bar = tuple[float | None, str]


def _panels(
    runs: Sequence[Run],
    panels: Sequence[tuple[str, str]],
    value: Callable[[Run, str, Judgement], Bar],
    *,
    columns: int,
    share: bool,
    series: Sequence[Judgement] = ("sent",),
) -> Any:
    """A figure of horizontal bar panels: per run, one bar per judgement in ``series``, side
    by side, the same colour per run and the same style per judgement."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.ticker import PercentFormatter

    # Laid out by hand in inches: matplotlib's constrained layout costs three times the
    # drawing itself once there are a few dozen runs.
    rows = -(-len(panels) // columns)
    labels = [r.label for r in runs]
    left = 0.35 + 0.07 * max(len(label) for label in labels)
    width, gap, title, ticks = 3.4, 0.45, 0.55, 0.4
    legend = 0.3 if len(series) > 1 else 0.0
    per_run = 0.28 if len(series) == 1 else 0.06 + 0.16 * len(series)
    height = max(0.9, per_run * len(runs) + 0.3)
    fig_w = left + columns * width + (columns - 1) * gap + 0.5
    fig_h = rows * (title + height + ticks) + 0.1 + legend
    fig = Figure(figsize=(fig_w, fig_h))
    axes = []
    for k in range(len(panels)):
        row, col = divmod(k, columns)
        x = left + col * (width + gap)
        y = fig_h - legend - (row + 1) * (title + height + ticks) + ticks
        axes.append(fig.add_axes((x / fig_w, y / fig_h, width / fig_w, height / fig_h)))
    colours = _colours(len(runs))
    positions = list(range(len(runs)))
    thick = 0.8 / len(series)
    for k, ax in enumerate(axes):
        key, name = panels[k]
        bars = [[value(r, key, j) for r in runs] for j in series]
        widths = [v or 0.0 for drawn in bars for v, _ in drawn]
        top = 1.0 if share else max([*widths, 1e-9])
        for n, (judgement, drawn) in enumerate(zip(series, bars, strict=True)):
            offset = (n - (len(series) - 1) / 2) * thick
            at = [p + offset for p in positions]
            style = _STYLES[judgement]
            colour: dict[str, Any] = (
                {"edgecolor": colours} if style.get("fill") is False else {"color": colours}
            )
            ax.barh(at, [v or 0.0 for v, _ in drawn], height=thick * 0.9, **colour, **style)
            size = 8 if len(series) == 1 else 6
            for pos, (v, text) in zip(at, drawn, strict=True):
                ax.text((v or 0.0) + top * 0.02, pos, text, va="center", fontsize=size)
        ax.set_yticks(positions, labels if k % columns == 0 else [""] * len(runs))
        ax.invert_yaxis()
        ax.set_xlim(0, top * 1.3)
        if share:
            ax.xaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
            ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
        better = "lower is better" if key in _LOWER_IS_BETTER else "higher is better"
        ax.set_title(f"{name}\n({better})", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    if legend:
        handles = [
            Patch(
                facecolor="#777" if _STYLES[j].get("fill") is not False else "none",
                edgecolor="#777",
                label=JUDGEMENTS[j],
                **{k: v for k, v in _STYLES[j].items() if k != "fill"},
            )
            for j in series
        ]
        fig.legend(
            handles=handles, loc="upper center", ncols=len(series), frameon=False, fontsize=8
        )
    return fig


def _rate(run: Run, key: str, judgement: Judgement) -> Bar:
    rates = run.rates_of(judgement)
    if not rates:
        return None, "—"  # the run has no such judgement
    value = rates.get(key)
    return value, "n/a" if value is None else f"{value:.0%}"


def _count(run: Run, key: str, _: Judgement) -> Bar:
    count, replies = run.counts.get(key), run.replies
    if count is None or not replies:
        return None, "n/a"
    return count / replies, f"{count} of {replies}"


def _seconds(run: Run, _: str, judgement: Judgement) -> Bar:
    seconds = run.seconds_of(judgement)
    if seconds is None or not run.replies:
        return None, "—" if judgement != "sent" else "n/a"
    per = seconds / run.replies
    return per, f"{per:.2f} s"


def _render(fig: Any, name: str, title: str) -> Chart:
    svg, png = io.BytesIO(), io.BytesIO()
    fig.savefig(svg, format="svg", metadata={"Date": None})
    fig.savefig(png, format="png", dpi=110)
    return Chart(name, title, svg.getvalue(), png.getvalue())


def draw_charts(runs: Sequence[Run]) -> list[Chart]:
    """The rates side by side, then what went wrong and how long a reply took."""
    try:
        import matplotlib
    except ImportError:
        raise LabbookError(
            "drawing a report needs matplotlib: pip install 'toolwire[report]'"
        ) from None
    with matplotlib.rc_context(RC):
        judged = [j for j in JUDGEMENTS if any(j in r.judgements for r in runs)]
        rates = _panels(runs, list(RATES.items()), _rate, columns=3, share=True, series=judged)
        counts = _panels(runs, list(COUNTS.items()), _count, columns=3, share=True)
        timed: list[Judgement] = ["sent"]
        if any(r.seconds_of("constrained") is not None for r in runs):
            timed.append("constrained")
        per_reply = [("seconds", "seconds per reply")]
        seconds = _panels(runs, per_reply, _seconds, columns=1, share=False, series=timed)
        return [
            _render(
                rates,
                "rates",
                "The six rates, run by run: "
                + ", ".join(f"{JUDGEMENTS[j]} ({_SHOWN[j]})" for j in judged),
            ),
            _render(counts, "diagnostics", "What went wrong, as a share of the replies"),
            _render(
                seconds,
                "seconds",
                "Seconds per reply: " + ", ".join(f"{JUDGEMENTS[j]} ({_SHOWN[j]})" for j in timed),
            ),
        ]
