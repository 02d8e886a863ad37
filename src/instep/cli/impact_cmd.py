"""``instep impact``: upstream changes -> downstream couplings -> Check / Test / Shim."""

from __future__ import annotations

import gc
import logging
import time
from pathlib import Path

import click

from instep.cli import context
from instep.cli.context import AppContext
from instep.errors import BadInput
from instep.impact.export import FORMATS

log = logging.getLogger("instep.cli")


def _version_tuple(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(p) for p in text.split("."))
    except ValueError:
        raise BadInput(f"--min-supported: expected a version like 2.13, got '{text}'") from None


def _stage_map(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        prefix, sep, stage = pair.partition("=")
        if not sep or not prefix or not stage:
            raise BadInput(f"--stage-map: expected PREFIX=STAGE, got '{pair}'")
        out[prefix] = stage
    return out


@click.command("impact")
@click.option(
    "--upstream-old",
    metavar="X",
    help="Release diff (with --upstream-new) or patch series (with --patches): the old "
    "upstream, a source tree, wheel, repo@rev or pip spec (torch==2.13.0).",
)
@click.option(
    "--upstream-new",
    metavar="Y",
    help="Release diff: the new upstream, same forms as --upstream-old.",
)
@click.option(
    "--upstream-git",
    metavar="PATH",
    help="Git range (with --range; instead of --upstream-old/--upstream-new): a local "
    "upstream clone, one unit per commit.",
)
@click.option(
    "--range", "rev_range", metavar="A..B", help="Git range: the commits of --upstream-git."
)
@click.option(
    "--first-parent",
    is_flag=True,
    help="--upstream-git: follow first parents only, one unit per merged PR (merge commits).",
)
@click.option(
    "--upstream-package",
    "upstream_packages",
    multiple=True,
    metavar="NAME",
    help="Top-level upstream package the downstream imports (repeatable; default: torch, "
    "else the packages at the top of the upstream).",
)
@click.option(
    "--patches",
    metavar="DIR",
    help="Patch series (with --upstream-old; instead of --upstream-new): unified diffs / "
    "format-patch files applied in name order.",
)
@click.option(
    "--downstream",
    metavar="X",
    help="Required: the downstream, a source tree, repo@rev, wheel or pip spec "
    "(torch-npu==2.13.0).",
)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="md", show_default=True)
@click.option(
    "--out", type=click.Path(path_type=Path, dir_okay=False), help="Output file (default: stdout)."
)
@click.option(
    "--lang",
    type=click.Choice(["en", "zh"]),
    default=None,
    help="Rationale language (default: config, en).",
)
@click.option(
    "--min-action",
    type=click.Choice(["Check", "Test", "Shim"]),
    default="Check",
    show_default=True,
    help="Leave out units below this action.",
)
@click.option(
    "--min-supported",
    metavar="VER",
    help="Oldest torch the downstream supports (compat debt); default: the old upstream.",
)
@click.option(
    "--stage-map",
    multiple=True,
    metavar="PREFIX=STAGE",
    help="Extra upstream path prefix -> stage (repeatable).",
)
@click.option(
    "--exclude",
    multiple=True,
    metavar="GLOB",
    help="Leave out upstream/downstream paths matching GLOB (repeatable).",
)
@click.option(
    "--jobs",
    type=click.IntRange(1, 64),
    default=None,
    help="Worker processes (default: the usable CPUs, at most 8).",
)
@click.option("--no-cache", is_flag=True, help="Do not read or write the analysis cache.")
@click.option(
    "--all",
    "all_units",
    is_flag=True,
    help="md: add the per-unit table; html: list uncoupled units too (json and csv: always).",
)
@click.pass_obj
def impact(
    app: AppContext,
    upstream_old,
    upstream_new,
    upstream_git,
    rev_range,
    first_parent,
    upstream_packages,
    patches,
    downstream,
    fmt,
    out,
    lang,
    min_action,
    min_supported,
    stage_map,
    exclude,
    jobs,
    no_cache,
    all_units,
) -> None:
    """Impact of upstream changes on a downstream backend: Check, Test or Shim, with evidence.

    \b
    Required: --downstream, and the upstream in one of three ways (alternatives):
      release diff   --upstream-old X --upstream-new Y
      git range      --upstream-git PATH --range A..B  [--first-parent]
      patch series   --upstream-old X --patches DIR
    Everything else is optional ([impact] in instep.toml can give defaults).

    \b
    Shim   the backend breaks on the new upstream: change its code
    Test   behaviour the backend runs changed: run its tests (each Test place comes
           with the command that runs them; instep run --impact runs them all)
    Check  read and confirm: no code change or test needed

    Static only: neither side's code is imported or executed. Pip specs are downloaded
    once (pip download --no-deps) into the cache and read from the wheel.
    """
    # CLI start: the impact engine loads when the command runs
    from instep.impact.analysis import ImpactRequest, analyse
    from instep.impact.export import write
    from instep.impact.export.scope_text import scope_lines
    from instep.impact.export.sections import act_now
    from instep.impact.model import Action

    cfg = app.config
    ic = cfg.impact
    downstream = downstream or ic.downstream
    if not downstream:
        raise BadInput("--downstream: required (a source tree, repo@rev, wheel or pip spec)")
    req = ImpactRequest(
        downstream=downstream,
        upstream_old=upstream_old or (None if upstream_git else ic.upstream_old),
        upstream_new=upstream_new or (None if (upstream_git or patches) else ic.upstream_new),
        upstream_git=upstream_git or (ic.upstream_git if rev_range else None),
        rev_range=rev_range,
        patches=patches,
        cache_dir=cfg.cache_path(),
        use_cache=not no_cache,
        jobs=jobs,
        lang=lang or cfg.lang,
        stage_map={**ic.stage_map, **_stage_map(stage_map)},
        exclude=[*ic.exclude, *exclude],
        min_supported=_version_tuple(min_supported),
        first_parent=first_parent,
        upstream_packages=tuple(upstream_packages),
    )
    started = time.perf_counter()
    report = analyse(req)
    seconds = time.perf_counter() - started
    if context.PROCESS_ENDS_WITH_COMMAND:
        # What the analysis leaves (its indexes and trees, 1.6 million objects on torch
        # 2.13.0 -> 2.14.1 against torch-npu 2.13.0, many in reference cycles) is freed by
        # the process's end: frozen, the collector never walks it again (a full walk while
        # the report was written took 1.3 s of a cold run).
        gc.freeze()
    floor = Action(min_action).rank
    report.units = [u for u in report.units if u.action.rank >= floor]
    write(report, fmt, out, all_units=all_units)
    for line in scope_lines(report.scope, report.lang):  # what was read, first
        log.info("%s", line)
    s = report.summary()
    counts = s["counts"]  # the reports' one way of counting (docs/impact.md, "Counting")
    for what in ("units", "couplings", "places"):
        log.info(
            "%d %s: %s",
            sum(c[what] for c in counts.values()),
            what,
            ", ".join(f"{a} {c[what]}" for a, c in counts.items()),
        )
    log.info(
        "%.1f s%s",
        seconds,
        " (remembered report)" if report.stats.get("report_memo") == "hit" else "",
    )
    shims = act_now(report)
    if shims:
        x = shims[0]
        log.info(
            "act now: %d Shim coupling(s) at %d place(s) in %d unit(s), first %s -> %s%s",
            len(shims),
            counts["Shim"]["places"],
            len({line.unit for line in shims}),
            x.downstream,
            x.upstream,
            f" ({x.delta})" if x.delta else "",
        )
    top = report.hotspots(limit=1)
    if top:
        log.info(
            "start with %s (%s): reached by %d upstream units",
            top[0]["symbol"],
            top[0]["at"],
            top[0]["units"],
        )
    if out is not None:
        log.info("wrote %s", out)


def register(cli: click.Group) -> None:
    cli.add_command(impact)
