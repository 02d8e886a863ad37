"""The offline HTML dashboard of one run: ``index.html``, one page per non-passing case, assets.

:func:`write_dashboard` renders a :class:`~instep.report.run_summary.RunSummary` with the
jinja2 templates in ``templates/`` into a directory that works from ``file://`` with no
network: the charts are plotly figures whose JavaScript library is written once into
``assets/plotly.min.js``; the filters and the search box of the case table are plain
JavaScript in ``static/report.js``. Text that comes from tests (names, messages, output,
evidence) is escaped by jinja2's autoescape, and JSON embedded in the pages sits in
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
from instep.errors import BadInput, require_module
from instep.report.run_summary import TREND_SERIES, RunSummary, traceback_text, triad_of
from instep.suites.case_record import LEGS

log = logging.getLogger(__name__)

ASSETS = "assets"
CASES = "cases"
STATIC_FILES = ("report.css", "report.js")
PLOTLY_JS = "plotly.min.js"
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
LEG_LABELS = {
    "eager_cpu": "eager CPU",
    "eager_device": "eager device",
    "compiled_device": "compiled device",
}


@dataclass
class Dashboard:
    """What :func:`write_dashboard` wrote."""

    index: Path
    case_pages: int
    files: int


def require_plotly() -> Any:
    """The ``plotly`` package, or a one-line :class:`MissingDependency` naming the extra."""
    needed_for, hint = "instep report (HTML)", "pip install 'instep[report]'"
    go = require_module("plotly.graph_objects", needed_for, hint)
    return go, require_module("plotly.offline", needed_for, hint)


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
        leg_labels=LEG_LABELS,
        legs=LEGS,
        version=__version__,
    )
    return env


def _figures(summary: RunSummary, go: Any) -> dict[str, str]:
    """The plotly figures of the index page, as JSON strings (``plotly.io.to_json``)."""
    # optional dependency: the 'report' extra
    import plotly.io

    figures: dict[str, Any] = {}
    runs = [p["run"] for p in summary.trend]
    layout = {
        "margin": {"l": 50, "r": 20, "t": 40, "b": 60},
        "height": 320,
        "legend": {"orientation": "h", "y": -0.25},
        "xaxis": {"type": "category", "title": {"text": "run"}},
    }
    rates = go.Figure(layout={**layout, "title": {"text": "rates over runs"}})
    rates.update_yaxes(title_text="%", range=[0, 105])
    counts = go.Figure(layout={**layout, "title": {"text": "failures and counters over runs"}})
    counts.update_yaxes(title_text="count", rangemode="tozero")
    for key, label, kind in TREND_SERIES:
        values = [p.get(key) for p in summary.trend]
        if all(v is None for v in values):
            continue
        if kind == "rate":
            ys = [None if v is None else round(v * 100, 2) for v in values]
            rates.add_trace(go.Scatter(x=runs, y=ys, name=label, mode="lines+markers"))
        elif key == "failures" or any(values):
            counts.add_trace(go.Scatter(x=runs, y=values, name=label, mode="lines+markers"))
    figures["trend-rates"] = rates
    figures["trend-counts"] = counts
    statuses = summary.run.get("counts") or {}
    order = [s for s in STATUS_COLOURS if s in statuses]
    figures["statuses"] = go.Figure(
        data=[
            go.Bar(
                x=order,
                y=[statuses[s] for s in order],
                marker_color=[STATUS_COLOURS[s] for s in order],
            )
        ],
        layout={**layout, "title": {"text": "outcomes of this run"}, "xaxis": {}},
    )
    layers = summary.matrix["layers"]
    figures["layers"] = go.Figure(
        data=[
            go.Bar(
                x=layers,
                y=[summary.matrix["layer_totals"][layer] for layer in layers],
                marker_color="#c62828",
            )
        ],
        layout={**layout, "title": {"text": "failures by layer"}, "xaxis": {}},
    )
    return {name: plotly.io.to_json(fig) for name, fig in figures.items()}


def write_dashboard(summary: RunSummary, out_dir: Path) -> Dashboard:
    """Write the dashboard of ``summary`` into ``out_dir`` (created; files overwritten).

    Case pages left in ``out_dir/cases`` by an earlier report that this one does not
    write are removed, so every page there belongs to this run.
    """
    go, offline = require_plotly()
    out_dir = output_directory(Path(out_dir))
    env = _environment()
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    figures = _figures(summary, go)
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
        (out_dir / ASSETS / PLOTLY_JS).write_text(offline.get_plotlyjs(), encoding="utf-8")
        written += 1
        index = out_dir / "index.html"
        index.write_text(
            env.get_template("index.html.j2").render(
                s=summary, figures=figures, generated=generated, root=""
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
                    triad=triad_of(outcome),
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
