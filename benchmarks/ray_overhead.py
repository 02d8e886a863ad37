"""Ray overhead: ``instep run`` with the local pool vs ``--engine ray`` on the same machine.

The same generated suite of quick cases (200 by default: eager torch ops on small
tensors, or plain Python with ``--plain``) runs with the local worker pool and with Ray
tasks, both with ``--isolate worker`` and ``--isolate case``, in the same invocation. A
one-node Ray cluster is started first (its start-up is printed apart: a team's cluster
is long-lived) with as many CPUs as local workers, so both engines run the same number
of cases at once. Prints wall times, the ratio Ray/local and Ray's overhead per case in
ms. Each run must have stored a passing outcome for every case before a ratio is
printed. Needs ray (``pip install -e '.[ray]'``) and, without ``--plain``, torch. A benchmark,
not a test.

    python benchmarks/ray_overhead.py [--cases 200] [--workers 2] [--repeat 1] [--plain]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

from runner_overhead import SUITE as TORCH_SUITE  # the same quick torch cases
from subprocess_timing import check_same_work, instep_passed, timed

PLAIN_SUITE = """
import pytest


@pytest.mark.parametrize("i", range({cases}))
def test_quick(i):
    assert sum(range(i + 1000)) > 0
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1, help="best of N for each mode")
    parser.add_argument("--plain", action="store_true", help="cases without torch")
    args = parser.parse_args()
    needed = ["ray"] if args.plain else ["ray", "torch"]
    for module in needed:
        if importlib.util.find_spec(module) is None:
            sys.exit(f"this benchmark needs {module}: pip install -e '.[ray]' (and torch)")
    from ray.cluster_utils import Cluster

    began = time.perf_counter()
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": args.workers, "include_dashboard": False}
    )
    cluster_s = time.perf_counter() - began
    suite = (PLAIN_SUITE if args.plain else TORCH_SUITE).format(cases=args.cases)
    base = [sys.executable, "-m", "instep", "run", "test_quick.py", "--profile", "cpu"]
    if args.plain:
        base += ["--preimport", "none"]
    engines = {
        "local": ["--workers", str(args.workers)],
        "ray": ["--engine", "ray", "--address", cluster.address],
    }
    times: dict[tuple[str, str], float] = {}
    try:
        for isolate in ("worker", "case"):
            for engine, extra in engines.items():
                best = float("inf")
                for _ in range(args.repeat):
                    with tempfile.TemporaryDirectory(prefix="instep-bench-") as tmp:
                        root = Path(tmp)
                        (root / "test_quick.py").write_text(suite)
                        argv = [*base, *extra, "--isolate", isolate, "--db", str(root / "b.db")]
                        best = min(best, timed(argv, root))
                        check_same_work(
                            f"{engine} {isolate}", instep_passed(root / "b.db"), args.cases
                        )
                times[(isolate, engine)] = best
    finally:
        cluster.shutdown()
    kind = "plain Python" if args.plain else "quick torch"
    print(
        f"{args.cases} {kind} cases, {args.workers} workers / Ray CPUs, {os.cpu_count()} CPUs;"
        f" one-node Ray cluster started in {cluster_s:.1f} s (not counted below)"
    )
    print(f"{'isolation':10} {'local s':>8} {'ray s':>8} {'ratio':>7} {'Ray overhead ms/case':>21}")
    for isolate in ("worker", "case"):
        local, ray = times[(isolate, "local")], times[(isolate, "ray")]
        over = (ray - local) / args.cases * 1000
        print(f"{isolate:10} {local:8.2f} {ray:8.2f} {ray / local:7.2f} {over:21.1f}")


if __name__ == "__main__":
    main()
