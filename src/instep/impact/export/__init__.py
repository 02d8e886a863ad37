"""Render an :class:`~instep.impact.model.ImpactReport` as Markdown, CSV, JSON or HTML.

Exporters only read the report; they never re-derive a verdict. ``render`` returns text;
``write`` puts it in a file (or stdout when ``out`` is None). ``all_units`` (``--all``) adds
the per-unit table to Markdown and every uncoupled unit to the HTML table; JSON and CSV
always hold every unit.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from instep.errors import BadInput
from instep.impact.model import ImpactReport

FORMATS = ("md", "csv", "json", "html")


def _renderer(fmt: str) -> Callable[..., str]:
    # each renderer is imported when its format is asked for (jinja2 for HTML alone)
    if fmt == "md":
        from instep.impact.export.markdown import render_markdown  # CLI start

        return render_markdown
    if fmt == "csv":
        from instep.impact.export.csv_table import render_csv  # CLI start

        return render_csv
    if fmt == "json":
        from instep.impact.export.json_doc import render_json  # CLI start

        return render_json
    if fmt == "html":
        from instep.impact.export.html_page import render_html  # CLI start

        return render_html
    raise BadInput(f"--format: expected one of {', '.join(FORMATS)}, got '{fmt}'")


def render(report: ImpactReport, fmt: str, all_units: bool = False) -> str:
    renderer = _renderer(fmt)
    return renderer(report, all_units=all_units) if fmt in ("md", "html") else renderer(report)


def write(report: ImpactReport, fmt: str, out: Path | None, all_units: bool = False) -> None:
    text = render(report, fmt, all_units=all_units)
    if out is None:
        sys.stdout.write(text)
        return
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        # utf-8-sig for CSV: spreadsheets then read Chinese text correctly
        out.write_text(text, encoding="utf-8-sig" if fmt == "csv" else "utf-8", newline="")
    except OSError as exc:
        raise BadInput(f"--out {out}: cannot write ({exc.strerror or exc})") from exc
