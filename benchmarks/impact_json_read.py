"""Reading the impact JSON as ``instep triage --impact`` does (read, then index for
attribution), one commit against another (issue #32: the typed reader of
``instep/impact_contract.py`` against the string-keyed one before it).

    python benchmarks/impact_json_read.py --base 74580ac --report impact.json

``--report`` is a report ``instep impact --format json`` wrote (e.g. of torch 2.13.0 ->
2.14.1 on torch-npu 2.13.0). Each side gets the same bytes but for the ``schema`` line,
which names the version that side reads (``--base-schema``, ``instep.impact/1`` before the
contract). Each side runs in its own process (``PYTHONPATH``), reads and indexes the
report ``--repeat`` times with no cache (the index is built from the JSON each time), and
times each in CPU seconds (``time.process_time``). Sides alternate ``--rounds`` times.
Before it prints a ratio the script checks that both sides built the same index: the same
number of keys in each of its tables.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from impact_cold_ab import base_src

ROOT = Path(__file__).resolve().parent.parent


def child(args: argparse.Namespace) -> None:
    """One side: ``--repeat`` timed reads and indexings; one JSON line out."""
    from instep.triage import culprits

    try:
        from instep.impact_contract import read_report

        def index(path: str):  # type: ignore[no-untyped-def]
            return culprits.CulpritIndex(read_report(path), path)
    except ImportError:  # before the contract
        from instep.impact_json import load_impact_json

        def index(path: str):  # type: ignore[no-untyped-def]
            return culprits.ImpactReport(load_impact_json(path), path)

    cpu = []
    for _ in range(args.repeat):
        t = time.process_time()
        built = index(args.report)
        cpu.append(time.process_time() - t)
    tables = {name: len(values) for name, values in built._tables.items()}
    print(json.dumps({"cpu_s": cpu, "tables": tables}))


def side(src: Path, report: Path, args: argparse.Namespace) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--repeat", str(args.repeat)]
    cmd += ["--report", str(report)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT / "benchmarks")
    if done.returncode != 0:
        sys.exit(f"{src}: failed\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--base", help="revision or folder holding src/ (the 'before' side)")
    ap.add_argument("--report", required=True, help="an instep impact JSON report")
    ap.add_argument("--base-schema", default="instep.impact/1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    if not args.base:
        ap.error("--base REV is required")
    work = Path(tempfile.mkdtemp(prefix="instep-json-read-"))
    text = Path(args.report).read_text(encoding="utf-8")
    head_schema = re.search(r'^ "schema": "([^"]+)"', text, re.MULTILINE)
    if head_schema is None:
        sys.exit(f"{args.report}: no schema line")
    sides = {"base": base_src(args.base, work), "head": ROOT / "src"}
    reports = {"base": work / "base.json", "head": work / "head.json"}
    reports["base"].write_text(
        text.replace(head_schema.group(0), f' "schema": "{args.base_schema}"', 1), "utf-8"
    )
    reports["head"].write_text(text, encoding="utf-8")
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    tables: dict[str, list[dict]] = {name: [] for name in sides}
    for r in range(args.rounds):
        for name in sides if r % 2 == 0 else reversed(list(sides)):
            got = side(sides[name], reports[name], args)
            cpu[name] += got["cpu_s"]
            tables[name].append(got["tables"])
            print(f"round {r + 1} {name}: {statistics.median(got['cpu_s']):.3f} CPU-s (median)")
    every = [t for ts in tables.values() for t in ts]
    if any(t != every[0] for t in every):
        sys.exit(f"the two sides built different indexes: {tables}; no ratio")
    base, head = statistics.median(cpu["base"]), statistics.median(cpu["head"])
    print(f"same index on both sides: {every[0]}")
    print(f"median read + index: base {base:.3f} CPU-s, head {head:.3f} CPU-s,", end=" ")
    print(f"head/base {head / base:.3f}")


if __name__ == "__main__":
    main()
