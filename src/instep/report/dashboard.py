"""The offline HTML dashboard of one run: ``index.html``, one page per non-passing case, assets.

:func:`write_dashboard` renders a :class:`~instep.report.run_summary.RunSummary` with the
jinja2 templates in ``templates/`` into a directory that works from ``file://`` with no
network: the few charts are inline SVG drawn by :mod:`instep.report.charts` (no script
library); the filters and the search box of the case table are plain JavaScript in
``static/report.js``. Text that comes from tests (names, messages, output, evidence) is
escaped by jinja2's autoescape, and JSON embedded in the pages sits in
``<script type="application/json">`` with every ``<``, ``>`` and ``&`` escaped, so a
message holding ``</script>`` stays text. Nothing here reads the store.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from instep import __version__
from instep.errors import BadInput
from instep.report import case_view
from instep.report.charts import count_bar, trend_chart
from instep.report.run_summary import TREND_SERIES, RunSummary, traceback_text

log = logging.getLogger(__name__)

ASSETS = "assets"
#: Trend series drawn as counts (compile time, in seconds, is in the metrics table).
COUNT_SERIES = ("failures", "crashes", "timeouts", "graph_breaks", "fallbacks")
CASES = "cases"
STATIC_FILES = ("report.css", "report.js")
#: Colours of the statuses in the charts and the table (colour-blind friendly enough).
STATUS_COLOURS = {
    "passed": "#2e7d32",
    "failed": "#c62828",
    "error": "#ef6c00",
    "crashed": "#6a1b9a",
    "timeout": "#795548",
    "skipped": "#9e9e9e",
    "xfailed": "#bdbdbd",
    "xpassed": "#00838f",
}


@dataclass
class Dashboard:
    """What :func:`write_dashboard` wrote."""

    index: Path
    case_pages: int
    files: int


def script_json(value: Any) -> Markup:
    """``value`` as JSON that is safe inside ``<script type="application/json">``.

    ``<``, ``>`` and ``&`` occur in JSON only inside strings, where their ``\\u`` escapes
    mean the same; with them gone no ``</script>`` or ``<!--`` can end the element.
    """
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text)  # escaped above: no markup can remain


def output_directory(path: Path) -> Path:
    """``path`` as an existing, writable directory, or a one-line :class:`BadInput`."""
    if path.exists() and not path.is_dir():
        raise BadInput(f"--out {path}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".instep-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise BadInput(f"--out {path}: cannot write there ({exc.strerror or exc})") from exc
    return path


def _environment() -> Any:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("instep.report", "templates"),
        autoescape=True,  # every template is HTML; test text must never become markup
        undefined=jinja2.ChainableUndefined,  # stored data may lack a key: show nothing
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["script_json"] = script_json
    env.filters["pct"] = lambda v: "-" if v is None else f"{v:.1%}"
    env.filters["seconds"] = lambda v: "-" if v is None else f"{v:.2f}s"
    env.filters["pretty_json"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False, default=str)
    env.globals.update(
        status_colours=STATUS_COLOURS,
        count_bar=count_bar,
        version=__version__,
    )
    return env


def _charts(summary: RunSummary) -> dict[str, Markup]:
    """The trend charts of the index page: drawn only for two or more runs."""
    runs = [p["run"] for p in summary.trend]
    rates, counts = [], []
    for key, label, kind in TREND_SERIES:
        values = [p.get(key) for p in summary.trend]
        if kind == "rate":
            rates.append((label, values))
        elif key in COUNT_SERIES and (key == "failures" or any(values)):
            counts.append((label, values))
    charts = {
        "trend-rates": trend_chart("rates over runs", runs, rates, percent=True),
        "trend-counts": trend_chart("failures over runs (count)", runs, counts),
    }
    return {name: chart for name, chart in charts.items() if chart is not None}


def write_dashboard(summary: RunSummary, out_dir: Path) -> Dashboard:
    """Write the dashboard of ``summary`` into ``out_dir`` (created; files overwritten).

    Case pages left in ``out_dir/cases`` by an earlier report that this one does not
    write are removed, so every page there belongs to this run.
    """
    out_dir = output_directory(Path(out_dir))
    env = _environment()
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    charts = _charts(summary)
    written = 0
    try:
        (out_dir / ASSETS).mkdir(exist_ok=True)
        (out_dir / CASES).mkdir(exist_ok=True)
        static = resources.files("instep.report") / "static"
        for name in STATIC_FILES:
            (out_dir / ASSETS / name).write_text(
                (static / name).read_text(encoding="utf-8"), encoding="utf-8"
            )
            written += 1
        stale_js = out_dir / ASSETS / "plotly.min.js"  # an older report wrote plotly here
        if stale_js.exists():
            stale_js.unlink()
        index = out_dir / "index.html"
        index.write_text(
            env.get_template("index.html.j2").render(
                s=summary, charts=charts, generated=generated, root=""
            ),
            encoding="utf-8",
        )
        written += 1
        page = env.get_template("case.html.j2")
        pages = 0
        for row in summary.cases:
            if row["page"] is None:
                continue
            outcome = summary.outcomes[row["case"]]
            (out_dir / CASES / row["page"]).write_text(
                page.render(
                    s=summary,
                    row=row,
                    o=outcome,
                    ev=outcome.get("evidence") or {},
                    view=_case_page_data(summary, outcome),
                    artifacts=artifact_links(outcome, summary.run),
                    traceback=traceback_text(outcome) if outcome.get("longrepr") else "",
                    generated=generated,
                    root="../",
                ),
                encoding="utf-8",
            )
            pages += 1
        current = {row["page"] for row in summary.cases if row["page"]}
        for stale in (out_dir / CASES).glob("*.html"):  # an earlier report into the same DIR
            if stale.name not in current:
                stale.unlink()
    except OSError as exc:
        raise BadInput(f"--out {out_dir}: cannot write there ({exc.strerror or exc})") from exc
    log.debug("report of run %s: %s (%d case pages)", summary.run["name"], index, pages)
    return Dashboard(index=index, case_pages=pages, files=written + pages)


def _case_page_data(summary: RunSummary, outcome: dict[str, Any]) -> dict[str, Any]:
    """What the case page shows beyond the stored fields (see :mod:`case_view`)."""
    chain = outcome.get("exception_chain") or []
    case = outcome["case"]
    return {
        "headline": case_view.headline(outcome),
        "where": case_view.user_frame(outcome, (summary.run.get("settings") or {}).get("cwd")),
        "command": case_view.reproduce_command(case, summary.run, summary.environment),
        "triad": case_view.triad_legs(outcome),
        "error": chain[0] if chain else None,
        "frames": case_view.frames_user_first(chain[0].get("frames") or []) if chain else [],
        "causes": [
            dict(exc, frames=case_view.frames_user_first(exc.get("frames") or []))
            for exc in chain[1:]
        ],
        "evidence": case_view.evidence_fields(
            outcome.get("evidence") or {}, skip=("culprits", "triad")
        ),
        "timings": case_view.evidence_fields(
            {"timings": outcome.get("timings"), "stage_timings": outcome.get("stage_timings")}
        ),
        "counters": case_view.evidence_fields(outcome.get("metrics") or {}),
        "culprits": [
            dict(c, name=case_view.culprit_name(c)) for c in case_view.culprits_of(outcome)
        ],
        "selected_by": case_view.selected_by(case, summary.run),
    }


def artifact_links(outcome: dict[str, Any], run: dict[str, Any]) -> list[dict[str, str]]:
    """The stored artifact paths of a case as ``{name, path, href}`` (``file://`` links).

    Relative paths are taken from the run's working directory. Only paths become links
    (always ``file://`` URIs); any other stored value is listed as text.
    """
    cwd = Path((run.get("settings") or {}).get("cwd") or ".")
    links: list[dict[str, str]] = []

    def visit(name: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                visit(f"{name}.{key}" if name else str(key), inner)
        elif isinstance(value, (list, tuple)):
            for i, inner in enumerate(value):
                visit(f"{name}[{i}]", inner)
        elif isinstance(value, str) and value and "\n" not in value and "://" not in value:
            path = Path(value).expanduser()
            path = path if path.is_absolute() else cwd / path
            links.append({"name": name, "path": str(path), "href": path.resolve().as_uri()})
        elif value is not None:
            links.append({"name": name, "path": str(value), "href": ""})

    visit("", outcome.get("artifacts") or {})
    return links
