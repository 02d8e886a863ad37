"""Benchmark: what classification adds to a run (target < 5 %), measured in the same run.

Runs a generated suite of quick cases -- a quarter passing, the rest failing with chained
exceptions of different shapes (messages of seed 000's signatures, deep frames) -- with
`instep run --profile npu`, which classifies every non-passing outcome as it is stored.
Then classifies the stored outcomes again in-process with the same classifier, timing only
that, and prints the classification time as a share of the run's wall time. Before it
prints, it checks the run stored every case with the suite's failures, and that the timed
classification gives each failure the layer the run stored (the same work, done twice).
(`--bisect` costs are printed by `instep run --bisect` itself, per run.)

Usage: python benchmarks/triage_overhead.py [--cases 400] [--workers 2]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MESSAGES = [
    "KeyError: 'cpu'",
    "RuntimeError: AclNN_Parameter_Error(EZ1001): Tensor selfRef expected dtype is DT_FLOAT"
    " but found DT_FLOAT16.",
    "RuntimeError: aclrtLaunchKernelWithHostArgs failed: 507035",
    "IndexError: list assignment index out of range",
    "AssertionError: Tensor-likes are not close!\n\nMismatched elements: 5 / 10 (50.0%)",
    "TypeError: Cannot cast u0 >= 0 to number",
]

SUITE = """
import pytest

MESSAGES = {messages!r}


def _deep(n, msg):
    if n == 0:
        raise RuntimeError(msg)
    return _deep(n - 1, msg)


@pytest.mark.parametrize("i", range({cases}))
def test_case(i):
    if i % 4 == 0:
        return
    try:
        _deep(20 + i % 7, MESSAGES[i % len(MESSAGES)])
    except RuntimeError as exc:
        raise ValueError(f"wrapped failure {{i}}") from exc
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=400)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    from instep.profiles import load_profile
    from instep.store import Store, outcome_dict
    from instep.triage.classifier import Classifier

    with tempfile.TemporaryDirectory(prefix="instep-triage-bench-") as tmpdir:
        tmp = Path(tmpdir)
        (tmp / "test_suite.py").write_text(
            SUITE.format(messages=MESSAGES, cases=args.cases), encoding="utf-8"
        )
        db = tmp / "bench.db"
        start = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "instep",
                "run",
                "test_suite.py",
                "--profile",
                "npu",
                "-n",
                str(args.workers),
                "--isolate",
                "worker",
                "--preimport",
                "none",
                "--run",
                "bench",
                "--db",
                str(db),
            ],
            cwd=tmp,
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - start
        if proc.returncode not in (0, 1):
            raise SystemExit(proc.stderr[-2000:])
        store = Store(str(db))
        run = store.get_run("bench")
        rows = [outcome_dict(o) for o in store.outcomes(run.id)]
        failing = [r for r in rows if r["status"] not in ("passed", "skipped")]
        # the same work as the run: every case stored, the suite's failures and no others
        expected_failing = args.cases - len(range(0, args.cases, 4))
        if len(rows) != args.cases or len(failing) != expected_failing:
            raise SystemExit(
                f"the run stored {len(rows)} cases ({len(failing)} failing); the suite has "
                f"{args.cases} ({expected_failing} failing): no figure"
            )
        classifier = Classifier(load_profile("npu"))
        t0 = time.perf_counter()
        results = [classifier.classify(r) for r in failing]
        spent = time.perf_counter() - t0
        layers: dict[str, int] = {}
        for r, again in zip(failing, results, strict=True):
            if again is None or str(again.layer) != str(r.get("layer")):
                raise SystemExit(f"{r['nodeid']}: stored layer {r.get('layer')}, now {again}")
            layers[str(r.get("layer"))] = layers.get(str(r.get("layer")), 0) + 1
        print(f"run: {len(rows)} cases ({len(failing)} failing) in {wall:.2f} s wall")
        print(
            f"classification: {spent * 1000:.0f} ms in all, "
            f"{spent / max(1, len(failing)) * 1000:.2f} ms per failing case"
        )
        print(f"share of the run = {spent / wall:.1%} (target < 5 %); layers stored: {layers}")


if __name__ == "__main__":
    main()
