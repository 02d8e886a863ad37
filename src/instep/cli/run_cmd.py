"""``instep run``: run test cases isolated in worker processes and store every outcome.

Parses options, resolves the tier, profile and store from the configuration, and calls
:func:`instep.run.runner.execute_run` (or :func:`collect_cases`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from instep.cli.context import AppContext, db_option, store_target
from instep.errors import BadInput


def _split_list(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


@click.command("run")
@click.argument("paths", nargs=-1)
@click.option(
    "--profile", "profile_name", metavar="NAME", help="Backend profile (default: config)."
)
@click.option(
    "--tier", metavar="NAME", help="A tier (L0..L6 or the config's): its paths, -k, timeout."
)
@click.option(
    "--workers",
    "-n",
    type=click.IntRange(min=1),
    help="Worker processes [devices or 1]; with --engine ray, tasks in flight at most.",
)
@click.option("--devices", metavar="0,1", help="Device ids, one per worker, round robin.")
@click.option(
    "--isolate",
    type=click.Choice(["case", "worker"]),
    help="A fresh process per case, or one reused until a case fails [profile's default].",
)
@click.option(
    "--timeout", type=click.FloatRange(min=0, min_open=True), help="Seconds per case [600]."
)
@click.option("-k", "k", metavar="EXPR", help="Only cases matching this pytest -k expression.")
@click.option(
    "--reruns",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Re-run failing cases up to N times; every attempt is kept.",
)
@click.option("--shard", metavar="K/N", help="Run shard K of N (balanced by stored durations).")
@click.option("--run", "run_name", metavar="NAME", help="Name of the run [generated].")
@click.option("--resume", metavar="RUN", help="Run only what has no final outcome in RUN.")
@db_option
@click.option("--collect-only", is_flag=True, help="List the cases and exit.")
@click.option(
    "--junit-xml", type=click.Path(path_type=Path, dir_okay=False), help="Write JUnit XML."
)
@click.option(
    "--preimport",
    metavar="MODS",
    help="Modules the fork server imports first [torch + backend]; 'none' for none.",
)
@click.option(
    "--memory-limit",
    "memory_limit",
    type=click.IntRange(min=1),
    metavar="MB",
    help="Address-space limit per case process (RLIMIT_AS).",
)
@click.option(
    "--pytest-arg",
    "pytest_args",
    multiple=True,
    metavar="ARG",
    help="Extra argument for pytest (repeatable), e.g. --pytest-arg=-p=no:warnings.",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Worker processes on this machine, or Ray tasks across a cluster (needs instep[ray]).",
)
@click.option(
    "--address",
    metavar="ADDR",
    help="--engine ray: the cluster ('auto', 'ray://head:10001', 'head:6379') [start one here].",
)
@click.option(
    "--ray-resource",
    metavar="NAME",
    help="--engine ray: the resource each case requests [profile's device_resource, else CPU].",
)
@click.option(
    "--process-model",
    type=click.Choice(["shared", "fork", "spawn"]),
    help="Who imports the test modules: the forking hosts (shared), each case process"
    " forked from a device-free host (fork), or fresh interpreters (spawn)"
    " [the profile's runtime.fork].",
)
@click.option(
    "--standbys",
    type=click.IntRange(min=0),
    metavar="N",
    help="Case processes each worker prepares beside the one running cases, under the fork"
    " and spawn models [--isolate case: ceil(CPUs / workers), at most 4; worker: 1 where a"
    " CPU is idle].",
)
@click.option(
    "--device-class",
    metavar="DEV",
    help="Only cases of test classes made for this device (TestFooCUDA, GPUTests: 'cuda').",
)
@click.option(
    "--impact",
    "impact_path",
    metavar="FILE",
    help="Run the tests an instep impact JSON report suggests for its units (with PATHS too).",
)
@click.option(
    "--action",
    "impact_actions",
    default="Shim,Test",
    show_default=True,
    metavar="A,B",
    help="--impact: units with these actions.",
)
@click.option(
    "--top", type=click.IntRange(min=1), metavar="N", help="--impact: the N most urgent units."
)
@click.option(
    "--upstream-tests",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    metavar="DIR",
    help="--impact: an upstream checkout whose test modules importing a changed module run too.",
)
@click.option(
    "--bisect",
    is_flag=True,
    help="Re-run failed cases down eager -> aot_eager -> aot_eager_decomp_partition -> target"
    " to bound their layer.",
)
@click.pass_obj
def run_command(
    app: AppContext,
    paths: tuple[str, ...],
    profile_name: str | None,
    tier: str | None,
    workers: int | None,
    devices: str | None,
    isolate: str | None,
    timeout: float | None,
    k: str | None,
    reruns: int,
    shard: str | None,
    run_name: str | None,
    resume: str | None,
    db: str | None,
    collect_only: bool,
    junit_xml: Path | None,
    preimport: str | None,
    memory_limit: int | None,
    pytest_args: tuple[str, ...],
    engine: str,
    address: str | None,
    ray_resource: str | None,
    process_model: str | None,
    standbys: int | None,
    device_class: str | None,
    impact_path: str | None,
    impact_actions: str,
    top: int | None,
    upstream_tests: Path | None,
    bisect: bool,
) -> int:
    """Run PATHS (files, directories, node ids; instep:smoke/test_l1_smoke.py::... names a
    case of instep's own suites) with every case isolated, storing outcomes.

    Exit codes follow pytest: 0 all passed, 1 failures (or cases left unrun), 5 nothing
    collected, 2 bad usage, 130 interrupted.
    """
    # fast CLI start: the library loads when the command runs
    from instep.run.host_protocol import last_error_line
    from instep.run.runner import RunOptions, collect_cases, execute_run
    from instep.run.sharding import parse_shard

    # fast CLI start: the library loads when the command runs
    from instep.suites.tiers import builtin_suite_args, resolve_builtin, runs_builtin_suites

    config = app.config
    profile = app.profile(profile_name)
    all_paths = resolve_builtin(list(paths))  # instep:smoke/... names a shipped suite
    if tier:  # built-in tiers L0..L6, tier files and the config's [tiers.NAME]
        # fast CLI start: the library loads when the command runs
        from instep.suites.tiers import resolve_tier

        tier_def = resolve_tier(config, tier)
        all_paths += list(tier_def.paths)
        k = k or tier_def.k
        timeout = timeout or tier_def.timeout
        isolate = isolate or tier_def.isolate
        pytest_args = (*tier_def.pytest_args(profile), *pytest_args)
    impact = None
    if impact_path:
        k, impact, suite_args = _impact_selection(
            impact_path, impact_actions, top, upstream_tests, k, all_paths
        )
        pytest_args = (*suite_args, *pytest_args)
    elif top is not None or upstream_tests is not None:
        raise BadInput("--top and --upstream-tests select from an impact report: add --impact FILE")
    if runs_builtin_suites(all_paths) and not any(
        a.startswith("--instep-device") for a in pytest_args
    ):
        pytest_args = (*builtin_suite_args(profile), *pytest_args)
    device_list = _split_list(devices)
    if engine == "ray" and device_list:
        raise BadInput("--devices: with --engine ray, Ray grants each task its device")
    if engine != "ray" and (address or ray_resource):
        raise BadInput("--address and --ray-resource need --engine ray")
    opts = RunOptions(
        paths=all_paths,
        k=k,
        workers=workers or max(1, len(device_list)),
        devices=device_list,
        isolate=isolate,
        timeout=timeout or 600.0,
        reruns=reruns,
        shard=parse_shard(shard) if shard else None,
        name=run_name,
        tier=tier,
        preimport=None
        if preimport is None
        else [m for m in _split_list(preimport) if m.lower() != "none"],
        memory_limit_mb=memory_limit,
        pytest_args=list(pytest_args),
        inductor_cache_dir=config.cache_path() / "inductor",
        argv=["instep", *sys.argv[1:]],
        engine=engine,
        address=address,
        ray_resource=ray_resource,
        max_tasks=workers if engine == "ray" else None,
        process_model=process_model,
        standbys=standbys,
        device_class=device_class,
        impact=impact,
    )
    if collect_only:
        collection = collect_cases(profile, opts)
        for case in collection.cases:
            click.echo(case.nodeid)
        err = Console(stderr=True)
        for error in collection.errors:
            err.print(
                f"ERROR collecting {error['nodeid']}: {last_error_line(error['longrepr'])}",
                style="red",
                highlight=False,
            )
        err.print(f"{len(collection.cases)} cases, {len(collection.errors)} collection errors")
        if collection.errors:
            return 1
        return 0 if collection.cases else 5
    if resume and (paths or tier or run_name):
        raise BadInput("--resume RUN reuses the run's paths and name: give no PATHS/--tier/--run")
    # fast CLI start: the library loads when the command runs
    from instep.run.progress import ProgressReporter
    from instep.triage.classifier import Classifier

    target = store_target(app, db)
    result = execute_run(
        target, profile, opts, ProgressReporter(), resume=resume, classifier=Classifier
    )
    if bisect:
        _bisect(target, result, profile, opts)
    if junit_xml is not None:
        # fast CLI start: the library loads when the command runs
        from instep.run.junit_xml import write_junit_xml
        from instep.store import Store

        with Store(target) as store:
            outcomes = store.outcome_rows(result.run.id)
        write_junit_xml(junit_xml, result.run.name, outcomes)
    return result.exit_code


def _impact_selection(
    path: str,
    actions: str,
    top: int | None,
    upstream_tests: Path | None,
    k: str | None,
    paths: list[str],
) -> tuple[str | None, dict, list[str]]:
    """``--impact``: add the report's tests to ``paths``; the -k to run with, the setting
    and the options of instep's suites it selected (the L5 operators)."""
    # fast CLI start: the library loads when the command runs
    from instep.impact_contract import parse_actions, read_report
    from instep.suites.impact_selection import select_tests

    doc = read_report(path)
    selection = select_tests(doc, parse_actions(actions), top, upstream_tests)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for note in selection.notes:
        err.print(f"--impact: {note}")
    if not selection.paths:
        raise BadInput(f"--impact {path}: no test to run for the units with action {actions}")
    units = {u for us in selection.units_of.values() for u in us}
    err.print(f"--impact: {len(selection.paths)} test files for {len(units)} units of {path}")
    narrow = selection.keyword if not paths else None  # never narrow the PATHS given too
    paths += [p for p in selection.paths if p not in paths]
    if narrow:
        k = f"({k}) and ({narrow})" if k else narrow
    if selection.opinfo_ops:
        err.print(f"--impact: OpInfo cases of {', '.join(selection.opinfo_ops)} (L5)")
    return k, selection.as_setting(path), selection.pytest_args


def _bisect(target: str, result, profile, opts) -> None:  # type: ignore[no-untyped-def]
    """``--bisect``: the backend ladder over the run's failed cases; prints what it cost."""
    # fast CLI start: the library loads when the command runs
    from instep.store import Store
    from instep.triage.backend_ladder import bisect_run

    with Store(target) as store:
        report = bisect_run(
            store, result.run, profile, opts.workers, opts.inductor_cache_dir, base=opts
        )
    share = 100.0 * report.wall_s / result.wall_s if result.wall_s else 0.0
    where = (
        "on the Ray cluster" if opts.engine == "ray" else f"in {report.hosts_started} worker hosts"
    )
    Console(stderr=True).print(
        f"bisect: {report.cases} failed cases, {report.reruns} re-runs on the backend ladder"
        f" {where}, {report.wall_s:.1f} s"
        f" (+{share:.0f} % over the run's {result.wall_s:.1f} s)",
        highlight=False,
    )


def register(cli: click.Group) -> None:
    cli.add_command(run_command)
