"""Cold release analysis, one commit against another, on the same inputs (issue #19).

    python benchmarks/impact_cold_ab.py --base 68797d9                 # torch 2.13.0 -> 2.14.1
    python benchmarks/impact_cold_ab.py --base 68797d9 --runs 3 --cpus 2 \\
        --upstream-old OLD.whl --upstream-new NEW.whl --downstream NPU.whl

``--base`` is any revision of this repository (its ``src/`` is taken with ``git archive``),
or a folder that holds such a ``src/`` (a machine without the git history);
the other side is this checkout's ``src/``. Each run is ``instep impact ... --format json``
with a fresh, empty ``INSTEP_CACHE_DIR`` (cold: nothing is remembered) pinned to ``--cpus``
CPUs with ``taskset``, base and head alternated. A pip spec is downloaded once, before
anything is timed, into a cache both sides then read. Before it prints a ratio the script
checks that both sides read the same inputs: the same downstream file count and the same
upstream labels. Their reports may differ (the code differs); their couplings are printed.

Each run is measured as (issue #32): the CPU seconds (user + system) of the whole process
tree (``wait4`` of the top process: every worker and forked child it waited for counts),
the peak RSS of the largest process of the tree (``ru_maxrss`` of the same ``wait4``), and
the peak of the tree's RSS summed over its live processes, sampled with psutil every 0.2 s
(a peak shorter than that can be missed); the load average at the start is printed with
each run, because this machine is shared. Medians over the runs are compared.
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
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent


def base_src(base: str, work: Path) -> Path:
    """The ``src/`` to compare against: ``base`` when it is a folder holding one, else the
    ``src/`` of revision ``base`` of this repository, unpacked under ``work``."""
    given = Path(base) / "src"
    if given.is_dir():
        return given
    (work / "base").mkdir(parents=True, exist_ok=True)
    tar = subprocess.run(
        ["git", "-C", str(ROOT), "archive", base, "src"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(work / "base")], input=tar, check=True)
    return work / "base" / "src"


def _path(src: Path) -> str:
    """``src`` first on the import path, then whatever PYTHONPATH already held."""
    return os.pathsep.join(p for p in (str(src), os.environ.get("PYTHONPATH", "")) if p)


def _tree_peak(pid: int, done: threading.Event, every: float = 0.2) -> list[int]:
    """Sample the summed RSS of ``pid`` and its descendants until ``done``; the peak is
    the one element of the list returned (filled when the sampling ends)."""
    peak = [0]

    def sample() -> None:
        try:
            top = psutil.Process(pid)
        except psutil.Error:
            return
        while not done.is_set():
            total = 0
            for proc in [top, *top.children(recursive=True)]:
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    continue  # ended between the listing and the reading
            peak[0] = max(peak[0], total)
            done.wait(every)

    threading.Thread(target=sample, daemon=True).start()
    return peak


def _one(src: Path, args: argparse.Namespace, wheels: Path, out: Path) -> dict:
    cache = Path(tempfile.mkdtemp(prefix="instep-cold-"))
    (cache / "wheels").symlink_to(wheels, target_is_directory=True)
    env = dict(os.environ, PYTHONPATH=_path(src), INSTEP_CACHE_DIR=str(cache))
    pin = ["taskset", "-c", f"0-{args.cpus - 1}"] if shutil.which("taskset") else []
    cmd = [*pin, sys.executable, "-m", "instep", "impact"]
    cmd += ["--upstream-old", args.upstream_old, "--upstream-new", args.upstream_new]
    cmd += ["--downstream", args.downstream, "--format", "json", "--out", str(out)]
    load = os.getloadavg()[0]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    done = threading.Event()
    peak = _tree_peak(proc.pid, done)
    _, status, usage = os.wait4(proc.pid, 0)
    done.set()
    wall = time.perf_counter() - t
    err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    shutil.rmtree(cache, ignore_errors=True)
    if status:
        sys.exit(f"instep impact failed ({src}): {err.strip().splitlines()[-1:]}")
    report = json.loads(out.read_text(encoding="utf-8"))
    return {
        "wall": wall,
        "user": usage.ru_utime,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss_mib": usage.ru_maxrss / 1024,
        "tree_mib": peak[0] / 2**20,
        "load": load,
        "stages": report["stats"]["timings_s"],
        "files": report["downstream"]["files"],
        "labels": (report["upstream"]["old"], report["upstream"]["new"]),
        "couplings": report["summary"]["couplings"],
        "actions": report["summary"]["by_action"],
    }


def add_ab_arguments(ap: argparse.ArgumentParser) -> None:
    """The options every A/B script here shares: the base, runs, CPUs and the release pair."""
    ap.add_argument(
        "--base", required=True, help="revision of this repository, or a folder holding its src/"
    )
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--upstream-old", default="torch==2.13.0")
    ap.add_argument("--upstream-new", default="torch==2.14.1")
    ap.add_argument("--downstream", default="torch-npu==2.13.0")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_ab_arguments(ap)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="instep-ab-"))
    sides = {"base": base_src(args.base, work), "head": ROOT / "src"}
    wheels = work / "wheels"  # the downloads, shared by every run and done before timing
    warm = work / "warm"
    warm.mkdir()
    (warm / "wheels").symlink_to(wheels.resolve(), target_is_directory=True)
    wheels.mkdir()
    env = dict(os.environ, PYTHONPATH=_path(ROOT / "src"), INSTEP_CACHE_DIR=str(warm))
    for spec in (args.upstream_old, args.upstream_new, args.downstream):
        if not Path(spec).exists():
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import sys; from instep.impact.upstream.sources "
                    "import pip_spec; pip_spec.download_wheel(sys.argv[1], "
                    "__import__('pathlib').Path(sys.argv[2]))",
                    spec,
                    str(warm),
                ],
                env=env,
                check=True,
            )
    got: dict[str, list[dict]] = {"base": [], "head": []}
    for i in range(args.runs):
        for side, src in sides.items():
            r = _one(src, args, wheels, work / f"{side}-{i}.json")
            got[side].append(r)
            st = r["stages"]
            print(
                f"{side} run {i + 1} (load {r['load']:.1f}): CPU {r['cpu']:.1f} s "
                f"(user {r['user']:.1f}), wall {r['wall']:.1f} s, largest process "
                f"{r['rss_mib']:.0f} MiB, tree {r['tree_mib']:.0f} MiB; downstream index "
                f"{st.get('downstream_index')} s || symbol diff {st.get('symbol_diff')} s, "
                f"join {st.get('join')} s; {r['couplings']} couplings {r['actions']}"
            )
    first = got["base"][0]
    for r in got["base"] + got["head"]:
        if (r["files"], r["labels"]) != (first["files"], first["labels"]):
            sys.exit("the two sides read different inputs: no ratio printed")
    for key, what, unit in (
        ("cpu", "CPU (tree)", "s"),
        ("rss_mib", "largest process", "MiB"),
        ("tree_mib", "tree summed", "MiB"),
        ("wall", "wall", "s"),
    ):
        med = {s: statistics.median(r[key] for r in rs) for s, rs in got.items()}
        print(
            f"median {what}: base {med['base']:.1f} {unit}, head {med['head']:.1f} {unit}, "
            f"head/base {med['head'] / med['base']:.2f} "
            f"({args.cpus} CPUs, cold, {args.runs} runs)"
        )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
