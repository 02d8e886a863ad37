"""The join's CPU time, one revision against this checkout, and their reports compared.

    python benchmarks/impact_join_ab.py --base d0062f8               # torch 2.13.0 -> 2.14.1
    python benchmarks/impact_join_ab.py --base d0062f8 --runs 3 --wheels ~/.cache/instep/wheels

Each run is a cold ``instep impact ... --format json`` (a fresh, empty
``INSTEP_CACHE_DIR`` whose ``wheels/`` links to ``--wheels``, so nothing is downloaded)
in a child pinned to ``--cpus`` CPUs, base and head alternated. The child measures its own
CPU time (``time.process_time()``) around ``_Analysis.join``, so other jobs on a shared
machine move it far less than wall time, and each join pass run in a forked child
(``forked_passes``: fork detection, hook names) measures its own CPU there (its pools'
excluded); they are printed apart.
The script then checks that every report equals the first base report, ``generated_at``
and ``stats.timings_s`` apart, and prints where they differ: a change meant to be faster
only must leave the report identical. Pip specs must already be in ``--wheels`` (run the
analysis once); ``--base`` is a revision (``git archive``) or a folder holding ``src/``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from impact_cold_ab import add_ab_arguments, base_src  # a sibling script: run from benchmarks/

ROOT = Path(__file__).resolve().parent.parent


_PASS_IN_CHILD = None  # forked_passes._run, wrapped by _timed_pass
_CHILD_OUT = ""  # the report's path: each forked pass writes its CPU beside it


def _timed_pass(name: str):
    """A forked pass, in its child: its CPU goes to a file beside the report."""
    start = time.process_time()
    try:
        return _PASS_IN_CHILD(name)
    finally:
        Path(f"{_CHILD_OUT}.child-cpu-{name}").write_text(str(time.process_time() - start))


def _child(out: str, spec: list[str]) -> None:
    """Run the analysis in this process, timing the join; print the figures as JSON."""
    import resource

    import instep.impact.analysis as analysis
    from instep.cli import run
    from instep.impact.join import forked_passes

    join = analysis._Analysis.join
    got: dict[str, float] = {}
    global _PASS_IN_CHILD, _CHILD_OUT
    _PASS_IN_CHILD, _CHILD_OUT = forked_passes._run, out
    forked_passes._run = _timed_pass  # by name: the pool pickles it, the fork finds it

    def timed(self, units, down):
        start = time.process_time()
        try:
            return join(self, units, down)
        finally:
            got["join_cpu"] = time.process_time() - start

    analysis._Analysis.join = timed  # type: ignore[method-assign]
    start = time.process_time()
    rc = run(["impact", *spec, "--format", "json", "--out", out])
    got["total_cpu"] = time.process_time() - start
    got["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = {
        p.name.split(".child-cpu-", 1)[1]: float(p.read_text())
        for p in Path(out).parent.glob(Path(out).name + ".child-cpu-*")
    }
    print(json.dumps({"rc": rc, **got, "children_cpu": children}))


def _one(src: Path, args: argparse.Namespace, out: Path) -> dict:
    cache = Path(tempfile.mkdtemp(prefix="instep-join-"))
    (cache / "wheels").symlink_to(Path(args.wheels).expanduser(), target_is_directory=True)
    env = dict(os.environ, PYTHONPATH=str(src), INSTEP_CACHE_DIR=str(cache))
    pin = ["taskset", "-c", f"0-{args.cpus - 1}"] if shutil.which("taskset") else []
    spec = ["--upstream-old", args.upstream_old, "--upstream-new", args.upstream_new]
    spec += ["--downstream", args.downstream]
    cmd = [*pin, sys.executable, __file__, "--child", str(out), "--", *spec]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    shutil.rmtree(cache, ignore_errors=True)
    if proc.returncode:
        sys.exit(f"instep impact failed ({src}): {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _comparable(path: Path) -> dict:
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc.pop("generated_at", None)
    doc.get("stats", {}).pop("timings_s", None)
    return doc


def _differences(a, b, where: str = "$") -> list[str]:
    if type(a) is not type(b):
        return [f"{where}: {type(a).__name__} != {type(b).__name__}"]
    if isinstance(a, dict):
        out = [f"{where}.{k}: only on one side" for k in a.keys() ^ b.keys()]
        for k in a.keys() & b.keys():
            out += _differences(a[k], b[k], f"{where}.{k}")
        return out
    if isinstance(a, list):
        out = [f"{where}: {len(a)} != {len(b)} items"] if len(a) != len(b) else []
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            out += _differences(x, y, f"{where}[{i}]")
        return out
    return [] if a == b else [f"{where}: {a!r:.80} != {b!r:.80}"]


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[4:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_ab_arguments(ap)
    ap.add_argument("--wheels", default="~/.cache/instep/wheels")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="instep-join-ab-"))
    sides = {"base": base_src(args.base, work), "head": ROOT / "src"}
    got: dict[str, list[dict]] = {"base": [], "head": []}
    reports: list[tuple[str, Path]] = []
    for i in range(args.runs):
        for side, src in sides.items() if i % 2 == 0 else reversed(sides.items()):
            out = work / f"{side}-{i}.json"
            r = _one(src, args, out)
            r["join_wall"] = json.loads(out.read_text("utf-8"))["stats"]["timings_s"]["join"]
            got[side].append(r)
            reports.append((f"{side} run {i + 1}", out))
            load = os.getloadavg()[0]
            kids = ", ".join(f"{k} {v:.2f} s" for k, v in sorted(r["children_cpu"].items()))
            print(
                f"{side} run {i + 1}: join {r['join_cpu']:.2f} s CPU (forked passes' CPU: "
                f"{kids or 'none forked'}), {r['join_wall']:.2f} s wall, whole analysis "
                f"{r['total_cpu']:.1f} s CPU (this process), peak RSS {r['rss_mib']:.0f} MiB, "
                f"load {load:.1f}",
                flush=True,
            )
    first = _comparable(next(p for n, p in reports if n.startswith("base")))
    same = True
    for name, path in reports:
        diff = _differences(first, _comparable(path))
        if diff:
            same = False
            print(f"{name}: the report differs from base run 1 at {len(diff)} place(s):")
            print("\n".join(f"  {d}" for d in diff[:20]))
    med = {s: statistics.median(r["join_cpu"] for r in rs) for s, rs in got.items()}
    wall = {s: statistics.median(r["join_wall"] for r in rs) for s, rs in got.items()}
    print(
        f"join CPU, median: base {med['base']:.2f} s, head {med['head']:.2f} s, "
        f"head/base {med['head'] / med['base']:.2f}; join wall, median: base "
        f"{wall['base']:.2f} s, head {wall['head']:.2f} s, head/base "
        f"{wall['head'] / wall['base']:.2f}; reports " + ("identical" if same else "DIFFER")
    )
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
