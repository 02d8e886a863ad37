"""``instep tier``: list and show tiers, write the L2 tier from a run, check a run against
expected-failure lists, and import/export/propose disabled-test lists.

Calls :mod:`instep.suites.tiers` and :mod:`instep.suites.expected_failures`; running a
tier is ``instep run --tier NAME``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from instep.cli.context import AppContext, db_option, format_option, open_store
from instep.errors import BadInput

FORMATS = ("instep", "pytorch", "npu")


@click.group("tier")
def tier_group() -> None:
    """Tiers L0..L6 and expected-failure lists (run one with 'instep run --tier NAME')."""


@tier_group.command("list")
@click.pass_obj
def tier_list(app: AppContext) -> None:
    """Every tier: built-in, tier files and the config's."""
    # fast CLI start: the library loads when the command runs
    from instep.suites.tiers import available_tiers

    table = Table("tier", "source", "paths", "description")
    for tier in available_tiers(app.config).values():
        table.add_row(
            tier.name, escape(tier.source), str(len(tier.paths)), escape(tier.description)
        )
    _console().print(table)


@tier_group.command("show")
@click.argument("name")
@click.option("--profile", "profile_name", metavar="NAME", help="Profile for the suite options.")
@click.pass_obj
def tier_show(app: AppContext, name: str, profile_name: str | None) -> None:
    """A tier's paths, -k, timeout, isolation and the pytest options it passes."""
    # fast CLI start: the library loads when the command runs
    from instep.suites.tiers import available_tiers

    tiers = available_tiers(app.config)
    if name not in tiers:
        raise BadInput(f"tier {name}: unknown (tiers: {', '.join(tiers)})")
    tier = tiers[name]
    data = {
        "name": tier.name,
        "source": tier.source,
        "description": tier.description,
        "paths": list(tier.paths),
        "k": tier.k,
        "timeout": tier.timeout,
        "isolate": tier.isolate,
        "expected_failures": list(tier.expected_failures),
        "pytest_args": tier.pytest_args(app.profile(profile_name)),
    }
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


@tier_group.command("L2")
@click.option("--from-run", "run_ref", metavar="RUN", required=True, help="The run's batches.")
@click.option(
    "--batch",
    "batches",
    multiple=True,
    metavar="ID|SIG",
    help="Only this batch: its id from 'instep triage', or its signature (repeatable).",
)
@click.option(
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Tier file to write [.instep/tiers/L2.toml next to the config].",
)
@db_option
@click.pass_obj
def tier_l2(
    app: AppContext,
    run_ref: str,
    batches: tuple[str, ...],
    output: Path | None,
    db: str | None,
) -> None:
    """Write tier L2 (batch regression): the failing cases of RUN, batch by batch."""
    # fast CLI start: the library loads when the command runs
    from instep.suites.tiers import batch_regression, tier_file, write_tier_file

    with open_store(app, db, must_exist=True) as store:
        run = store.get_run(run_ref)
        outcomes = store.outcome_records(run.id)
    root = run.settings.get("cwd") or str(Path.cwd())
    chosen, paths = batch_regression(outcomes, batches, root)
    if not chosen:
        raise BadInput(f"run {run.name}: no failing cases{' in those batches' if batches else ''}")
    target = output or tier_file(app.config, "L2")
    desc = f"batch regression from run {run.name}: {len(chosen)} batches, {len(paths)} cases"
    write_tier_file(target, "L2", paths, desc)
    click.echo(f"wrote {target}: {desc}")


@tier_group.command("check")
@click.argument("run_ref", metavar="RUN", default="latest")
@click.option(
    "--expected",
    "lists",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Expected-failure list (TOML, or PyTorch/torch_npu JSON); repeatable.",
)
@format_option
@db_option
@click.pass_obj
def tier_check(
    app: AppContext, run_ref: str, lists: tuple[Path, ...], fmt: str, db: str | None
) -> int:
    """RUN against expected-failure lists: exit 1 only for failures not listed.

    Without --expected: the run's tier's lists and instep's list for the run's profile.
    """
    # fast CLI start: the library loads when the command runs
    from instep.suites.expected_failures import load_lists, reconcile
    from instep.suites.tiers import expected_lists

    with open_store(app, db, must_exist=True) as store:
        run = store.get_run(run_ref)
        outcomes = store.outcome_records(run.id)
    paths = list(lists) or expected_lists(app.config, run.tier, run.profile)
    result = reconcile(outcomes, load_lists(paths))
    if fmt == "json":
        click.echo(json.dumps(result.as_dict(), indent=2, ensure_ascii=False))
        return 0 if result.ok else 1
    console = _console()
    lines = [f"FIXED - remove it: {case} ({entry.source})" for case, entry in result.fixed]
    lines += [
        f"UNEXPECTED SUCCESS - remove its expected-failure mark: {i['case']} ({i['mark']})"
        for i in result.stale_marks
    ]
    lines += [
        f"FAILS DIFFERENTLY: {i['case']} listed as {i['listed']}, now {i['now']}: {i['message']}"
        for i in result.changed
    ]
    lines += [
        f"UNEXPECTED {i['status']}: {i['case']} {i['message'][0] if i['message'] else ''}"
        for i in result.unexpected
    ]
    for line in lines:
        console.print(line, markup=False, highlight=False)
    console.print(
        f"run {run.name}: {len(result.expected)} expected failures, {len(result.fixed)} fixed,"
        f" {len(result.stale_marks)} unexpected successes, {len(result.changed)} failing"
        f" differently, {len(result.unexpected)} unexpected, {len(result.not_run)} listed but"
        f" not run ({len(paths)} lists)",
        highlight=False,
    )
    return 0 if result.ok else 1


@tier_group.command("convert")
@click.argument("source", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--to", "to_format", type=click.Choice(FORMATS), required=True)
@click.option("--output", "-o", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--platform", "platforms", multiple=True, help="PyTorch platforms (repeatable).")
def tier_convert(
    source: Path, to_format: str, output: Path | None, platforms: tuple[str, ...]
) -> None:
    """Convert an expected-failure list between instep TOML, PyTorch's disabled-tests JSON
    and torch_npu's typed disabled_tests_type.json (the source format is detected)."""
    # fast CLI start: the library loads when the command runs
    from instep.suites import expected_failures as xf

    entries = xf.load_list(source)
    if to_format == "instep":
        text = xf.dump_toml(entries, f"converted by instep from {source.name}")
    elif to_format == "pytorch":
        text = json.dumps(xf.export_pytorch_disabled(entries, list(platforms)), indent=2) + "\n"
    else:
        text = json.dumps(xf.export_npu_typed(entries), indent=2, ensure_ascii=False) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}: {len(entries)} entries ({to_format})")


@tier_group.command("propose")
@click.argument("run_ref", metavar="RUN")
@click.option(
    "--list",
    "lists",
    multiple=True,
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Disabled/expected list whose entries to explain (repeatable).",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "npu"]), default="table")
@db_option
@click.pass_obj
def tier_propose(
    app: AppContext, run_ref: str, lists: tuple[Path, ...], fmt: str, db: str | None
) -> None:
    """For each listed entry RUN executed: a proposed layer, category and reason."""
    # fast CLI start: the library loads when the command runs
    from instep.suites.expected_failures import load_lists, propose, unittest_name

    with open_store(app, db, must_exist=True) as store:
        run = store.get_run(run_ref)
        outcomes = store.outcome_records(run.id)
    proposals = propose(outcomes, load_lists(lists))
    if fmt == "json":
        click.echo(json.dumps([p.as_dict() for p in proposals], indent=2, ensure_ascii=False))
        return
    if fmt == "npu":
        data = {unittest_name(p.case): {p.npu_type: p.reason} for p in proposals}
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    table = Table("case", "status", "layer", "category", "type", "reason")
    for p in proposals:
        table.add_row(
            escape(p.case),
            p.status,
            p.layer or "-",
            p.category or "-",
            p.npu_type,
            escape(p.reason),
        )
    console = _console()
    console.print(table)
    console.print(f"{len(proposals)} of the listed entries ran in {run.name}", highlight=False)


def _console() -> Console:
    return Console() if sys.stdout.isatty() else Console(width=220)


def register(cli: click.Group) -> None:
    cli.add_command(tier_group)
