"""``instep triage RUN``: a run's failures as batches (seed 000 section 7), stored.

With ``--impact FILE`` (or ``--upstream-old X``, the report computed against the torch the
run used) each failure is also traced to the upstream units most likely behind it.

Re-classifies outcomes that have no signature yet (or all with ``--reclassify``, e.g.
after a profile change), groups failures into batches with stable ids, stores each
member's batch id, and prints the table: batch, layer, topic, cases, representative and
since when the batch exists; with ``--base``, first how the base run's batches fared in
RUN (seed 000 section 7: passed / failed, judgement).
"""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from instep.cli.context import AppContext, db_option, format_option, open_store
from instep.cli.run_impact import impact_document, run_impact_request
from instep.errors import BadInput


@click.command("triage")
@click.argument("run_ref", metavar="RUN", default="latest")
@click.option("--base", "base_ref", metavar="RUN", help="Follow this earlier run's batches.")
@click.option("--reclassify", is_flag=True, help="Classify every failure again (profile changed).")
@click.option(
    "--impact",
    "impact_path",
    metavar="FILE",
    help="An instep impact JSON report: name the upstream change behind each failure.",
)
@click.option(
    "--upstream-old",
    metavar="X",
    help="Compute the impact between upstream X (as instep impact takes it) and the torch"
    " RUN used, then name culprits as with --impact.",
)
@click.option(
    "--downstream",
    metavar="X",
    help="With --upstream-old: the downstream RUN tested (default: [impact] downstream,"
    " else the profile's backend package at the version RUN recorded).",
)
@format_option
@db_option
@click.pass_obj
def triage_command(
    app: AppContext,
    run_ref: str,
    base_ref: str | None,
    reclassify: bool,
    impact_path: str | None,
    upstream_old: str | None,
    downstream: str | None,
    fmt: str,
    db: str | None,
) -> None:
    """Group the failures of RUN into batches by (layer, category, signature)."""
    # fast CLI start: the library loads when the command runs
    from instep.triage.batches import (
        batch_hints,
        first_seen,
        follow,
        group_batches,
        store_batches,
    )
    from instep.triage.culprits import (
        CulpritIndex,
        attribute_all,
        batch_culprit,
        culprit_evidence,
    )
    from instep.triage.reclassify import reclassify_run

    if impact_path and upstream_old:
        raise BadInput("--impact and --upstream-old: give one (a report, or X to compute it)")
    if downstream and not upstream_old:
        raise BadInput("--downstream: only with --upstream-old X")
    cache = app.config.cache_path() / "culprits"  # the indexed report, by its digest
    report = CulpritIndex.load(impact_path, cache) if impact_path else None  # before work
    by_case = {}
    with open_store(app, db, must_exist=True) as store:
        run = store.get_run(run_ref)
        if upstream_old:
            request = run_impact_request(app, run, upstream_old, downstream)
            impact_path = f"{request.upstream_old} -> {request.upstream_new}"
            report = CulpritIndex(impact_document(request), impact_path)
        reclassify_run(store, run, app.profile(run.profile), every=reclassify)
        outcomes = store.outcome_records(run.id)
        batches = group_batches(outcomes)
        if report is not None:
            by_case = attribute_all(report, [o.as_dict() for o in outcomes if o.failing])
        # one pass over the stored outcomes for both: attribution adds no second one
        also = {"culprits": culprit_evidence(by_case)} if report is not None else None
        store_batches(store, run.id, batches, also)
        history = first_seen(store, run)
        progress = None
        if base_ref is not None:
            base = store.get_run(base_ref)
            reclassify_run(store, base, app.profile(base.profile), every=reclassify)
            base_batches = group_batches(store.outcome_records(base.id))
            progress = follow(base_batches, outcomes)
    culprits = {b.id: batch_culprit(b.cases, by_case) for b in batches} if report else {}
    if fmt == "json":
        data = {
            "run": run.name,
            "batches": [
                {
                    **b.as_dict(),
                    "first_seen": history.get(b.id),
                    **({"culprit": _as_dict(culprits.get(b.id))} if report else {}),
                }
                for b in batches
            ],
            **({"impact": impact_path, "culprits": _by_case(by_case)} if report else {}),
            "base": base_ref,
            "progress": [p.as_dict() for p in progress] if progress is not None else None,
        }
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    console = Console(highlight=False, soft_wrap=True)
    if progress is not None:
        table = Table(title=f"batches of {base_ref} followed in {run.name}")
        for col in ("batch", "topic", "cases", "passed / failed", "judgement"):
            table.add_column(col)
        for p in progress:
            table.add_row(
                p.batch.id,
                _topic(p.batch.layer, p.batch.category, p.batch.signature),
                str(len(p.batch.cases)),
                f"{len(p.passed)} passed / {len(p.same) + len(p.moved)} failed",
                p.judgement,
            )
        console.print(table)
    table = Table(title=f"batches of {run.name}: {sum(len(b.cases) for b in batches)} failures")
    for col in ("batch", "layer", "topic", "cases", "representative", "judgement"):
        table.add_column(col)
    for b in batches:
        since = history.get(b.id)
        table.add_row(
            b.id,
            b.layer or "?",
            _topic(None, b.category, b.signature),
            str(len(b.cases)),
            escape(b.representative or ""),
            escape(f"open since {since}") if since else "new in this run",
        )
    console.print(table)
    for batch_id, hint in batch_hints(batches, outcomes):
        console.print(f"[bold]{batch_id}[/bold]: {escape(hint)}")
    if report is not None:
        _print_culprits(console, batches, culprits, impact_path or "")


def _print_culprits(console: Console, batches: list, culprits: dict, source: str) -> None:
    """One line per batch: the upstream unit most likely behind it, or that none is."""
    console.print(f"[bold]likely upstream causes[/bold] (from {escape(source)}):")
    for b in batches:
        found = culprits.get(b.id)
        line = found.one_line() if found else "no change in the report explains it"
        console.print(f"  [bold]{b.id}[/bold]: {escape(line)}")


def _as_dict(found: object) -> dict | None:
    return found.as_dict() if found is not None else None  # type: ignore[attr-defined]


def _by_case(by_case: dict) -> dict:
    return {case: [a.as_dict() for a in ranked] for case, ranked in by_case.items()}


def _topic(layer: str | None, category: str | None, signature: str | None) -> str:
    head = f"{layer}: " if layer else ""
    sig = (signature or "")[:80]
    return escape(f"{head}{category or '?'} — {sig}")


def register(cli: click.Group) -> None:
    cli.add_command(triage_command)
