"""``instep merge DB...``: copy the runs of other stores (hosts, shards) into the store."""

from __future__ import annotations

import click

from instep.cli.context import AppContext, db_option, open_store


@click.command("merge")
@click.argument("sources", nargs=-1, required=True, metavar="DB...")
@db_option
@click.pass_obj
def merge_command(app: AppContext, sources: tuple[str, ...], db: str | None) -> None:
    """Copy every run of the stores DB... into --db (or the config's store)."""
    # fast CLI start: the library loads when the command runs
    from instep.store.merge import merge_into

    with open_store(app, db) as store:
        report = merge_into(store, list(sources))
    click.echo(
        f"merged {len(report.copied)} runs ({report.outcomes} outcomes)"
        + (f", {len(report.skipped)} already present" if report.skipped else "")
    )
    for name in report.copied:
        click.echo(f"  {name}")


def register(cli: click.Group) -> None:
    cli.add_command(merge_command)
