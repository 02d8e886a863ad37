"""Runner overhead: ``pytest -n 2`` vs ``instep run --workers 2`` (worker and case isolation).

The same generated suite of quick real torch cases (eager ops on small tensors, 240 by
default) runs three ways, each in a fresh temp dir and store:

  1. ``python -m pytest -n 2`` (pytest-xdist, no isolation: the baseline)
  2. ``instep run --workers 2 --isolate worker`` (target ratio <= 1.15)
  3. ``instep run --workers 2 --isolate case`` (a fork per case; target ratio <= 1.5)

and prints wall times, ratios to the baseline and the overhead per case in ms. Every run
must have passed all the cases (pytest's summary, instep's stored outcomes) before a ratio
is printed; over --repeat the order of the modes alternates. Needs
torch and pytest-xdist (``pip install -e '.[bench]'``). A benchmark, not a test.

    python benchmarks/runner_overhead.py [--cases 240] [--workers 2] [--repeat 1]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

from subprocess_timing import check_same_work, instep_passed, pytest_passed, timed_output

SUITE = """
import pytest
import torch

OPS = [
    lambda a, b: a + b,
    lambda a, b: a * b,
    lambda a, b: a @ b.T,
    lambda a, b: torch.relu(a - b),
    lambda a, b: torch.softmax(a, dim=-1) + b,
    lambda a, b: torch.cat([a, b]).sum(0),
    lambda a, b: torch.where(a > b, a, b),
    lambda a, b: (a.exp() / (1 + b.abs())).mean(),
]


@pytest.mark.parametrize("i", range({cases}))
def test_op(i):
    torch.manual_seed(i)
    a, b = torch.randn(16, 16), torch.randn(16, 16)
    op = OPS[i % len(OPS)]
    torch.testing.assert_close(op(a, b), op(a.clone(), b.clone()))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=240)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1, help="best of N per mode, alternating")
    args = parser.parse_args()
    for needed in ("torch", "xdist"):
        if importlib.util.find_spec(needed) is None:
            sys.exit(f"this benchmark needs {needed}: pip install -e '.[bench]' and torch")
    w = str(args.workers)
    modes = {
        f"pytest -n {w}": [sys.executable, "-m", "pytest", "-q", "-n", w, "-p", "no:cacheprovider"],
        "instep --isolate worker": [
            sys.executable,
            "-m",
            "instep",
            "run",
            "--workers",
            w,
            "--isolate",
            "worker",
            "--profile",
            "cpu",
        ],
        "instep --isolate case": [
            sys.executable,
            "-m",
            "instep",
            "run",
            "--workers",
            w,
            "--isolate",
            "case",
            "--profile",
            "cpu",
        ],
    }
    times: dict[str, float] = dict.fromkeys(modes, float("inf"))
    for rep in range(args.repeat):  # best of N per mode, the order alternating
        for name in modes if rep % 2 == 0 else reversed(list(modes)):
            with tempfile.TemporaryDirectory(prefix="instep-bench-") as tmp:
                root = Path(tmp)
                (root / "test_quick_torch.py").write_text(SUITE.format(cases=args.cases))
                extra = ["test_quick_torch.py"]
                if "instep" in name:
                    extra += ["--db", str(root / "bench.db")]
                wall, out = timed_output([*modes[name], *extra], root)
                passed = (
                    instep_passed(root / "bench.db") if "instep" in name else pytest_passed(out)
                )
                check_same_work(name, passed, args.cases)
            times[name] = min(times[name], wall)
    base = times[f"pytest -n {w}"]
    print(f"{args.cases} quick torch cases, {args.workers} workers, {os.cpu_count()} CPUs")
    print(f"{'mode':28} {'wall s':>8} {'ratio':>7} {'overhead ms/case':>17}")
    for name, wall in times.items():
        over = (wall - base) / args.cases * 1000
        print(f"{name:28} {wall:8.2f} {wall / base:7.2f} {over:17.1f}")
    print("targets: --isolate worker <= 1.15, --isolate case <= 1.5")


if __name__ == "__main__":
    main()
