"""``instep bundle CASE|BATCH --run RUN --out DIR``: the evidence bundle of seed 000
Appendix B for one failing case or one batch, as a directory and a ``.tar.gz``.

Reads the case (or the batch and its representative) from the store, the run's profile,
and the expected-failure lists of the run's tier; calls :func:`instep.bundle.build_bundle`.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from instep.cli.context import AppContext, db_option, open_store


@click.command("bundle")
@click.argument("target", metavar="CASE|BATCH")
@click.option("--run", "run_ref", metavar="RUN", required=True, help="The run (name, id, latest).")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="Directory to write the bundle (a folder and a .tar.gz) into.",
)
@click.option("--no-rerun", is_flag=True, help="Do not re-run the case with debugging on.")
@click.option(
    "--lang",
    type=click.Choice(["en", "zh"]),
    default=None,
    help="Language of the issue text (default: config, en).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds for the debug re-run [twice the run's per-case timeout, at least 120].",
)
@db_option
@click.pass_obj
def bundle_command(
    app: AppContext,
    target: str,
    run_ref: str,
    out_dir: Path,
    no_rerun: bool,
    lang: str | None,
    timeout: float | None,
    db: str | None,
) -> None:
    """Write the evidence bundle of CASE (a node id) or BATCH (an id from 'instep triage')."""
    # fast CLI start: the library loads when the command runs
    from instep.bundle import build_bundle, select
    from instep.suites.tiers import expected_lists

    with open_store(app, db, must_exist=True) as store:
        selection = select(store, run_ref, target)
    profile = app.profile(selection.run["profile"])
    result = build_bundle(
        selection,
        profile,
        out_dir,
        rerun=not no_rerun,
        lang=lang or getattr(app.config, "lang", None) or "en",
        timeout=timeout,
        expected_lists=expected_lists(
            app.config, selection.run.get("tier"), selection.run["profile"]
        ),
    )
    console = Console(stderr=True, highlight=False)
    console.print(f"instep: bundle {result.title}", markup=False)
    rerun = f", debug re-run {result.rerun_status}" if result.rerun_status else ""
    console.print(f"instep: {len(result.files)} files{rerun}, {result.seconds:.1f} s", markup=False)
    click.echo(str(result.directory))
    click.echo(str(result.archive))


def register(cli: click.Group) -> None:
    cli.add_command(bundle_command)
