"""Small inline SVG charts drawn from report data: trend lines and count bars.

The dashboard is one offline page read from ``file://``; its charts are few (trends over
runs, failures per layer), so they are drawn here as SVG text inside the HTML: no script
library, no network, a few kilobytes, and they print. A trend is only drawn for two or
more runs (one run is a dot, not a trend); axes of counts have integer ticks only.
Every label is escaped (``markupsafe.escape``); nothing here reads the store.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from markupsafe import Markup, escape

#: Series colours: distinguishable in colour and, for the colour-blind, by dash pattern.
PALETTE = ("#0b5cad", "#c62828", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#795548")
DASHES = ("", "6 3", "2 3", "8 3 2 3", "", "6 3", "2 3")
WIDTH, HEIGHT = 520, 220
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 24, 44


def integer_ticks(maximum: float, target: int = 4) -> list[int]:
    """Ticks 0..top for a count axis: whole numbers at a step of 1, 2 or 5 x 10^k."""
    top = max(1, math.ceil(maximum))
    raw = top / target
    magnitude = 10 ** max(0, math.floor(math.log10(raw))) if raw >= 1 else 1
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    step = max(1, int(step))
    return list(range(0, math.ceil(top / step) * step + 1, step))


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def trend_chart(
    title: str,
    runs: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None]]],
    *,
    percent: bool = False,
) -> Markup | None:
    """A line chart of ``series`` (label, one value per run) over ``runs``, oldest first.

    ``None`` when there are fewer than two runs or no value at all. ``percent``: values
    are fractions drawn on a 0-100 % axis; otherwise they are counts on an integer axis.
    """
    drawn = [(label, list(vs)) for label, vs in series if any(v is not None for v in vs)]
    if len(runs) < 2 or not drawn:
        return None
    top = 1.0 if percent else max(float(v) for _, vs in drawn for v in vs if v is not None)
    ticks = [0, 0.25, 0.5, 0.75, 1.0] if percent else integer_ticks(top)
    y_max = ticks[-1] or 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    legend_rows = math.ceil(len(drawn) / 3)
    height = HEIGHT + 16 * legend_rows

    def x(i: int) -> float:
        return LEFT + plot_w * i / (len(runs) - 1)

    def y(v: float) -> float:
        return TOP + plot_h * (1 - v / y_max)

    out = [
        f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
        f'height="{height}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f'<text class="chart-title" x="{LEFT}" y="14">{escape(title)}</text>',
    ]
    for t in ticks:
        label = f"{round(t * 100)} %" if percent else str(t)
        out.append(
            f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(t):.1f}" y2="{y(t):.1f}"/>'
            f'<text class="tick" x="{LEFT - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{label}</text>'
        )
    step = max(1, math.ceil(len(runs) / 8))  # at most ~8 run names under the axis
    for i, run in enumerate(runs):
        if i % step == 0 or i == len(runs) - 1:
            name = run if len(run) <= 14 else run[:13] + "…"
            out.append(
                f'<text class="tick" x="{x(i):.1f}" y="{TOP + plot_h + 16}" '
                f'text-anchor="middle">{escape(name)}</text>'
            )
    for n, (label, values) in enumerate(drawn):
        colour, dash = PALETTE[n % len(PALETTE)], DASHES[n % len(DASHES)]
        points = [(x(i), y(float(v))) for i, v in enumerate(values) if v is not None]
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(
            f'<polyline class="series" data-series="{escape(label)}" fill="none" '
            f'stroke="{colour}" stroke-width="2"{dashed} points="{path}"/>'
        )
        for i, v in enumerate(values):
            if v is not None:
                shown = f"{_fmt(v * 100)} %" if percent else _fmt(v)
                out.append(
                    f'<circle cx="{x(i):.1f}" cy="{y(float(v)):.1f}" r="3" fill="{colour}">'
                    f"<title>{escape(label)}, {escape(runs[i])}: {shown}</title></circle>"
                )
        lx = LEFT + (n % 3) * 160
        ly = HEIGHT - 8 + 16 * (n // 3)
        out.append(
            f'<line x1="{lx}" x2="{lx + 18}" y1="{ly - 4}" y2="{ly - 4}" stroke="{colour}" '
            f'stroke-width="2"{dashed}/><text class="legend" x="{lx + 22}" y="{ly}">'
            f"{escape(label)}</text>"
        )
    out.append("</svg>")
    return Markup("".join(out))  # every text from data was escaped above


def count_bar(value: int, maximum: int, width: int = 160) -> Markup:
    """A horizontal bar for a count in a table cell, scaled to ``maximum`` of the column."""
    length = 0 if maximum <= 0 else max(2, round(width * value / maximum)) if value else 0
    return Markup(
        f'<svg class="bar" viewBox="0 0 {width} 12" width="{width}" height="12" aria-hidden="true" '
        f'xmlns="http://www.w3.org/2000/svg"><rect width="{length}" height="12" rx="2"/></svg>'
    )
