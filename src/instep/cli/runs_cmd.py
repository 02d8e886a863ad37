"""``instep runs``: the runs in a store with their status and outcome counts."""

from __future__ import annotations

import json
import sys

import click
from rich.console import Console
from rich.table import Table

from instep.cli.context import AppContext, db_option, format_option, open_store
from instep.outcome import FAILING


@click.command("runs")
@format_option
@db_option
@click.pass_obj
def runs_command(app: AppContext, fmt: str, db: str | None) -> None:
    """List the runs of the store, oldest first."""
    # fast CLI start: the library loads when the command runs
    from instep.store import run_dict

    with open_store(app, db, must_exist=True) as store:
        rows = [
            run_dict(run, store.status_counts(run.id), store.planned_count(run.id))
            for run in store.list_runs()
        ]
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    table = Table("run", "status", "profile", "shard", "started", "cases", "passed", "failing")
    for row in rows:
        counts = row["counts"]
        failing = sum(counts.get(s, 0) for s in FAILING)
        table.add_row(
            row["name"],
            row["status"],
            row["profile"],
            row["shard"] or "-",
            row["started_at"] or "-",
            str(row["planned"]),
            str(counts.get("passed", 0)),
            str(failing),
        )
    _console().print(table)


def _console() -> Console:
    # Piped output is not wrapped at 80 columns: node ids are long and scripts grep them.
    return Console() if sys.stdout.isatty() else Console(width=220)


def register(cli: click.Group) -> None:
    cli.add_command(runs_command)
