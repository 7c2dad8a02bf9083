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
from .labbook import COUNTS, RATES, Run

__all__ = ["Chart", "draw_charts"]

_LOWER_IS_BETTER = {"false_calls", "visible_calls", "multiple_calls", "request_errors", "seconds"}


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


def _panels(
    runs: Sequence[Run],
    panels: Sequence[tuple[str, str]],
    value: Callable[[Run, str], tuple[float | None, str]],
    *,
    columns: int,
    share: bool,
) -> Any:
    """A figure of horizontal bar panels, one bar per run, the same colour per run."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import PercentFormatter

    # Laid out by hand in inches: matplotlib's constrained layout costs three times the
    # drawing itself once there are a few dozen runs.
    rows = -(-len(panels) // columns)
    labels = [r.label for r in runs]
    left = 0.35 + 0.07 * max(len(label) for label in labels)
    width, gap, title, ticks = 3.4, 0.45, 0.55, 0.4
    height = max(0.9, 0.28 * len(runs) + 0.3)
    fig_w = left + columns * width + (columns - 1) * gap + 0.5
    fig_h = rows * (title + height + ticks) + 0.1
    fig = Figure(figsize=(fig_w, fig_h))
    axes = []
    for k in range(len(panels)):
        row, col = divmod(k, columns)
        x = left + col * (width + gap)
        y = fig_h - (row + 1) * (title + height + ticks) + ticks
        axes.append(fig.add_axes((x / fig_w, y / fig_h, width / fig_w, height / fig_h)))
    colours = _colours(len(runs))
    positions = list(range(len(runs)))
    for k, ax in enumerate(axes):
        key, name = panels[k]
        values = [value(r, key) for r in runs]
        widths = [v if v is not None else 0.0 for v, _ in values]
        ax.barh(positions, widths, color=colours, height=0.7)
        recovered: list[float | None] = [None] * len(runs)
        if key in RATES and any(r.recovered_rates for r in runs):
            recovered = [r.rates_of(recovered=True).get(key) for r in runs]
            ax.barh(
                positions,
                [h if h is not None else 0.0 for h in recovered],
                height=0.7,
                fill=False,
                edgecolor="#333",
                linestyle="--",
                linewidth=0.8,
            )
        top = 1.0 if share else max([*widths, 1e-9])
        for pos, (v, text), h in zip(positions, values, recovered, strict=True):
            if h is not None and h != v:
                text += f" → {h:.0%}"
            end = max(v or 0.0, h or 0.0)
            ax.text(end + top * 0.02, pos, text, va="center", fontsize=8)
        ax.set_yticks(positions, labels if k % columns == 0 else [""] * len(runs))
        ax.invert_yaxis()
        ax.set_xlim(0, top * 1.3)
        if share:
            ax.xaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
            ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
        better = "lower is better" if key in _LOWER_IS_BETTER else "higher is better"
        ax.set_title(f"{name}\n({better})", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    return fig


def _rate(run: Run, key: str) -> tuple[float | None, str]:
    value = run.rates.get(key)
    return value, "n/a" if value is None else f"{value:.0%}"


def _count(run: Run, key: str) -> tuple[float | None, str]:
    count, replies = run.counts.get(key), run.replies
    if count is None or not replies:
        return None, "n/a"
    return count / replies, f"{count} of {replies}"


def _seconds(run: Run, _: str) -> tuple[float | None, str]:
    if run.duration is None or not run.replies:
        return None, "n/a"
    per = run.duration / run.replies
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
    with matplotlib.rc_context(
        {
            "text.parse_math": False,
            "svg.fonttype": "path",
            "svg.hashsalt": "toolwire",
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    ):
        rates = _panels(runs, list(RATES.items()), _rate, columns=3, share=True)
        counts = _panels(runs, list(COUNTS.items()), _count, columns=3, share=True)
        per_reply = [("seconds", "seconds per reply")]
        seconds = _panels(runs, per_reply, _seconds, columns=1, share=False)
        return [
            _render(
                rates,
                "rates",
                "The six rates, run by run, as the engine sent each reply "
                "(dashed outline: with toolwire's recovery)",
            ),
            _render(counts, "diagnostics", "What went wrong, as a share of the replies"),
            _render(seconds, "seconds", "Seconds per reply"),
        ]
