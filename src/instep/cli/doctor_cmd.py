"""``instep doctor env|compile``: is the environment sane; where does a compile spend or hang.

Renders :func:`instep.doctor.env_report.diagnose_environment` and
:func:`instep.doctor.compile_session.run_compile_doctor`; no diagnosis logic here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from instep.cli.context import AppContext
from instep.doctor.api_scan import Verdict
from instep.doctor.stage_timing import CompileStage, stage_totals

_STATUS_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


@click.group("doctor", no_args_is_help=True)
def doctor_group() -> None:
    """Check the environment before compiling; time and watch a compile."""


def _emit_json(data: dict[str, Any], target: str) -> None:
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    if target == "-":
        click.echo(text)
    else:
        Path(target).write_text(text + "\n", encoding="utf-8")


@doctor_group.command("env")
@click.option("--profile", "profile_name", help="Backend profile (default: the config's).")
@click.option(
    "--tests",
    "tests",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Test file or directory to scan for torch internals the installed torch lacks"
    " (repeatable).",
)
@click.option("--python", "python", help="The Python to check (default: instep's).")
@click.option(
    "--json",
    "json_out",
    metavar="FILE",
    help="Also write the report as JSON to FILE ('-': stdout, instead of the tables).",
)
@click.pass_obj
def env_command(
    app: AppContext,
    profile_name: str | None,
    tests: tuple[Path, ...],
    python: str | None,
    json_out: str | None,
) -> int:
    """Version matrix, import/registration checks and an API scan of test sources.

    Exits 1 when a check fails or a test source uses a torch internal that the installed
    torch lacks.
    """
    # fast CLI start: the library loads when the command runs
    from instep.doctor.env_report import diagnose_environment

    report = diagnose_environment(app.profile(profile_name), tests, python)
    if json_out:
        _emit_json(report.as_dict(), json_out)
        if json_out == "-":
            return 1 if report.failed else 0
    console = Console()
    matrix = Table("component", "value", "note", title=f"version matrix ({report.profile})")
    for probe in report.matrix.probes:
        note = "" if probe.value is not None else (probe.error or "")
        style = "red" if probe.failed else ("dim" if probe.value is None else "")
        matrix.add_row(escape(probe.name), escape(probe.value or "-"), escape(note), style=style)
    console.print(matrix)
    checks = Table("status", "check", "detail", title="environment checks")
    for check in report.checks:
        status = check.status.value
        checks.add_row(
            f"[{_STATUS_STYLE[status]}]{status}[/]", escape(check.name), escape(check.detail)
        )
    console.print(checks)
    if report.api_scan is not None:
        scan = report.api_scan
        counts = ", ".join(f"{len(scan.by_verdict(v))} {v.value}" for v in Verdict)
        console.print(
            f"API scan of {len(scan.files)} file(s) against torch {scan.torch_version}"
            f" ({scan.torch_root}): {counts}",
            highlight=False,
        )
        if scan.missing:
            console.print("[bold red]missing in the installed torch:[/]")
            for finding in scan.missing:  # one plain line each: editors open file:line
                click.echo(f"  {finding.ref.where}: {finding.ref.target}: {finding.reason}")
    console.print(
        "[bold red]problems found[/]" if report.failed else "[green]environment looks sane[/]"
    )
    return 1 if report.failed else 0


@doctor_group.command(
    "compile", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option("--profile", "profile_name", help="Backend profile whose env is applied.")
@click.option(
    "--threshold",
    type=float,
    default=300.0,
    show_default=True,
    help="Seconds one graph may compile before the watchdog reports it.",
)
@click.option(
    "--repeat",
    type=float,
    default=None,
    help="Seconds between repeated reports of a stuck compile (default: the threshold).",
)
@click.option("--timeout", type=float, default=None, help="Kill the command after this many s.")
@click.option("--json", "json_out", metavar="FILE", help="Write the timings as JSON to FILE.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_obj
def compile_command(
    app: AppContext,
    profile_name: str | None,
    threshold: float,
    repeat: float | None,
    timeout: float | None,
    json_out: str | None,
    command: tuple[str, ...],
) -> int:
    """Run COMMAND (after '--': python script.py ARGS) with stage timings and a watchdog.

    Prints, per compiled graph, the seconds spent in each stage (from torch's own timing
    events); while a graph compiles longer than --threshold, the watchdog prints its
    stage, PID, graph/kernel and all thread stacks on stderr. Exits with the command's
    exit code (124 when --timeout killed it).
    """
    # fast CLI start: the library loads when the command runs
    from instep.doctor.compile_session import run_compile_doctor, split_command
    from instep.doctor.env_checks import require_torch

    profile = app.profile(profile_name)
    interpreter, _ = split_command(command)
    require_torch(interpreter, "instep doctor compile")
    result = run_compile_doctor(
        command,
        threshold_s=threshold,
        repeat_s=repeat,
        timeout_s=timeout,
        env=profile.env,
    )
    if json_out:
        _emit_json(result.as_dict(), json_out)
    console = Console(stderr=True)
    warmth = "empty at start" if result.cache["inductor_cache_empty_at_start"] else "warm"
    cache = result.cache["inductor_cache_dir"]  # a path: never wrapped, so it can be copied
    console.print(f"Inductor cache: {cache} ({warmth})", highlight=False, soft_wrap=True)
    _print_stage_table(console, result.graphs)
    for entry in result.snapshot.get("autotune", []):
        failed = entry.get("failed") or ([entry["config"]] if "config" in entry else [])
        what = entry.get("op") or entry.get("kernel")
        console.print(
            f"autotune {entry.get('kind')}: {what}: {len(entry.get('candidates', []))}"
            f" candidate(s){'; failed: ' + ', '.join(map(str, failed)) if failed else ''}",
            highlight=False,
        )
    for report in result.snapshot.get("reports", []):
        if report.get("kind") == "dead_worker":
            console.print(f"[red]{report['message']}[/]", highlight=False)
    if result.timed_out:
        where = result.stage_at_end or "outside any compile"
        console.print(f"[red]timed out after {timeout}s, in stage {where}[/]", highlight=False)
    return result.exit_code


def _print_stage_table(console: Console, graphs: list[dict[str, Any]]) -> None:
    """One row per stage, one column per graph (and the total when there are several)."""
    if not graphs:
        console.print("no graph was compiled", highlight=False)
        return
    for graph in graphs:
        console.print(f"graph {graph['compile_id']}: {graph.get('name') or '?'}", highlight=False)
    stages = [s.value for s in CompileStage]
    used = [s for s in stages if any(s in g.get("stages", {}) for g in graphs)]
    ids = [g["compile_id"] for g in graphs]
    several = len(graphs) > 1
    table = Table("stage (s)", *ids, *(["all"] if several else []), title="compile stages")
    totals = stage_totals(graphs)
    for stage in used:
        cells = [f"{g['stages'].get(stage, 0.0):.3f}" for g in graphs]
        table.add_row(stage, *cells, *([f"{totals[stage]:.3f}"] if several else []))
    compile_cells = [f"{g['compile_s']:.3f}" for g in graphs]
    total = sum(g["compile_s"] for g in graphs)
    table.add_row("compile (sum)", *compile_cells, *([f"{total:.3f}"] if several else []))
    pool = [sum(g.get("background", {}).values()) for g in graphs]
    if any(pool):
        table.add_row(
            "compile pool threads",
            *[f"{p:.3f}" for p in pool],
            *([f"{sum(pool):.3f}"] if several else []),
        )
    console.print(table)


def register(cli: click.Group) -> None:
    cli.add_command(doctor_group)
