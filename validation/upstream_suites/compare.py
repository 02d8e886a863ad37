"""Run one upstream test file with ``pytest -n W`` and with ``instep run`` side by side.

Both sides get the same file, the same ``-k``, the same worker count and a cache state
asserted equal: each run starts with its own empty ``TORCHINDUCTOR_CACHE_DIR`` and
``TRITON_CACHE_DIR`` (checked empty before, and recorded by instep's version matrix).
The order of the sides alternates over ``--repeat``. Outcomes are compared case by case
(pytest's from its JUnit XML, instep's from ``instep show --format json``); the script
prints the counts side by side, every case whose outcome differs, and the wall-time
ratio of each instep mode to ``pytest -n``. It exits 1 when the two sides ran different
cases: a ratio over different work means nothing.

    python validation/upstream_suites/compare.py test/inductor/test_mmdecomp.py \\
        --workers 12 --profile cuda -k TestDecompCUDA --modes worker,case --out /tmp/cmp

Known, named difference: a passing ``unittest.expectedFailure`` is ``failed``
("Unexpected success") for pytest and ``xpassed`` (stale mark) for instep; it is mapped
back before comparing and listed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def fresh_caches(root: Path, name: str) -> dict[str, str]:
    env = {}
    for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        path = root / f"{name}-{var.lower()}"
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        assert not any(path.iterdir()), f"{path} is not empty"
        env[var] = str(path)
    return env


def pytest_side(args: argparse.Namespace, out: Path, env: dict[str, str]) -> dict[str, str]:
    xml = out / "pytest.xml"
    cmd = [sys.executable, "-m", "pytest", "-n", str(args.workers), "-p", "no:cacheprovider"]
    cmd += ["-q", f"--junitxml={xml}", "-o", "junit_family=xunit1", args.path]
    if args.k:
        cmd += ["-k", args.k]
    run(cmd, env, out / "pytest.log")
    statuses: dict[str, str] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        key = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        status = "passed"
        for child in case:
            if child.tag == "skipped":
                status = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
            elif child.tag in ("failure", "error"):
                status = "failed" if child.tag == "failure" else "error"
        statuses[key] = status
    return statuses


def instep_side(
    args: argparse.Namespace, mode: str, out: Path, env: dict[str, str]
) -> dict[str, str]:
    db = out / "instep.db"
    name = f"{mode}-{time.monotonic_ns()}"
    cmd = [sys.executable, "-m", "instep", "-v", "run", args.path, "--profile", args.profile]
    cmd += ["-n", str(args.workers), "--isolate", mode, "--run", name, "--db", str(db)]
    if args.devices:
        cmd += ["--devices", args.devices]
    if args.k:
        cmd += ["-k", args.k]
    run(cmd, env, out / f"instep-{mode}.log")
    shown = subprocess.run(
        [sys.executable, "-m", "instep", "show", name, "--format", "json", "--db", str(db)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
    )
    data = json.loads(shown.stdout)
    matrix = data["run"]["version_matrix"]
    assert matrix.get("inductor_cache_dir") == env["TORCHINDUCTOR_CACHE_DIR"], matrix
    assert matrix.get("inductor_cache_empty_at_start") is True, matrix
    statuses = {}
    for o in data["outcomes"]:
        parts = o["case"].split("::")
        status = o["status"]
        if status == "xpassed" and (o.get("evidence") or {}).get("unexpected_success"):
            status = "failed"  # pytest's word for it (the named difference above)
            UNEXPECTED_SUCCESSES.append(o["case"])
        if status in ("crashed", "timeout"):
            status = f"failed ({status})"
        statuses["::".join(parts[-2:])] = status
    return statuses


UNEXPECTED_SUCCESSES: list[str] = []
WALL: dict[str, list[float]] = {}


SIDE_TIMEOUT: list[float | None] = [None]
CUT: list[str] = []


def run(cmd: list[str], env: dict[str, str], log: Path) -> None:
    """Run one side; past ``--side-timeout`` it gets SIGINT (instep stores what finished
    and marks the run interrupted), then SIGKILL 30 s later, and is reported as cut."""
    started = time.monotonic()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu0 = usage.ru_utime + usage.ru_stime
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=fh, stderr=subprocess.STDOUT)
        try:
            proc.wait(timeout=SIDE_TIMEOUT[0])
        except subprocess.TimeoutExpired:
            CUT.append(log.stem)
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    wall = time.monotonic() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime - cpu0
    WALL.setdefault(log.stem, []).append(wall)
    cut = " (CUT at the side time-out)" if log.stem in CUT else ""
    print(f"{log.stem}: {wall:.1f} s, {cpu:.1f} CPU s{cut}  ({' '.join(cmd[2:])})", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--devices")
    parser.add_argument("-k")
    parser.add_argument("--modes", default="worker,case")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="cmp-")))
    parser.add_argument("--side-timeout", type=float, help="seconds one side may run")
    args = parser.parse_args()
    SIDE_TIMEOUT[0] = args.side_timeout
    args.out.mkdir(parents=True, exist_ok=True)
    modes = [m for m in args.modes.split(",") if m]
    sides = ["pytest", *modes]
    results: dict[str, dict[str, str]] = {}
    for rep in range(args.repeat):
        order = sides if rep % 2 == 0 else list(reversed(sides))
        for side in order:
            env = fresh_caches(args.out / "caches", f"{side}-{rep}")
            if side == "pytest":
                results[side] = pytest_side(args, args.out, env)
            else:
                results[side] = instep_side(args, side, args.out, env)
            counts = Counter(results[side].values())
            print(f"  {side}: {dict(sorted(counts.items()))}", flush=True)
    base = results["pytest"]
    ok = True
    print(f"\n{'status':<20}" + "".join(f"{s:>12}" for s in sides))
    counts = {s: Counter(results[s].values()) for s in sides}
    for status in sorted(set().union(*counts.values())):
        print(f"{status:<20}" + "".join(f"{counts[s][status]:>12}" for s in sides))
    for side in modes:
        if set(results[side]) != set(base):
            ok = False
            print(
                f"{side}: ran different cases than pytest: "
                f"{len(set(results[side]) ^ set(base))} differ"
            )
        differ = sorted(k for k in base if k in results[side] and results[side][k] != base[k])
        for key in differ:
            print(f"  {side} differs: {key}: pytest {base[key]}, instep {results[side][key]}")
        print(f"{side}: {len(differ)} of {len(base)} cases differ from pytest")
        ratio = sum(WALL[f"instep-{side}"]) / sum(WALL["pytest"])
        cut = {f"instep-{side}", "pytest"} & set(CUT)
        if cut:
            print(f"no ratio for {side}: {', '.join(sorted(cut))} cut at the side time-out")
            continue
        print(f"wall time instep --isolate {side} / pytest -n {args.workers}: {ratio:.2f}x")
    if UNEXPECTED_SUCCESSES:
        print(f"unexpected successes (instep xpassed, pytest failed): {len(UNEXPECTED_SUCCESSES)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
