"""Run reports and the weekly summary, in Markdown (en / zh).

:func:`run_report_markdown` renders one run (a :class:`~instep.report.run_summary.RunSummary`):
a header (run, profile, tier, previous run, outcome counts, version matrix), the batch
table (batch, topic, cases, passed / failed, judgement: the previous run's batches
followed into this run, then the batches new to it) and the run metrics (this run and
the previous one).

:func:`weekly_summary` gathers the runs of one profile and tier over a date range (by
default the last 7 days) and :func:`weekly_markdown` renders them: a "to do" list of the
batches failing in the last run (first meaningful error line, the user's file:line, the
owner named by the config's ``[owners]`` or "unassigned"), the trend (pass rate,
failures, unclassified failures, compile time per run), failures per layer, and the
batches new / fixed / still failing between the first and the last run (by
:func:`instep.triage.batches.follow` and :func:`instep.triage.migration.compare`).

Every zh word comes from :mod:`instep.glossary`. Table cells are escaped for Markdown and
for the HTML a Markdown renderer makes of them (``|``, ``<``, ``>``, ``&``, line breaks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from instep import glossary
from instep.errors import BadInput
from instep.layers import Layer
from instep.outcome import FAILING, OutcomeRecord
from instep.report.run_summary import NEW_IN_RUN, RunSummary
from instep.suites.metrics import RunMetrics, run_metrics
from instep.triage.batches import Batch, follow, group_batches
from instep.triage.migration import compare

LANGS = ("en", "zh")
MAX_ERROR = 120
MAX_TOPIC = 100
DEFAULT_DAYS = 7

_RUN_TEXT_EN: dict[str, Any] = {
    "title": "Run report: {run}",
    "profile": "profile",
    "tier": "tier",
    "previous": "previous run",
    "none": "none",
    "started": "started",
    "outcomes": "outcomes",
    "versions": "Version matrix",
    "version_columns": ["component", "version"],
    "batches": "Batches and their results",
    "batch_note": (
        "Passed / failed count the members of the previous run's batch in this run;"
        " a batch new in this run counts its own cases."
    ),
    "columns": ["batch", "topic", "cases", "passed / failed", "judgement"],
    "no_batches": "No failures in this run or the previous one.",
    "metrics": "Metrics",
    "metric_columns": ["metric", "this run", "previous run"],
    "new_cases": "{n} new",
    "untriaged": "not triaged",
}

_WEEKLY_TEXT_EN: dict[str, Any] = {
    "title": "Weekly summary: profile {profile}, tier {tier}, {since} to {until}",
    "runs": "runs",
    "runs_line": "{n} runs; first {first} ({first_at}), last {last} ({last_at})",
    "no_runs": "No run in this date range.",
    "todo": "To do",
    "todo_note": (
        "Batches failing in the last run, new ones first; the place is the innermost frame"
        " in the user's code."
    ),
    "todo_columns": ["batch", "layer", "first error", "where", "cases", "state", "owner"],
    "no_todo": "Nothing fails in the last run.",
    "trend": "Trend",
    "trend_columns": [
        "run",
        "date",
        "cases",
        "passed",
        "pass rate",
        "failures",
        "unclassified",
        "compile time",
    ],
    "layers": "Failures per layer",
    "layer_column": "layer",
    "changes": "First run against the last run",
    "changes_note": (
        "A batch's state follows the first run's batches into the last run, then the"
        " batches new in the last run."
    ),
    "change_columns": ["batch", "layer", "topic", "state", "cases"],
    "no_changes": "No failures in the first or the last run.",
    "cases_line": (
        "cases: {new} newly failing, {fixed} fixed, {still_failing} still failing,"
        " {changed} failing differently"
    ),
    "only_one_run": "One run in this date range: no trend to compare.",
    "state_new": "new",
    "state_fixed": "fixed",
    "state_still": "still failing",
    "state_changed": "failing differently",
    "unassigned": "unassigned",
    "untriaged": "not triaged",
}

#: English keys of the judgements of ``BatchProgress.judgement`` and ``run_summary``.
JUDGEMENTS = (
    "not re-run",
    "fixed",
    "sank: errors changed (re-classify the new batches)",
    "partly fixed: the rest still fails",
    "partly fixed: the rest still fails, some with new errors",
    "open: some errors changed",
    "open",
    NEW_IN_RUN,
)
#: Lines of an error message that say nothing of the error (a wrapper's header, a hint).
_WRAPPER_LINES = (
    re.compile(r"^backend=.* raised:$"),
    re.compile(r"^Set TORCH\w* ?=.*"),
    re.compile(r"^(While executing|Original traceback:|from user code:)"),
)


def cell(text: object) -> str:
    """One Markdown table cell: one line, pipes escaped, no HTML a renderer would run."""
    value = " ".join(str(text).split())
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return value.replace("|", "\\|")


def judgement_text(judgement: str, lang: str) -> str:
    if lang != "zh":
        return judgement
    zh = glossary.glossary()["texts"]["judgement"]
    match = re.fullmatch(r"open since (.+)", judgement)
    if match:
        return zh["open since"].format(run=match.group(1))
    return zh.get(judgement, judgement)


def metric_label(label: str, lang: str) -> str:
    if lang != "zh":
        return label
    zh = glossary.glossary()["texts"]["metrics"]
    for prefix in ("triad ", "failures at "):
        if label.startswith(prefix):
            return zh[prefix] + label[len(prefix) :]
    return zh.get(label, label)


def _row(values: tuple[object, ...] | list[object]) -> str:
    return "| " + " | ".join(cell(v) for v in values) + " |"


def _table(columns: tuple[str, ...] | list[str], rows: list[list[object]]) -> list[str]:
    return [_row(columns), "|" + "|".join("---" for _ in columns) + "|", *map(_row, rows)]


def _code(text: object) -> str:
    """Stored data (a signature, an error line) quoted verbatim in a cell."""
    value = " ".join(str(text).split()).replace("`", "'")
    return f"`{value}`" if value else ""


def _check_lang(lang: str) -> None:
    if lang not in LANGS:
        raise BadInput(f"--lang {lang}: expected one of {', '.join(LANGS)}")


def _counts(counts: dict[str, int], lang: str) -> str:
    return ", ".join(f"{n} {glossary.status(status, lang)}" for status, n in counts.items())


# -- the report of one run --------------------------------------------------------------


def run_report_markdown(summary: RunSummary, lang: str = "en") -> str:
    """The report of one run: header, batch table, metrics (``instep report RUN --format md``)."""
    _check_lang(lang)
    t = glossary.texts("run_report", _RUN_TEXT_EN, lang)
    run = summary.run
    counts = _counts(run.get("counts") or {}, lang)
    lines = [
        f"# {cell(t['title'].format(run=run['name']))}",
        "",
        f"- {t['profile']}: {cell(run['profile'])}; {t['tier']}: {cell(run.get('tier') or '-')}",
        f"- {t['previous']}: {cell(summary.previous or t['none'])}",
        f"- {t['started']}: {cell(run.get('started_at') or '-')}",
        f"- {t['outcomes']}: {cell(counts or '-')}",
        "",
    ]
    if summary.version_matrix:
        lines += [f"## {t['versions']}", ""]
        lines += _table(
            t["version_columns"], [[name, value] for name, value in summary.version_matrix]
        )
        lines.append("")
    lines += [f"## {t['batches']}", ""]
    if summary.batches:
        lines += [t["batch_note"], ""]
        rows: list[list[object]] = []
        passed, failed = glossary.status("passed", lang), glossary.status("failed", lang)
        for b in summary.batches:
            topic = f"{b['layer'] or t['untriaged']}: {b['category'] or '?'} — "
            topic += _code(glossary.cut(b["signature"] or "", MAX_TOPIC))
            cases = str(b["previous_cases"] if b["previous_cases"] is not None else b["size"])
            if b["previous_cases"] is None:
                result = f"{b['size']} {failed}"
            else:
                result = f"{b['passed']} {passed} / {b['failed']} {failed}"
                if b["new_members"]:
                    result += f" (+{t['new_cases'].format(n=b['new_members'])})"
            judgement = judgement_text(b["judgement"], lang)
            if b["moved"]:
                judgement += " → " + ", ".join(sorted(set(b["moved"].values())))
            rows.append([b["batch"], topic, cases, result, judgement])
        lines += _table(t["columns"], rows)
    else:
        lines.append(t["no_batches"])
    lines += ["", f"## {t['metrics']}", ""]
    before = dict(summary.previous_metric_rows)
    if summary.previous:
        columns = t["metric_columns"]
        metric_rows = [
            [metric_label(label, lang), value, before.get(label, "-")]
            for label, value in summary.metric_rows
        ]
    else:
        columns = t["metric_columns"][:2]
        metric_rows = [[metric_label(label, lang), value] for label, value in summary.metric_rows]
    lines += _table(columns, metric_rows)
    return "\n".join(lines) + "\n"


# -- the weekly summary -----------------------------------------------------------------


@dataclass
class WeeklyRun:
    name: str
    started_at: datetime
    records: list[OutcomeRecord]
    metrics: RunMetrics
    cwd: str | None


@dataclass
class TodoItem:
    batch: str
    layer: str | None
    error: str
    where: str
    cases: int
    state: str  # "new" or "still" (failing since the first run of the range)
    owner: str | None


@dataclass
class WeeklySummary:
    profile: str | None
    tier: str | None
    since: date
    until: date
    runs: list[WeeklyRun] = field(default_factory=list)
    todo: list[TodoItem] = field(default_factory=list)
    #: (batch, layer, category, signature, state, cases) between the first and last run
    changes: list[tuple[str, str | None, str | None, str | None, str, int]] = field(
        default_factory=list
    )
    case_changes: dict[str, int] = field(default_factory=dict)


def weekly_range(since: date | None, until: date | None, today: date | None = None):
    """``(since, until)``, both included: by default the 7 days up to today (UTC)."""
    until = until or today or datetime.now(timezone.utc).date()
    since = since or until - timedelta(days=DEFAULT_DAYS - 1)
    if since > until:
        raise BadInput(f"--since {since}: after --until {until} (expected an earlier date)")
    return since, until


def first_error_line(o: OutcomeRecord) -> str:
    """The first line of the error that says something (no wrapper header, no hint)."""
    lines = [ln.strip() for ln in (o.message or "").splitlines()]
    meaningful = [ln for ln in lines if ln and not any(p.match(ln) for p in _WRAPPER_LINES)]
    line = meaningful[0] if meaningful else (o.message or "").strip() or str(o.status)
    chain = o.exception_chain or []
    if chain and not re.match(r"^[\w.]+(Error|Exception|Exit|Unsupported|Failed)\b", line):
        line = f"{str(chain[0].get('type') or '').rsplit('.', 1)[-1]}: {line}"
    return glossary.cut(line, MAX_ERROR)


def user_location(o: OutcomeRecord, cwd: str | None) -> str:
    """``file:line`` of the innermost frame in the user's tree (the run's directory, not
    an installed package), relative to it; ``-`` when the chain has none."""
    root = Path(cwd).resolve() if cwd else None
    found = "-"
    for exc in o.exception_chain or []:
        for frame in exc.get("frames") or []:
            file = str(frame.get("file") or "")
            if not file or "site-packages" in file or "dist-packages" in file:
                continue
            path = Path(file)
            if root is not None and path.is_absolute():
                try:
                    path = path.resolve().relative_to(root)
                except ValueError:
                    continue
            found = f"{path.as_posix()}:{frame.get('line')}"
    return found


def _owner(batch: Batch, owners: dict[str, str]) -> str | None:
    for key in (batch.category, batch.layer):
        if key and key in owners:
            return owners[key]
    return None


def _depth(layer: str | None) -> int:
    try:
        return Layer(layer).depth if layer else 99
    except ValueError:
        return 99


def weekly_summary(
    store: Any,
    *,
    since: date | None = None,
    until: date | None = None,
    profile: str | None = None,
    tier: str | None = None,
    owners: dict[str, str] | None = None,
    today: date | None = None,
) -> WeeklySummary:
    """The runs of ``profile`` and ``tier`` started in ``[since, until]`` (dates, UTC, both
    included), with trend, batch changes and the to-do list. Without ``profile`` (or
    ``tier``), those of the range's last run."""
    since, until = weekly_range(since, until, today)
    in_range = [r for r in store.list_runs() if since <= r.started_at.date() <= until]
    if profile is None and in_range:
        profile = in_range[-1].profile
    chosen = [r for r in in_range if r.profile == profile]
    if tier is None and chosen:
        tier = chosen[-1].tier
    chosen = [r for r in chosen if r.tier == tier]
    summary = WeeklySummary(profile, tier, since, until)
    for r in chosen:
        recs = store.outcome_records(r.id)
        summary.runs.append(
            WeeklyRun(
                r.name,
                r.started_at,
                recs,
                run_metrics(recs, store.planned_count(r.id)),
                (r.settings or {}).get("cwd"),
            )
        )
    if not summary.runs:
        return summary
    first, last = summary.runs[0], summary.runs[-1]
    first_batches = group_batches(first.records) if len(summary.runs) > 1 else []
    last_batches = group_batches(last.records)
    first_ids = {b.id for b in first_batches}
    by_case = {o.case: o for o in last.records}
    for b in last_batches:
        o = by_case[b.representative or b.cases[0]]
        summary.todo.append(
            TodoItem(
                b.id,
                b.layer,
                first_error_line(o),
                user_location(o, last.cwd),
                len(b.cases),
                "still" if b.id in first_ids else "new",
                _owner(b, owners or {}),
            )
        )
    summary.todo.sort(key=lambda i: (i.state != "new", _depth(i.layer), -i.cases, i.batch))
    if len(summary.runs) > 1:
        for p in follow(first_batches, last.records):
            b = p.batch
            if p.judgement == "not re-run":
                continue
            state = "fixed" if p.judgement == "fixed" else "still" if p.same else "changed"
            summary.changes.append((b.id, b.layer, b.category, b.signature, state, len(b.cases)))
        for b in last_batches:
            if b.id not in first_ids:
                summary.changes.append(
                    (b.id, b.layer, b.category, b.signature, "new", len(b.cases))
                )
        groups = compare((first.name, first.records), (last.name, last.records))
        summary.case_changes = {
            "new": len(groups["new"]),
            "fixed": len(groups["fixed"]),
            "still_failing": len(groups["still_failing"]),
            "changed": sum(len(groups[k]) for k in ("deeper", "shallower", "changed")),
        }
    return summary


def _pass_rate(records: list[OutcomeRecord]) -> str:
    ran = [o for o in records if o.status.value != "skipped"]
    if not ran:
        return "-"
    return f"{sum(o.status.value == 'passed' for o in ran) / len(ran):.1%}"


def weekly_markdown(weekly: WeeklySummary, lang: str = "en") -> str:
    """The weekly summary in Markdown: to do, trend, failures per layer, batch changes."""
    _check_lang(lang)
    t = glossary.texts("weekly", _WEEKLY_TEXT_EN, lang)
    title = t["title"].format(
        profile=weekly.profile or "-",
        tier=weekly.tier or "-",
        since=weekly.since.isoformat(),
        until=weekly.until.isoformat(),
    )
    lines = [f"# {cell(title)}", ""]
    runs = weekly.runs
    if not runs:
        return "\n".join([*lines, t["no_runs"]]) + "\n"
    first, last = runs[0], runs[-1]
    lines.append(
        "- "
        + t["runs_line"].format(
            n=len(runs),
            first=first.name,
            first_at=first.started_at.date().isoformat(),
            last=last.name,
            last_at=last.started_at.date().isoformat(),
        )
    )
    if len(runs) == 1:
        lines.append(f"- {t['only_one_run']}")
    states = {
        "new": t["state_new"],
        "fixed": t["state_fixed"],
        "still": t["state_still"],
        "changed": t["state_changed"],
    }
    lines += ["", f"## {t['todo']}", ""]
    if weekly.todo:
        lines += [t["todo_note"], ""]
        rows: list[list[object]] = [
            [
                i.batch,
                i.layer or t["untriaged"],
                _code(i.error),
                _code(i.where) if i.where != "-" else "-",
                i.cases,
                states[i.state],
                i.owner or t["unassigned"],
            ]
            for i in weekly.todo
        ]
        lines += _table(t["todo_columns"], rows)
    else:
        lines.append(t["no_todo"])
    lines += ["", f"## {t['trend']}", ""]
    trend_rows: list[list[object]] = []
    for r in runs:
        failing = sum(o.status in FAILING for o in r.records)
        trend_rows.append(
            [
                r.name,
                r.started_at.date().isoformat(),
                r.metrics.executed,
                r.metrics.statuses.get("passed", 0),
                _pass_rate(r.records),
                failing,
                r.metrics.unclassified,
                f"{r.metrics.compile_time_s:.1f} s",
            ]
        )
    lines += _table(t["trend_columns"], trend_rows)
    layers = sorted(
        {layer for r in runs for layer in r.metrics.failures_by_layer},
        key=lambda x: _depth(None if x == "untriaged" else x),
    )
    if layers:
        lines += ["", f"## {t['layers']}", ""]
        layer_rows: list[list[object]] = [
            [
                t["untriaged"] if layer == "untriaged" else layer,
                *(r.metrics.failures_by_layer.get(layer, 0) for r in runs),
            ]
            for layer in layers
        ]
        lines += _table([t["layer_column"], *(r.name for r in runs)], layer_rows)
    if len(runs) > 1:
        lines += ["", f"## {t['changes']}", ""]
        c = weekly.case_changes
        lines += ["- " + t["cases_line"].format(**c), ""]
        if weekly.changes:
            lines += [t["changes_note"], ""]
            order = {"new": 0, "still": 1, "changed": 2, "fixed": 3}
            change_rows: list[list[object]] = [
                [
                    batch,
                    layer or t["untriaged"],
                    f"{category or '?'} — " + _code(glossary.cut(signature or "", MAX_TOPIC)),
                    states[state],
                    size,
                ]
                for batch, layer, category, signature, state, size in sorted(
                    weekly.changes, key=lambda ch: (order[ch[4]], _depth(ch[1]), ch[0])
                )
            ]
            lines += _table(t["change_columns"], change_rows)
        else:
            lines.append(t["no_changes"])
    return "\n".join(lines) + "\n"
