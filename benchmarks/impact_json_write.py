"""Writing the impact JSON of a real release report, one commit against another (issue #32:
the writer goes through the typed contract, ``instep/impact_contract.py``).

    python benchmarks/impact_json_write.py --base 74580ac          # torch 2.13.0 -> 2.14.1
    python benchmarks/impact_json_write.py --base 74580ac --rounds 3 --repeat 5 \\
        --upstream-old OLD.whl --upstream-new NEW.whl --downstream NPU.whl

``--base`` is a revision of this repository (its ``src/`` is taken with ``git archive``) or
a folder holding such a ``src/``; the other side is this checkout's ``src/``. Each side runs
in its own process: it gets the report with ``analyse`` (the first call of a side is a cold
analysis; the report memo of ``--cache-dir``, shared by both sides, makes the later ones
cheap), then writes the report's JSON ``--repeat`` times, each write timed in CPU seconds
(``time.process_time``: user + system of the process, less disturbed than wall time on a
shared machine). Sides alternate ``--rounds`` times. Before it prints a ratio the script
checks that both sides wrote the same document: the same bytes once ``generated_at``,
``stats.timings_s``, ``stats.report_memo`` and the ``schema`` line are set aside.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from impact_cold_ab import base_src

ROOT = Path(__file__).resolve().parent.parent
PAIR = ("torch==2.13.0", "torch==2.14.1", "torch-npu==2.13.0")
SET_ASIDE = ("generated_at", "schema")  # top-level lines that differ by run or by version


def comparable(text: str) -> bytes:
    """The JSON text less what differs from run to run or by schema version only."""
    out = []
    for line in text.splitlines():
        key = line[2 : line.find('"', 2)] if line.startswith(' "') else None
        if key in SET_ASIDE:
            continue
        if key == "stats":
            stats = json.loads(line.split(": ", 1)[1].rstrip(","))
            stats.pop("timings_s", None)
            stats.pop("report_memo", None)
            line = json.dumps(stats, ensure_ascii=False, sort_keys=True)
        out.append(line)
    return "\n".join(out).encode("utf-8")


def child(args: argparse.Namespace) -> None:
    """One side: the report (memoised), then ``--repeat`` timed writes; one JSON line out."""
    from instep.impact.analysis import ImpactRequest, analyse
    from instep.impact.export.json_doc import render_json

    req = ImpactRequest(
        upstream_old=args.upstream_old,
        upstream_new=args.upstream_new,
        downstream=args.downstream,
        cache_dir=Path(args.cache_dir),
    )
    wall = time.perf_counter()
    report = analyse(req)
    analyse_s = time.perf_counter() - wall
    gc.freeze()  # as instep impact does before it writes (cli/impact_cmd.py)
    cpu = []
    for _ in range(args.repeat):
        t = time.process_time()
        text = render_json(report)
        cpu.append(time.process_time() - t)
    digest = hashlib.sha256(comparable(text)).hexdigest()
    print(
        json.dumps(
            {"cpu_s": cpu, "digest": digest, "bytes": len(text.encode()), "analyse_s": analyse_s}
        )
    )


def side(src: Path, args: argparse.Namespace) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--repeat", str(args.repeat)]
    cmd += ["--upstream-old", args.upstream_old, "--upstream-new", args.upstream_new]
    cmd += ["--downstream", args.downstream, "--cache-dir", args.cache_dir]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT / "benchmarks")
    if done.returncode != 0:
        sys.exit(f"{src}: failed\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--base", help="revision or folder holding src/ (the 'before' side)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5, help="writes per side per round")
    ap.add_argument("--upstream-old", default=PAIR[0])
    ap.add_argument("--upstream-new", default=PAIR[1])
    ap.add_argument("--downstream", default=PAIR[2])
    ap.add_argument("--cache-dir", default=None, help="default: a fresh temporary folder")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    if not args.base:
        ap.error("--base REV is required")
    work = Path(tempfile.mkdtemp(prefix="instep-json-write-"))
    args.cache_dir = args.cache_dir or str(work / "cache")
    sides = {"base": base_src(args.base, work), "head": ROOT / "src"}
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    seen: dict[str, set[str]] = {name: set() for name in sides}
    for r in range(args.rounds):
        for name, src in sides.items() if r % 2 == 0 else reversed(sides.items()):
            got = side(src, args)
            cpu[name] += got["cpu_s"]
            seen[name].add(got["digest"])
            print(
                f"round {r + 1} {name}: write {statistics.median(got['cpu_s']):.3f} CPU-s"
                f" (median of {args.repeat}), {got['bytes'] / 1e6:.1f} MB,"
                f" analyse {got['analyse_s']:.1f} s wall"
            )
    if len(seen["base"] | seen["head"]) != 1:
        sys.exit(f"the two sides wrote different documents: {seen}; no ratio")
    base, head = statistics.median(cpu["base"]), statistics.median(cpu["head"])
    print(f"same document on both sides ({next(iter(seen['head']))[:16]})")
    print(
        f"median write: base {base:.3f} CPU-s, head {head:.3f} CPU-s, head/base {head / base:.3f}"
    )


if __name__ == "__main__":
    main()
