"""``pytest -n 2`` vs ``instep run`` under the ``fork`` process model, on a test module that
initialises its "device" at import and costs seconds of CPU to import (as an upstream
OpInfo file importing ``op_db`` does on CUDA).

The suite is generated in a fresh temporary directory for every run:

- ``fakedev.py``: a stand-in device runtime. ``init()`` marks the process initialised;
  ``use()`` raises "Cannot re-initialize fakedev in forked subprocess" in a process forked
  after an initialisation (CUDA's rule), so a runner that imported the test module in a
  process that then forked would fail every case and the outcome check below would say so.
- ``op_tables.py``: initialises the device at its top, then builds tables for about
  ``--import-cpu`` seconds of CPU (calibrated on this machine before the runs: pure
  Python, so it is real work in every process that imports it, as ``op_db`` is).
- ``test_device_ops.py``: ``--cases`` parametrised cases of eager torch work (about
  ``--case-cpu`` s of CPU each), ``--failing`` of them failing (assertions and a
  ``ValueError``), one calling ``os._exit`` (a crash), each calling ``fakedev.use()``.
- ``instep.toml``: the profile ``fakedev``, the ``cpu`` profile with
  ``[runtime] fork = "before_init"`` and ``initialized = "fakedev.is_initialized"``.

Sides, each with the same files, the same worker count and its own empty Inductor cache:

  1. ``python -m pytest -n W`` (pytest-xdist; outcomes from its JUnit XML)
  2. ``instep run --profile fakedev -n W --isolate worker`` (target <= 1.1x of 1)
  3. ``instep run --profile fakedev -n W --isolate case`` (target <= 2.0x of 1)
  4. with ``--base COMMIT``: 2 and 3 with the instep source of COMMIT (``git archive`` of
     its ``src/`` into a temporary directory, first on ``PYTHONPATH``; the script checks
     that the run imported instep from there)

The order of the sides alternates over ``--repeat`` (forward, then reversed). Before it
prints a ratio the script checks that every side ran the same cases with the same
outcomes (pytest's crashed case, whose worker xdist replaces, is an ``error`` there and
``crashed`` in instep: the one named exception). Every run's wall time, CPU time (all
waited-for descendants), and the load average before it are printed, then the ratio of
each side's median wall time to pytest's median.

The floor of ``--isolate case``: every case process imports ``op_tables`` itself (it
initialises the device), so ``cases x import CPU`` is work no runner can avoid; with no idle
core (2 workers on 2 CPUs) it is wall time too. The script prints it.

    python benchmarks/device_module_vs_xdist.py [--repeat 3] [--base 74580ac]
    # many light cases, where the floor of --isolate case alone is 1.6x of pytest
    python benchmarks/device_module_vs_xdist.py --cases 24 --failing 6 --case-cpu 0.1

Figures (this project's shared 2-CPU machine): docs/validation/cpu.md.

Needs torch and pytest-xdist (``pip install -e '.[bench]'``). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

FAKEDEV = '''
"""A stand-in device runtime: initialised at import by the tests, unusable after a fork."""
import os

_state = {"initialised": False, "forked_after_init": False}


def is_initialized():
    return _state["initialised"]


def init():
    _state["initialised"] = True


def use():
    if _state["forked_after_init"]:
        raise RuntimeError("Cannot re-initialize fakedev in forked subprocess")
    init()


def _after_fork_in_child():
    if _state["initialised"]:
        _state["forked_after_init"] = True


os.register_at_fork(after_in_child=_after_fork_in_child)
'''

OP_TABLES = '''
"""Like op_db: touches the device first, then builds its tables (seconds of CPU)."""
import fakedev

fakedev.init()


def _build(rounds):
    table = []
    for r in range(rounds):
        row = {{"name": f"op{{r}}", "dtypes": tuple(range(r % 7)), "samples": []}}
        acc = r
        for k in range(40):
            acc = (acc * 1103515245 + 12345 + k) % 2147483648
            row["samples"].append(acc % 1000)
        table.append(row)
    return table


OPS = _build({rounds})
'''

TESTS = """
import os

import pytest
import torch

import fakedev
from op_tables import OPS

FAILING = {failing}
CRASHING = {crashing}


def _work(i):
    torch.manual_seed(i)
    a = torch.randn(96, 96)
    for _ in range({reps}):
        a = torch.tanh(a @ a.T / 96.0) + 0.01 * len(OPS[i % len(OPS)]["samples"])
    return a


@pytest.mark.parametrize("i", range({cases}))
def test_op(i):
    fakedev.use()
    result = _work(i)
    if i in CRASHING:
        os._exit(7)
    if i in FAILING:
        if i % 2:
            raise ValueError(f"case {{i}}: a deliberate error")
        assert float(result.sum()) == 12345.0, "a deliberate mismatch"
    assert torch.isfinite(result).all()
"""

PROFILE = """
[profiles.fakedev]
extends = "cpu"
description = "cpu, with a stand-in device that the tests initialise at import"

[profiles.fakedev.runtime]
fork = "before_init"
initialized = ["fakedev.is_initialized"]
"""


def write_suite(root: Path, args: argparse.Namespace, rounds: int) -> None:
    cases = args.cases
    failing = sorted({(k * 7 + 3) % cases for k in range(args.failing)})
    crashing = [cases - 1] if args.crash else []
    (root / "fakedev.py").write_text(FAKEDEV)
    (root / "op_tables.py").write_text(OP_TABLES.format(rounds=rounds))
    (root / "test_device_ops.py").write_text(
        TESTS.format(
            cases=cases,
            failing=set(failing) or "set()",
            crashing=set(crashing) or "set()",
            reps=args.case_reps,
        )
    )
    (root / "instep.toml").write_text(PROFILE)


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of ``cmd`` (its waited-for descendants included), and its log."""
    cpu0, start = child_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, child_cpu() - cpu0
    if proc.returncode not in (0, 1):  # 1: cases failed, which the suite makes them do
        sys.exit(f"{' '.join(cmd[:6])}... exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return wall, cpu, proc.stdout + proc.stderr


def calibrate(root: Path, env: dict[str, str], target_s: float) -> tuple[int, float]:
    """Rounds of ``op_tables`` that cost about ``target_s`` of CPU to import, measured."""
    rounds = 20_000
    for _ in range(3):
        (root / "op_tables.py").write_text(OP_TABLES.format(rounds=rounds))
        probe = (
            "import time; t = time.process_time(); import op_tables; print(time.process_time() - t)"
        )
        out = subprocess.run(
            [sys.executable, "-c", probe], cwd=root, env=env, capture_output=True, text=True
        )
        took = float(out.stdout.strip().splitlines()[-1])
        if abs(took - target_s) < 0.1 * target_s:
            return rounds, took
        rounds = max(1000, int(rounds * target_s / max(took, 0.01)))
    return rounds, took


CASE_PROBE = """
import time, torch
a = torch.randn(96, 96)
t = time.process_time()
for _ in range(1000):
    a = torch.tanh(a @ a.T / 96.0)
print(time.process_time() - t)
"""


def calibrate_case(env: dict[str, str], target_s: float) -> tuple[int, float]:
    """Matrix products per case for about ``target_s`` of CPU, and what 1000 cost."""
    out = subprocess.run(
        [sys.executable, "-c", CASE_PROBE], env=env, capture_output=True, text=True, check=True
    )
    per_1000 = float(out.stdout.strip().splitlines()[-1])
    return max(1, int(1000 * target_s / max(per_1000, 1e-3))), per_1000


def pytest_outcomes(xml: Path) -> dict[str, str]:
    outcomes = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        status = "passed"
        for child in case:
            if child.tag == "skipped":
                status = "skipped"
            elif child.tag in ("failure", "error"):
                status = "failed" if child.tag == "failure" else "error"
        outcomes[f"test_device_ops.py::{case.get('name')}"] = status
    return outcomes


def instep_outcomes(root: Path, env: dict[str, str]) -> dict[str, str]:
    shown = subprocess.run(
        [sys.executable, "-m", "instep", "show", "bench", "--format", "json", "--db", "b.db"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(shown.stdout)
    return {o["case"]: o["status"] for o in data["outcomes"]}


def base_source(commit: str, into: Path) -> Path:
    """``src/`` of ``commit`` in this repository, unpacked under ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit, "src"], capture_output=True, check=True
    ).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=8)
    ap.add_argument("--failing", type=int, default=3, help="cases that fail (besides the crash)")
    ap.add_argument("--crash", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--import-cpu", type=float, default=3.0, help="CPU s to import op_tables")
    ap.add_argument("--case-cpu", type=float, default=1.0, help="CPU s of each case's work")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="runs per side, order alternating")
    ap.add_argument("--base", help="also run instep at this commit (its src/)")
    ap.add_argument("--modes", default="worker,case")
    args = ap.parse_args()
    for needed in ("torch", "xdist"):
        if subprocess.run([sys.executable, "-c", f"import {needed}"]).returncode:
            sys.exit(f"this benchmark needs {needed}: pip install -e '.[bench]' and torch")
    w = str(args.workers)
    tmp = Path(tempfile.mkdtemp(prefix="instep-devbench-"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    # one intra-op thread per process on every side: two workers' OpenMP pools spinning on
    # two shared cores make case times swing by 10x from run to run
    env.update(PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    calib = tmp / "calibrate"
    calib.mkdir()
    (calib / "fakedev.py").write_text(FAKEDEV)
    rounds, import_cpu = calibrate(calib, env, args.import_cpu)
    args.case_reps, per_1000 = calibrate_case(env, args.case_cpu)
    sources = {"instep": None}
    if args.base:
        sources["base"] = base_source(args.base, tmp / "base")
    sides = ["pytest"]
    modes = [m for m in args.modes.split(",") if m]
    for label in sources:
        sides += [f"{label} {mode}" for mode in modes]
    runs: dict[str, list[tuple[float, float, float]]] = {s: [] for s in sides}
    outcomes: dict[str, dict[str, str]] = {}
    print(
        f"{args.cases} cases ({args.failing} failing, {int(args.crash)} crashing) of"
        f" {args.case_reps} products (~{args.case_reps * per_1000 / 1000:.2f} CPU s each),"
        f" import of op_tables {import_cpu:.2f} CPU s ({rounds} rounds), {args.workers}"
        f" workers, {os.cpu_count()} CPUs; base {args.base or '-'}",
        flush=True,
    )
    for rep in range(args.repeat):
        for side in sides if rep % 2 == 0 else list(reversed(sides)):
            root = tmp / f"{side.replace(' ', '-')}-{rep}"
            root.mkdir()
            write_suite(root, args, rounds)
            side_env = {**env, "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor-cache")}
            if side == "pytest":
                cmd = [sys.executable, "-m", "pytest", "-n", w, "-p", "no:cacheprovider", "-q"]
                cmd += ["--junitxml=junit.xml", "-o", "junit_family=xunit1", "test_device_ops.py"]
            else:
                label, mode = side.split()
                if sources[label] is not None:
                    side_env["PYTHONPATH"] = str(sources[label])
                cmd = [sys.executable, "-m", "instep", "run", "test_device_ops.py"]
                cmd += ["--profile", "fakedev", "-n", w, "--isolate", mode, "--run", "bench"]
                cmd += ["--db", "b.db"]
            load = os.getloadavg()[0]
            wall, cpu, log = run(cmd, root, side_env)
            (root / "output.txt").write_text(log)  # kept: the temporary folder stays
            if side == "pytest":
                got = pytest_outcomes(root / "junit.xml")
            else:
                got = instep_outcomes(root, side_env)
                where = subprocess.run(
                    [sys.executable, "-c", "import instep; print(instep.__file__)"],
                    env=side_env,
                    capture_output=True,
                    text=True,
                ).stdout.strip()
                expected = sources[side.split()[0]] or REPO / "src"
                if not where.startswith(str(expected)):
                    sys.exit(f"{side}: ran instep from {where}, not from {expected}")
            runs[side].append((wall, cpu, load))
            outcomes.setdefault(side, got)
            if got != outcomes[side]:
                sys.exit(f"{side}: outcomes changed between runs")
            counts: dict[str, int] = {}
            for status in got.values():
                counts[status] = counts.get(status, 0) + 1
            print(
                f"run {rep + 1} {side:16} wall {wall:6.1f} s  cpu {cpu:6.1f} s  load {load:4.1f}"
                f"  {dict(sorted(counts.items()))}",
                flush=True,
            )
    base = outcomes["pytest"]
    for side in sides[1:]:
        got = outcomes[side]
        if set(got) != set(base):
            sys.exit(f"{side} ran other cases than pytest: {sorted(set(got) ^ set(base))[:5]}")
        differ = {  # xdist reports the case that killed its worker as failed or error
            k: (base[k], got[k])
            for k in base
            if base[k] != got[k] and not (base[k] in ("failed", "error") and got[k] == "crashed")
        }
        if differ:
            sys.exit(f"{side}: outcomes differ from pytest's: {differ}")
    crashed = sorted(k for k in base if outcomes[sides[-1]].get(k) == "crashed")
    print(
        f"\nsame cases and outcomes on every side (pytest's error is instep's crashed: {crashed})"
    )
    median = {s: statistics.median(w for w, _, _ in runs[s]) for s in sides}
    cpu = {s: statistics.median(c for _, c, _ in runs[s]) for s in sides}
    print(f"{'side':18} {'median wall s':>14} {'ratio':>7} {'median cpu s':>13}")
    for side in sides:
        ratio = median[side] / median["pytest"]
        print(f"{side:18} {median[side]:14.1f} {ratio:7.2f} {cpu[side]:13.1f}")
    floor = args.cases * import_cpu / args.workers
    print(
        f"floor of --isolate case: {args.cases} imports x {import_cpu:.2f} CPU s / {args.workers}"
        f" workers = {floor:.1f} s ({floor / median['pytest']:.2f}x of pytest's median) before"
        " any case runs"
    )
    print("targets: --isolate worker <= 1.1x, --isolate case <= 2.0x (load: see each run)")
    print(f"every run's files and output: {tmp}")


if __name__ == "__main__":
    main()
