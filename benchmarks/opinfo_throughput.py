"""Benchmark: L5 OpInfo through `instep run` vs a plain in-process loop, same cases.

Both sides run the same cases (float32, first sample, forward, fullgraph, Inductor on
``--device``, cpu or cuda):
  plain  : one Python process that enumerates the cases and calls the harness's
           ``run_case`` in a loop, catching exceptions (no isolation at all);
  instep : ``instep run --tier L5 --profile DEVICE`` with N workers and ``--isolate worker``
           (every case in a child process that is replaced when it crashes; on cuda the
           profile's process model: hosts that never initialise the device fork them).

Equal terms, checked before a ratio is printed:
  - each side starts with its own empty ``TORCHINDUCTOR_CACHE_DIR`` and ``TRITON_CACHE_DIR``
    (asserted empty; instep honours the caller's, and its version matrix must say it
    started empty);
  - one uncounted warm-up compile on the device first (its own throwaway cache), so
    neither side pays the first start of the C++ toolchain or the GPU driver;
  - both sides ran the same number of cases (the plain loop's count against instep's
    stored outcomes), each rate from its own count; the order alternates over --repeat.
Wall time includes starting Python, importing torch and collecting.

Usage: python benchmarks/opinfo_throughput.py [--limit 60] [--workers 1] [--repeat 2]
                                             [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLAIN = """
import os, sys, time
from instep.suites.opinfo.harness import enumerate_cases, run_case
device = os.environ["BENCH_DEVICE"]
cases = enumerate_cases(device, ("float32",), (), int(os.environ["INSTEP_OPINFO_LIMIT"]))
passed = failed = 0
for case in cases:
    try:
        run_case(case, device, "inductor")
        passed += 1
    except Exception:
        failed += 1
print(len(cases), passed, failed)
"""


WARM_UP = (
    "import os, torch; torch.compile(lambda x: (x + 1).relu())"
    "(torch.ones(4, device=os.environ['BENCH_DEVICE']))"
)


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):  # 1: some cases failed; the counts are checked below
        raise SystemExit(f"{cmd[:4]} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return wall, proc.stdout


def empty_cache(path: Path) -> dict[str, str]:
    caches = {"TORCHINDUCTOR_CACHE_DIR": path / "inductor", "TRITON_CACHE_DIR": path / "triton"}
    for cache in caches.values():
        cache.mkdir(parents=True)
        assert not any(cache.iterdir()), f"{cache} is not empty"
    return {name: str(cache) for name, cache in caches.items()}


def run_plain(base: dict[str, str], tmp: Path, rep: int) -> tuple[float, int, str]:
    wall, out = timed(
        [sys.executable, "-c", PLAIN], {**base, **empty_cache(tmp / f"plain-{rep}")}, tmp
    )
    n, passed, failed = (int(x) for x in out.split()[-3:])
    return wall, n, f"{passed} passed, {failed} failed"


def run_instep(base: dict[str, str], tmp: Path, rep: int, workers: int) -> tuple[float, int, str]:
    db, name = tmp / "bench.db", f"bench-{rep}"
    device = base["BENCH_DEVICE"]
    cmd = [sys.executable, "-m", "instep", "run", "--tier", "L5", "--profile", device]
    cmd += ["-n", str(workers), "--isolate", "worker", "--run", name, "--db", str(db)]
    cache = empty_cache(tmp / f"instep-{rep}")
    wall, _ = timed(cmd, {**base, **cache}, tmp)
    shown = subprocess.run(
        [sys.executable, "-m", "instep", "show", name, "--format", "json", "--db", str(db)],
        capture_output=True,
        text=True,
        check=True,
        env=base,
        cwd=tmp,
    )
    data = json.loads(shown.stdout)
    matrix = data["run"]["version_matrix"]
    assert matrix["inductor_cache_dir"] == cache["TORCHINDUCTOR_CACHE_DIR"], matrix
    assert matrix["inductor_cache_empty_at_start"] is True, matrix
    counts: dict[str, int] = {}
    for o in data["outcomes"]:
        counts[o["status"]] = counts.get(o["status"], 0) + 1
    return wall, len(data["outcomes"]), ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=60, help="ops of op_db (0: all)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=2, help="runs per side, order alternating")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="and profile")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="instep-opinfo-bench-") as tmpdir:
        tmp = Path(tmpdir)
        base = {
            **os.environ,
            "INSTEP_OPINFO_LIMIT": str(args.limit),
            "INSTEP_OPINFO_DTYPES": "float32",
            "BENCH_DEVICE": args.device,
        }
        base.pop("TORCHINDUCTOR_CACHE_DIR", None)
        base.pop("TRITON_CACHE_DIR", None)
        timed([sys.executable, "-c", WARM_UP], {**base, **empty_cache(tmp / "warm-up")}, tmp)
        walls: dict[str, list[float]] = {"plain": [], "instep": []}
        cases: dict[str, set[int]] = {"plain": set(), "instep": set()}
        for rep in range(args.repeat):
            sides = ["plain", "instep"] if rep % 2 == 0 else ["instep", "plain"]
            for side in sides:
                if side == "plain":
                    wall, n, what = run_plain(base, tmp, rep)
                else:
                    wall, n, what = run_instep(base, tmp, rep, args.workers)
                walls[side].append(wall)
                cases[side].add(n)
                print(f"run {rep + 1} {side:6}: {wall:7.1f} s, {n} cases ({what})", flush=True)
        if len(cases["plain"] | cases["instep"]) != 1:
            raise SystemExit(f"the sides ran different numbers of cases: {cases}")
        n = cases["plain"].pop()
        plain_rate = n * len(walls["plain"]) / sum(walls["plain"]) * 60
        instep_rate = n * len(walls["instep"]) / sum(walls["instep"]) * 60
        print(f"cases per run: {n} on {args.device}, {args.repeat} runs per side, empty caches")
        print(f"plain loop (1 process)           : {plain_rate:6.1f} cases/min")
        print(f"instep run (-n {args.workers}, --isolate worker): {instep_rate:6.1f} cases/min")
        print(
            f"ratio instep/plain = {instep_rate / plain_rate:.2f} (target >= 0.8"
            f"{', per process' if args.workers > 1 else ''})"
        )


if __name__ == "__main__":
    main()
