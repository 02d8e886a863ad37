"""Benchmark: L5 OpInfo through `instep run` vs a plain in-process loop, same run.

Both sides run the same cases (float32, first sample, forward, fullgraph, CPU Inductor):
  plain  : one Python process that enumerates the cases and calls the harness's
           ``run_case`` in a loop, catching exceptions (no isolation at all);
  instep : ``instep run --tier L5 --profile cpu`` with N workers and ``--isolate worker``
           (every case in a forked child that is replaced when it crashes).
Each side gets its own empty Inductor cache (after one uncounted warm-up of the C++
toolchain), and its wall time includes starting Python, importing torch and collecting.
Prints cases/min for both and the ratio (target: instep >= 0.8 of the plain loop with the
same number of processes).

Usage: python benchmarks/opinfo_throughput.py [--limit 60] [--workers 1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLAIN = """
import os, sys, time
from instep.suites.opinfo.harness import enumerate_cases, run_case
cases = enumerate_cases("cpu", ("float32",), (), int(os.environ["INSTEP_OPINFO_LIMIT"]))
passed = failed = 0
for case in cases:
    try:
        run_case(case, "cpu", "inductor")
        passed += 1
    except Exception:
        failed += 1
print(len(cases), passed, failed)
"""


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):  # 1: some cases failed, which is a result too
        raise SystemExit(f"{cmd[:4]} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return wall, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=60, help="ops of op_db (0: all)")
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="instep-opinfo-bench-") as tmpdir:
        tmp = Path(tmpdir)
        base = {
            **os.environ,
            "INSTEP_OPINFO_LIMIT": str(args.limit),
            "INSTEP_OPINFO_DTYPES": "float32",
        }
        plain_wall, out = timed(
            [sys.executable, "-c", PLAIN],
            {**base, "TORCHINDUCTOR_CACHE_DIR": str(tmp / "cache-plain")},
            tmp,
        )
        n, passed, failed = (int(x) for x in out.split()[-3:])
        instep_wall, _ = timed(
            [
                sys.executable,
                "-m",
                "instep",
                "run",
                "--tier",
                "L5",
                "--profile",
                "cpu",
                "-n",
                str(args.workers),
                "--isolate",
                "worker",
                "--run",
                "bench",
                "--db",
                str(tmp / "bench.db"),
            ],
            {**base, "TORCHINDUCTOR_CACHE_DIR": str(tmp / "cache-instep")},
            tmp,
        )
        plain_rate = n / plain_wall * 60
        instep_rate = n / instep_wall * 60
        print(f"cases: {n} ({passed} passed, {failed} failed in the plain loop)")
        print(f"plain loop (1 process)      : {plain_wall:7.1f} s = {plain_rate:6.1f} cases/min")
        print(
            f"instep run (-n {args.workers}, worker)  : {instep_wall:7.1f} s = "
            f"{instep_rate:6.1f} cases/min"
        )
        print(
            f"ratio instep/plain = {instep_rate / plain_rate:.2f} (target >= 0.8"
            f"{', per process' if args.workers > 1 else ''})"
        )


if __name__ == "__main__":
    main()
