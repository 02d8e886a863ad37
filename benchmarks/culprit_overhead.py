"""Benchmark: what ``instep triage RUN --impact REPORT`` adds to ``instep triage RUN``
(target <= 5 % on a run of 1,000 outcomes).

The run: a generated suite of ``--cases`` quick cases (default 1,000), three in four
failing with chained exceptions whose frames pass through files laid out as
``torch/_inductor/graph.py``, ``scheduler.py`` and ``lowering.py`` (loaded under other module
names, so no torch is imported) and whose messages name functions the way Python's
``TypeError``s do: the attribution does its real lookups (frames by file name against the
report's changes and couplings, names in messages). The report: the real release report
torch 2.13.0 -> 2.14.1 against torch-npu 2.13.0 (``--report FILE``, else made here with
``instep impact``; 13 MB of JSON, 1,437 units, 9,593 couplings), so loading it is counted.

Both commands run once untimed with ``--format json`` (each writes what it stores: batch
ids, culprits; both must give the same batches, ids and members), then alternate
``--repeat`` times as a person runs them (the table), each table checked to show every
batch. Wall time of the whole command, Python start included; the indexed report is
cached by its digest after the first call, as ``instep triage`` does. The CPU time of each
command (user + system, its own and its children's) is printed too: on a shared machine
under load it moves less than the wall time; the verdict is on the wall time.

Usage: python benchmarks/culprit_overhead.py [--cases 1000] [--repeat 3] [--report FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from subprocess_timing import timed_output

UPSTREAM = {
    "graph.py": """
class GraphLowering:
    def call_function(self, i):
        return _lowering(i)

    def run(self, i):
        return self.call_function(i)


def _lowering(i):
    if i % 3 == 0:
        raise TypeError(f"npu_op_{i % 7}() got an unexpected keyword argument 'implicit'")
    raise TypeError(f"NPUScheduling.codegen_{i % 5}() takes 2 positional arguments but 3 were"
                    " given")
""",
    "scheduler.py": """
class Scheduler:
    def codegen(self, graph, i):
        try:
            return graph.run(i)
        except TypeError as exc:
            raise RuntimeError(f"scheduling failed for node {i}") from exc
""",
}

SUITE = """
import importlib.util
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def _load(name):
    spec = importlib.util.spec_from_file_location(
        "bench_" + name, HERE / "up" / "torch" / "_inductor" / f"{{name}}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


graph, scheduler = _load("graph"), _load("scheduler")


@pytest.mark.parametrize("i", range({cases}))
def test_case(i):
    if i % 4 == 0:
        return
    scheduler.Scheduler().codegen(graph.GraphLowering(), i)
"""


def _report(path: str | None, tmp: Path) -> Path:
    if path:
        return Path(path)
    out = tmp / "impact.json"
    cmd = [sys.executable, "-m", "instep", "impact", "--upstream-old", "torch==2.13.0"]
    cmd += ["--upstream-new", "torch==2.14.1", "--downstream", "torch-npu==2.13.0"]
    subprocess.run([*cmd, "--format", "json", "--out", str(out)], check=True, capture_output=True)
    return out


def _batches(stdout: str) -> list[tuple[str, tuple[str, ...]]]:
    data = json.loads(stdout)
    return sorted((b["batch"], tuple(sorted(b["cases"]))) for b in data["batches"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--report", help="an instep impact JSON report [made here]")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="instep-culprit-bench-") as tmpdir:
        tmp = Path(tmpdir)
        report = _report(args.report, tmp)
        for name, text in UPSTREAM.items():
            path = tmp / "up" / "torch" / "_inductor" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        (tmp / "test_suite.py").write_text(SUITE.format(cases=args.cases), encoding="utf-8")
        db = str(tmp / "bench.db")
        run = [sys.executable, "-m", "instep", "run", "test_suite.py", "--profile", "npu"]
        run += ["-n", "2", "--isolate", "worker", "--preimport", "none", "--run", "r"]
        proc = subprocess.run([*run, "--db", db], cwd=tmp, capture_output=True, text=True)
        if proc.returncode != 1:
            sys.exit(f"the run should fail three cases in four: {proc.stderr[-2000:]}")
        plain = [sys.executable, "-m", "instep", "triage", "r", "--db", db]
        sides = {"triage": plain, "triage --impact": [*plain, "--impact", str(report)]}
        batches = {}
        for side, cmd in sides.items():  # untimed: each stores what it stores once
            _, out = timed_output([*cmd, "--format", "json"], tmp)
            batches[side] = _batches(out)
            if side == "triage --impact":
                named = sum(1 for c in json.loads(out)["culprits"].values() if c)
        if batches["triage"] != batches["triage --impact"]:
            sys.exit("the two commands gave different batches: no ratio over different work")
        walls: dict[str, list[float]] = {side: [] for side in sides}
        cpus: dict[str, list[float]] = {side: [] for side in sides}
        for rep in range(args.repeat):
            order = list(sides) if rep % 2 == 0 else list(sides)[::-1]
            for side in order:
                before = os.times()
                wall, out = timed_output(sides[side], tmp)  # the table a person reads
                after = os.times()
                cpus[side].append(
                    after.children_user
                    + after.children_system
                    - before.children_user
                    - before.children_system
                )
                if not all(batch in out for batch, _ in batches[side]):
                    sys.exit(f"{side}: a batch is missing from the table")
                walls[side].append(wall)
        failing = sum(len(members) for _, members in batches["triage"])
        print(f"run: {args.cases} outcomes, {failing} failing, {len(batches['triage'])} batches")
        print(f"report: {report} ({report.stat().st_size / 1e6:.1f} MB); {named} cases attributed")
        best = {side: min(w) for side, w in walls.items()}
        for side, w in walls.items():
            print(f"{side:16}: best {best[side]:.2f} s of {', '.join(f'{x:.2f}' for x in w)}")
        cpu = {side: min(c) for side, c in cpus.items()}
        print("cpu (best): " + ", ".join(f"{side} {c:.2f} s" for side, c in cpu.items()))
        extra = best["triage --impact"] / best["triage"] - 1
        cpu_extra = cpu["triage --impact"] / cpu["triage"] - 1
        print(f"attribution adds {extra:.1%} to instep triage (target <= 5 %); cpu {cpu_extra:.1%}")


if __name__ == "__main__":
    main()
