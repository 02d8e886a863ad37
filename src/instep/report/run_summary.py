"""One run's report data, gathered from the store into plain values.

:func:`summarize_run` reads a stored run and the earlier runs of the same profile and
tier, and returns a :class:`RunSummary`: the run header and its stored version matrix, the
run metrics (``instep.suites.metrics``) with their trend over the earlier runs, the
layer x category matrix of the failures, the batches (``instep.triage.batches``) with
their judgement against the previous run and a representative traceback, the migration
chains of the cases whose failure moved (``instep.triage.migration``), and one row per
case. Everything is plain data (str, numbers, lists, dicts) that the dashboard and the
weekly Markdown render; nothing here classifies, writes the store or renders.

The stored classification is used as it is: a run stored before triage existed shows its
failures as ``untriaged`` until ``instep triage RUN`` has classified them.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from instep.layers import Layer
from instep.outcome import FAILING, MANIFESTATIONS, OutcomeRecord, records
from instep.report.case_view import (
    batch_culprit,
    bundle_command,
    headline,
    reproduce_command,
    run_directory,
    run_environment,
    user_frame,
)
from instep.store import run_dict
from instep.suites.metrics import RunMetrics, run_metrics, table_rows
from instep.triage.batches import Batch, first_seen, follow, group_batches
from instep.triage.migration import CaseMigration, follow_cases, step_label

#: Runs of the same profile and tier shown in the trend (the reported run included).
DEFAULT_HISTORY = 20
#: The longest traceback text kept for a batch's representative (its last lines).
MAX_TRACEBACK_LINES = 80
MAX_TRACEBACK_CHARS = 12_000
UNTRIAGED = "untriaged"
UNCLASSIFIED = "unclassified"
#: Trend series: (key of a trend point, label, kind) where kind is ``rate`` or ``count``.
TREND_SERIES: tuple[tuple[str, str, str], ...] = (
    ("pass_rate", "pass rate", "rate"),
    ("compile_success_rate", "compile success rate", "rate"),
    ("semantic_pass_rate", "semantic pass rate", "rate"),
    ("fallback_ratio", "fallback ratio", "rate"),
    ("failures", "failures", "count"),
    ("crashes", "crashes", "count"),
    ("timeouts", "time-outs", "count"),
    ("graph_breaks", "graph breaks", "count"),
    ("fallbacks", "fallbacks", "count"),
    ("compile_time_s", "compile time (s)", "count"),
)
#: Judgement of a batch absent from the previous run.
NEW_IN_RUN = "new in this run"
OPEN_SINCE = "open since {run}"


@dataclass
class RunSummary:
    """What a report shows about one run; every field is plain data."""

    run: dict[str, Any]
    version_matrix: list[tuple[str, str]]
    version_errors: dict[str, str]
    metrics: dict[str, Any]
    metric_rows: list[tuple[str, str]]
    previous: str | None
    previous_metric_rows: list[tuple[str, str]]
    trend: list[dict[str, Any]]
    matrix: dict[str, Any]
    batches: list[dict[str, Any]]
    migrations: list[dict[str, Any]]
    cases: list[dict[str, Any]]
    outcomes: dict[str, dict[str, Any]] = field(repr=False)  # case -> outcome_dict
    #: one row per batch, failing first: state, error line, file:line, command, culprit
    failing_now: list[dict[str, Any]] = field(default_factory=list)
    #: the profile's environment for every test process (part of the reproduce commands)
    environment: dict[str, str] = field(default_factory=dict)
    #: where the reproduce commands of ``failing_now`` run (the run's directory)
    workdir: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def case_page_name(case: str) -> str:
    """A file name for a case's page: readable, filesystem-safe and unique per node id."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", case).strip("._")[:80]
    digest = hashlib.sha1(case.encode("utf-8")).hexdigest()[:10]
    return f"{readable}-{digest}.html"


def traceback_text(outcome: dict[str, Any]) -> str:
    """The traceback a person reads first: pytest's report, else the stored chain's frames.

    A crash has no Python traceback of the test: its faulthandler dump (stderr tail) is
    appended after the frames the runner recovered from it.
    """
    text = (outcome.get("longrepr") or "").strip()
    if not text:
        text = format_chain(outcome.get("exception_chain") or [])
        if outcome.get("status") in MANIFESTATIONS and outcome.get("stderr_tail"):
            text = (text + "\n\n" if text else "") + str(outcome["stderr_tail"]).strip()
    lines = text.splitlines()
    if len(lines) > MAX_TRACEBACK_LINES:
        lines = ["…", *lines[-MAX_TRACEBACK_LINES:]]
    text = "\n".join(lines)
    return text if len(text) <= MAX_TRACEBACK_CHARS else "…" + text[-MAX_TRACEBACK_CHARS:]


def format_chain(chain: list[dict[str, Any]]) -> str:
    """An exception chain (outermost first) in Python's order: the root cause first."""
    blocks = []
    for position, exc in enumerate(reversed(chain)):
        lines = []
        if position:
            relation = chain[len(chain) - position].get("relation")
            lines.append(
                "The above exception was the direct cause of the following exception:"
                if relation == "cause"
                else "During handling of the above exception, another exception occurred:"
            )
            lines.append("")
        lines.append("Traceback (most recent call last):")
        for frame in exc.get("frames") or []:
            where, line, function = frame.get("file"), frame.get("line"), frame.get("function")
            lines.append(f'  File "{where}", line {line}, in {function}')
        message = exc.get("message")
        lines.append(f"{exc.get('type')}: {message}" if message else str(exc.get("type")))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def summarize_run(store: Any, run_ref: str, *, history: int = DEFAULT_HISTORY) -> RunSummary:
    """Gather the report data of ``run_ref`` (name, id or ``latest``) from ``store``."""
    run = store.get_run(run_ref)
    counts = store.status_counts(run.id)
    planned = store.planned_count(run.id)
    series = _same_series(store.list_runs(), run)[-max(1, history) :]
    rows_by_run: dict[int, list[dict[str, Any]]] = {}  # what the pages show
    records_by_run: dict[int, list[OutcomeRecord]] = {}  # what the figures are computed from
    trend = []
    for earlier in series:
        rows = store.outcome_rows(earlier.id)
        rows_by_run[earlier.id] = rows
        records_by_run[earlier.id] = records(rows)
        trend.append(
            _trend_point(earlier, records_by_run[earlier.id], store.planned_count(earlier.id))
        )
    outcomes = rows_by_run[run.id]
    finals = records_by_run[run.id]
    metrics = run_metrics(finals, planned)
    previous = series[-2] if len(series) > 1 else None
    previous_rows = rows_by_run[previous.id] if previous is not None else None
    previous_metrics = (
        run_metrics(records_by_run[previous.id], store.planned_count(previous.id))
        if previous is not None and previous_rows
        else None
    )
    batches = group_batches(finals)
    batch_of = {case: b.id for b in batches for case in b.cases}
    migrations = follow_cases([(r.name, records_by_run[r.id]) for r in series])
    chains = {m.case: m for m in migrations}
    matrix_flat = run.version_matrix or {}
    header = run_dict(run, counts, planned)
    environment = run_environment(header)
    batch_rows = _batch_rows(batches, outcomes, previous_rows, first_seen(store, run))
    return RunSummary(
        run=header,
        version_matrix=[
            (str(k), "-" if v is None else str(v)) for k, v in matrix_flat.items() if k != "errors"
        ],
        version_errors={str(k): str(v) for k, v in (matrix_flat.get("errors") or {}).items()},
        metrics=metrics.as_dict(),
        metric_rows=table_rows(metrics),
        previous=previous.name if previous is not None else None,
        previous_metric_rows=table_rows(previous_metrics) if previous_metrics else [],
        trend=trend,
        matrix=layer_category_matrix(finals),
        batches=batch_rows,
        migrations=[_migration_row(m) for m in migrations if _moved(m)],
        cases=[_case_row(o, batch_of.get(o["case"]), chains.get(o["case"])) for o in outcomes],
        outcomes={o["case"]: o for o in outcomes},
        failing_now=failing_now(batch_rows, outcomes, previous_rows or [], header, environment),
        environment=environment,
        workdir=run_directory(header),
    )


def _same_series(runs: list[Any], run: Any) -> list[Any]:
    """The runs of ``run``'s profile and tier started no later than it, oldest first."""
    key = (run.started_at, run.id)
    return [
        r
        for r in runs
        if r.profile == run.profile and r.tier == run.tier and (r.started_at, r.id) <= key
    ]


def _trend_point(run: Any, rows: list[OutcomeRecord], planned: int) -> dict[str, Any]:
    m: RunMetrics = run_metrics(rows, planned)
    statuses = Counter(o.status.value for o in rows)
    ran = m.executed - statuses["skipped"]
    return {
        "run": run.name,
        "started_at": run.started_at.isoformat(timespec="seconds") + "Z",
        "status": run.status,
        "executed": m.executed,
        "passed": statuses["passed"],
        "pass_rate": round(statuses["passed"] / ran, 4) if ran else None,
        "compile_success_rate": m.compile_success_rate,
        "semantic_pass_rate": m.semantic_pass_rate,
        "fallback_ratio": m.fallback_ratio,
        "failures": sum(n for s, n in statuses.items() if s in FAILING),
        "crashes": m.crashes,
        "timeouts": m.timeouts,
        "graph_breaks": m.graph_breaks,
        "fallbacks": m.fallbacks,
        "compile_time_s": m.compile_time_s,
    }


def _layer_order(layer: str) -> tuple[int, str]:
    try:
        return Layer(layer).depth, layer
    except ValueError:
        return 99, layer


def layer_category_matrix(outcomes: Iterable[OutcomeRecord | dict[str, Any]]) -> dict[str, Any]:
    """Failing final outcomes counted by layer (pipeline order) and category."""
    cells: Counter[tuple[str, str]] = Counter()
    for o in records(outcomes):
        if o.failing:
            cells[(o.layer or UNTRIAGED, o.category or UNCLASSIFIED)] += 1
    layers = sorted({layer for layer, _ in cells}, key=_layer_order)
    categories = sorted({category for _, category in cells})
    return {
        "layers": layers,
        "categories": categories,
        "cells": {layer: {c: cells[(layer, c)] for c in categories} for layer in layers},
        "layer_totals": {
            layer: sum(n for (lay, _), n in cells.items() if lay == layer) for layer in layers
        },
        "total": sum(cells.values()),
    }


def _batch_rows(
    batches: list[Batch],
    outcomes: list[dict[str, Any]],
    previous_rows: list[dict[str, Any]] | None,
    since: dict[str, str],
) -> list[dict[str, Any]]:
    """The run's batches, then the previous run's batches that no longer fail as they did.

    A batch of the previous run is judged by :func:`instep.triage.batches.follow` (its
    members' state now, passed / failed); a batch new to this
    run is ``new in this run`` or, when an older run had it, ``open since RUN``.
    """
    by_case = {o["case"]: o for o in outcomes}
    progress = {}
    previous_batches: list[Batch] = []
    if previous_rows is not None:
        previous_batches = group_batches(previous_rows)
        progress = {p.batch.id: p for p in follow(previous_batches, outcomes)}
    rows = []
    for b in batches:
        p = progress.get(b.id)
        row = _batch_row(b, by_case, in_run=True)
        if p is not None:
            row.update(
                passed=len(p.passed),
                failed=len(p.same) + len(p.moved),
                judgement=p.judgement,
                moved=dict(p.moved),
                previous_cases=len(p.batch.cases),
                new_members=len(b.cases) - len(p.same),
            )
        else:
            row.update(
                passed=0,
                failed=len(b.cases),
                judgement=OPEN_SINCE.format(run=since[b.id]) if b.id in since else NEW_IN_RUN,
                previous_cases=None,
                new_members=len(b.cases),
            )
        row["since"] = since.get(b.id)
        rows.append(row)
    current = {b.id for b in batches}
    previous_by_case = {o["case"]: o for o in previous_rows or []}
    for b in previous_batches:
        if b.id in current:
            continue
        p = progress[b.id]
        row = _batch_row(b, previous_by_case, in_run=False)
        row.update(
            passed=len(p.passed),
            failed=len(p.same) + len(p.moved),
            judgement=p.judgement,
            moved=dict(p.moved),
            since=since.get(b.id),
            previous_cases=len(b.cases),
            new_members=0,
        )
        rows.append(row)
    return rows


def _batch_row(b: Batch, by_case: dict[str, dict[str, Any]], *, in_run: bool) -> dict[str, Any]:
    representative = by_case.get(b.representative or "")
    return {
        "batch": b.id,
        "layer": b.layer,
        "category": b.category,
        "signature": b.signature,
        "cases": list(b.cases),
        "size": len(b.cases),
        "statuses": dict(b.statuses),
        "representative": b.representative,
        "representative_page": case_page_name(b.representative)
        if in_run and b.representative
        else None,
        "traceback": traceback_text(representative) if representative else "",
        "in_run": in_run,
        "moved": {},
    }


#: States of a batch in "Failing now", in the order the rows are shown.
NEW, STILL_FAILING, CHANGED, FIXED = "new", "still failing", "changed", "fixed"
_STATE_ORDER = {NEW: 0, STILL_FAILING: 1, CHANGED: 2, FIXED: 3}


def failing_now(
    batch_rows: list[dict[str, Any]],
    outcomes: list[dict[str, Any]],
    previous_rows: list[dict[str, Any]],
    run: dict[str, Any],
    environment: dict[str, str],
) -> list[dict[str, Any]]:
    """One row per batch for the top of the dashboard, failing batches first.

    ``state`` compares with the previous run of the same profile and tier: ``new`` (that
    run did not have the batch), ``still failing``, and for a batch of that run gone from
    this one, ``fixed`` (every member passes) or ``changed`` (members now fail otherwise;
    ``moved`` names their batches). The representative gives the error line, the user's
    ``file:line`` and the command that reproduces it; ``culprit`` is the likely upstream
    unit when the run was triaged with ``--impact``.
    """
    by_case = {o["case"]: o for o in outcomes}
    before = {o["case"]: o for o in previous_rows}
    rows = []
    for b in batch_rows:
        if b["in_run"]:
            state = STILL_FAILING if b["previous_cases"] is not None else NEW
        else:
            state = FIXED if not b["failed"] else CHANGED
        case = b["representative"] or ""
        o = (by_case if b["in_run"] else before).get(case) or {}
        rows.append(
            {
                "batch": b["batch"],
                "state": state,
                "failing": b["in_run"],
                "layer": b["layer"] or UNTRIAGED,
                "category": b["category"] or UNCLASSIFIED,
                "size": b["size"],
                "judgement": b["judgement"],
                "case": case,
                "page": b["representative_page"],
                "error": headline(o),
                "where": user_frame(o, (run.get("settings") or {}).get("cwd")),
                "command": reproduce_command(case, run, environment, in_dir=False) if case else "",
                "bundle": bundle_command(b["batch"], run),
                "moved": sorted(set(b["moved"].values())),
                "culprit": batch_culprit(b["cases"], by_case) if b["in_run"] else None,
            }
        )
    rows.sort(key=lambda r: (_STATE_ORDER[r["state"]], _layer_order(r["layer"])))
    return rows


def _moved(m: CaseMigration) -> bool:
    """Whether the case's outcome changed in a way worth a chain: not always the same."""
    pairs = zip(m.steps, m.steps[1:], strict=False)
    return any(step_label(a, b) not in (None, "still_failing") for a, b in pairs)


def _migration_row(m: CaseMigration) -> dict[str, Any]:
    data = m.as_dict()
    data["page"] = None
    last = m.steps[-1]
    if last.status is not None and last.status != "passed":
        data["page"] = case_page_name(m.case)
    return data


def _case_row(o: dict[str, Any], batch: str | None, chain: CaseMigration | None) -> dict[str, Any]:
    evidence = o.get("evidence") or {}
    return {
        "case": o["case"],
        "status": o["status"],
        "duration": o.get("duration"),
        "attempt": o.get("attempt"),
        "flaky": bool(o.get("flaky")),
        "failing": o["status"] in FAILING,
        "layer": o.get("layer"),
        "stack_layer": evidence.get("stack_layer"),
        "category": o.get("category"),
        "signature": o.get("signature"),
        "stage": o.get("stage"),
        "batch": batch,
        "message": headline(o),
        "page": None if o["status"] == "passed" else case_page_name(o["case"]),
        "chain": chain.as_dict()["chain"] if chain is not None and len(chain.steps) > 1 else [],
    }
