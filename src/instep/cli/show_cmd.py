"""``instep show RUN``: a run's outcomes as a table or as JSON (for scripts and triage).

``--metrics`` shows the run's seed 10.3 metrics instead (``instep.suites.metrics``);
``--by-unit`` its outcomes grouped by impact unit (``instep.triage.by_unit``).
"""

from __future__ import annotations

import json
import sys

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from instep.cli.context import AppContext, db_option, format_option, open_store


@click.command("show")
@click.argument("run_ref", metavar="RUN", default="latest")
@format_option
@click.option(
    "--status",
    "statuses",
    multiple=True,
    metavar="STATUS",
    help="Only outcomes with this status (repeatable).",
)
@click.option("--all-attempts", is_flag=True, help="Every attempt, not only the final one.")
@click.option(
    "--metrics",
    "show_metrics",
    is_flag=True,
    help="The run's metrics (compile success, semantic pass rate, fallbacks...) instead.",
)
@click.option(
    "--by-unit",
    is_flag=True,
    help="Outcomes per impact unit: the unit that selected the test (run --impact) and the"
    " likely culprit (triage --impact), with passed/failed counts.",
)
@db_option
@click.pass_obj
def show_command(
    app: AppContext,
    run_ref: str,
    fmt: str,
    statuses: tuple[str, ...],
    all_attempts: bool,
    show_metrics: bool,
    by_unit: bool,
    db: str | None,
) -> None:
    """Show the outcomes of RUN (a name, an id, or 'latest')."""
    # fast CLI start: the library loads when the command runs
    from instep.store import run_dict

    with open_store(app, db, must_exist=True) as store:
        run = store.get_run(run_ref)
        outcomes = store.outcome_rows(run.id, final_only=not all_attempts)
        counts = store.status_counts(run.id)
        planned = store.planned_count(run.id)
    if statuses:
        outcomes = [o for o in outcomes if o["status"] in statuses]
    if show_metrics:
        _show_metrics(run, outcomes, counts, planned, fmt)
        return
    if by_unit:
        _show_by_unit(run, outcomes, counts, planned, fmt)
        return
    if fmt == "json":
        data = {"run": run_dict(run, counts, planned), "outcomes": outcomes}
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    console = _console()
    console.print(
        f"run [bold]{run.name}[/bold] ({run.status}, profile {run.profile}) "
        + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())),
        highlight=False,
    )
    # fast CLI start: the library loads when the command runs
    from instep.run.progress import case_width, node_tail

    width = case_width(console.width, share=0.35)
    table = Table()
    table.add_column(
        "case",
        no_wrap=True,
        min_width=min(width, max(len(o["case"]) for o in outcomes)) if outcomes else 4,
    )
    for column in ("status", "duration", "layer", "category", "stage", "message"):
        table.add_column(column)
    for o in outcomes:
        message = (o["message"] or o["skip_reason"] or "").strip().splitlines()
        status = o["status"] + (f" #{o['attempt']}" if all_attempts else "")
        status += " (flaky)" if o["flaky"] else ""
        table.add_row(
            node_tail(o["case"], width),
            status,
            f"{o['duration']:.2f}s" if o["duration"] is not None else "-",
            o["layer"] or "-",
            o["category"] or "-",
            o["stage"] or "-",
            message[0][:120] if message else "",
        )
    console.print(table)


def _show_metrics(run, outcomes, counts, planned, fmt: str) -> None:  # type: ignore[no-untyped-def]
    # fast CLI start: the library loads when the command runs
    from instep.store import run_dict
    from instep.suites.metrics import run_metrics, table_rows

    metrics = run_metrics(outcomes, planned)
    if fmt == "json":
        data = {"run": run_dict(run, counts, planned), "metrics": metrics.as_dict()}
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    console = _console()
    console.print(
        f"run [bold]{run.name}[/bold] ({run.status}, profile {run.profile}, "
        f"tier {run.tier or '-'}): metrics",
        highlight=False,
    )
    table = Table("metric", "value")
    for label, value in table_rows(metrics):
        table.add_row(label, value)
    console.print(table)


def _show_by_unit(run, outcomes, counts, planned, fmt: str) -> None:  # type: ignore[no-untyped-def]
    # fast CLI start: the library loads when the command runs
    from instep.store import run_dict
    from instep.triage.by_unit import by_unit

    selected, culprits = by_unit(outcomes, run.settings)
    if fmt == "json":
        data = {
            "run": run_dict(run, counts, planned),
            "selected_by": [g.as_dict() for g in selected],
            "culprit": [g.as_dict() for g in culprits],
        }
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    console = _console()
    for title, groups, empty in (
        (
            "the unit that selected them",
            selected,
            "no case was selected by an impact unit (run --impact)",
        ),
        ("likely culprit", culprits, "no failure has a culprit (triage --impact)"),
    ):
        console.print(f"run [bold]{run.name}[/bold]: outcomes by {title}", highlight=False)
        if not groups:
            console.print(f"  {empty}", highlight=False)
            continue
        table = Table("unit", "passed", "failed", "other", "cases")
        for g in groups:
            name = g.unit if not g.title or g.title == g.unit else f"{g.unit}: {g.title}"
            table.add_row(
                escape(name), str(g.passed), str(g.failed), str(g.other), str(len(g.cases))
            )
        console.print(table)


def _console() -> Console:
    # Piped output is not wrapped at 80 columns: node ids are long and scripts grep them.
    return Console() if sys.stdout.isatty() else Console(width=220)


def register(cli: click.Group) -> None:
    cli.add_command(show_command)
