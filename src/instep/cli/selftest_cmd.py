"""``instep selftest``: fault injection at each layer; exit 1 unless every fault lands in it."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from instep.cli.context import AppContext, format_option


@click.command("selftest")
@click.option("--profile", "profile_name", default="cpu", show_default=True, metavar="NAME")
@click.option("--workers", "-n", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--only", "only", multiple=True, metavar="CASE", help="Run only this case.")
@format_option
@click.pass_obj
def selftest_command(
    app: AppContext, profile_name: str, workers: int, only: tuple[str, ...], fmt: str
) -> int:
    """Compile on CPU with a fault injected at each layer; check the classifier's layer."""
    # fast CLI start: the library loads when the command runs
    from instep.errors import BadInput
    from instep.triage.selftest import run_selftest
    from instep.triage.selftest.matrix import EXPECTED

    unknown = [n for n in only if n not in EXPECTED]
    if unknown:
        raise BadInput(f"--only {unknown[0]}: not a self-test case (known: {', '.join(EXPECTED)})")
    profile = app.profile(profile_name)
    result = run_selftest(
        profile,
        workers=workers,
        inductor_cache_dir=app.config.cache_path() / "inductor",
        only=list(only) or None,
    )
    if fmt == "json":
        data = {
            "accuracy": result.accuracy,
            "wall_s": round(result.wall_s, 1),
            "rows": [r.as_dict() for r in result.rows],
        }
        click.echo(json.dumps(data, indent=2))
    else:
        table = Table(title=f"instep selftest ({profile.name}): accuracy {result.accuracy:.0%}")
        for col in ("case", "fault injected", "expected", "filed under", "category", ""):
            table.add_column(col)
        for r in result.rows:
            table.add_row(
                r.case,
                r.fault,
                r.expected,
                r.layer or "-",
                r.category or "-",
                "ok" if r.ok else "WRONG",
            )
        Console(highlight=False).print(table)
        click.echo(f"{len(result.rows)} faults in {result.wall_s:.0f} s")
    return 0 if result.accuracy == 1.0 else 1


def register(cli: click.Group) -> None:
    cli.add_command(selftest_command)
