"""``instep compare BASE NEW``: new failures, fixed, migrated (deeper/shallower), still failing.

Calls ``instep.triage.migration.compare`` on the final outcomes of two stored runs and
prints one section per label, each case with its (layer, signature) before and after.
Exit code 1 when NEW has new failures or shallower (regressed) errors, else 0.
"""

from __future__ import annotations

import json

import click
from rich.console import Console

from instep.cli.context import AppContext, db_option, format_option, open_store

_TITLES = {
    "new": "new failures",
    "fixed": "fixed",
    "deeper": "migrated deeper (progress)",
    "shallower": "migrated shallower (regression)",
    "changed": "same layer, new signature",
    "still_failing": "still failing",
    "flaky": "flaky",
}


@click.command("compare")
@click.argument("base_ref", metavar="BASE")
@click.argument("new_ref", metavar="NEW", default="latest")
@format_option
@db_option
@click.pass_obj
def compare_command(app: AppContext, base_ref: str, new_ref: str, fmt: str, db: str | None) -> int:
    """Compare run NEW with run BASE case by case, following each error's migration."""
    # fast CLI start: the library loads when the command runs
    from instep.triage.migration import compare
    from instep.triage.reclassify import reclassify_run

    with open_store(app, db, must_exist=True) as store:
        runs = []
        for ref in (base_ref, new_ref):
            run = store.get_run(ref)
            reclassify_run(store, run, app.profile(run.profile))
            runs.append((run.name, store.outcome_records(run.id)))
    groups = compare(runs[0], runs[1])
    if fmt == "json":
        data = {
            "base": runs[0][0],
            "new": runs[1][0],
            "counts": {k: len(v) for k, v in groups.items()},
            "cases": {k: [m.as_dict() for m in v] for k, v in groups.items()},
        }
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        console = Console(highlight=False, soft_wrap=True)
        summary = ", ".join(f"{len(v)} {_TITLES[k]}" for k, v in groups.items() if v)
        console.print(f"{runs[0][0]} -> {runs[1][0]}: {summary or 'no failures in either run'}")
        for label, cases in groups.items():
            if not cases:
                continue
            console.print(f"\n[bold]{_TITLES[label]}[/bold] ({len(cases)})")
            for m in cases:
                before, after = m.steps[-2], m.steps[-1]
                console.print(f"  {m.case}\n    {_step(before)}  ->  {_step(after)}", markup=False)
    return 1 if groups["new"] or groups["shallower"] else 0


def _step(step) -> str:  # type: ignore[no-untyped-def]
    if step.status is None:
        return "absent"
    if not step.failing:
        return step.status
    return f"{step.status} [{step.layer or '?'}] {(step.signature or '')[:70]}"


def register(cli: click.Group) -> None:
    cli.add_command(compare_command)
