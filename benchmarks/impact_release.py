"""Benchmark: `instep impact` on the torch 2.13.0 -> 2.14.1 release vs griffe, same run.

Measures, each in its own child process (wall seconds and peak RSS from wait4):
  1. instep cold: release diff torch==2.13.0 -> torch==2.14.1 against torch-npu==2.13.0,
     empty analysis cache (wheels already downloaded, so pip is not timed);
  2. instep warm: the same with the cache from run 1;
  3. griffe: load torch._inductor from both versions and `find_breaking_changes`.
Prints the figures and the ratios (targets: cold <= 20 s, >= 5x faster than griffe,
warm <= 3 s, peak RSS <= 2 GB). Needs `pip install -e .[bench]` (griffe) and the wheels
reachable by `pip download` (they lie on local disk here).

Also measures per-commit mode on a generated git history with torch-sized files
(target >= 20 commits/s).

Usage: python benchmarks/impact_release.py [--commits 60] [--skip-release]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

OLD, NEW, DOWN = "torch==2.13.0", "torch==2.14.1", "torch-npu==2.13.0"


def run_child(code: str, env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Run python -c CODE; return (wall s, peak RSS MiB, stdout)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
        text=True,
    )
    out_chunks = []
    assert proc.stdout is not None
    for line in proc.stdout:
        out_chunks.append(line)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"child failed ({proc.returncode}):\n{err[-3000:]}")
    return wall, usage.ru_maxrss / 1024, "".join(out_chunks)


INSTEP = """
from pathlib import Path
from instep.impact.analysis import ImpactRequest, analyse
r = analyse(ImpactRequest(downstream={down!r}, upstream_old={old!r}, upstream_new={new!r},
                          cache_dir=Path({cache!r}), jobs=2))
s = r.summary()
print("units", s["units"], "couplings", s["couplings"], s["by_action"], r.stats["timings_s"])
"""

GRIFFE = """
import griffe
old = griffe.load("torch._inductor", search_paths=[{old!r}], resolve_aliases=False)
new = griffe.load("torch._inductor", search_paths=[{new!r}], resolve_aliases=False)
n = sum(1 for _ in griffe.find_breaking_changes(old, new))
print("griffe breakages", n)
"""


def wheel_path(spec: str, cache: Path) -> Path:
    from instep.impact.sources import download_wheel

    return download_wheel(spec, cache)


def extract(wheel: Path, dest: Path) -> Path:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        members = [m for m in names if m.startswith("torch/_inductor/") and m.endswith(".py")]
        members.append("torch/__init__.py")
        for m in members:
            if m in names:
                zf.extract(m, dest)
    return dest


def release(tmp: Path) -> None:
    wheels = tmp / "wheels-cache"
    for spec in (OLD, NEW, DOWN):  # download outside the timed runs
        wheel_path(spec, wheels)
    cache = tmp / "cache"
    shutil.copytree(wheels / "wheels", cache / "wheels")
    code = INSTEP.format(down=DOWN, old=OLD, new=NEW, cache=str(cache))
    cold, cold_rss, out = run_child(code)
    print(f"instep cold : {cold:6.2f} s  peak RSS {cold_rss:7.0f} MiB   {out.strip()}")
    warm, warm_rss, out = run_child(code)
    print(f"instep warm : {warm:6.2f} s  peak RSS {warm_rss:7.0f} MiB")
    old_root = extract(wheel_path(OLD, wheels), tmp / "old")
    new_root = extract(wheel_path(NEW, wheels), tmp / "new")
    g, g_rss, out = run_child(GRIFFE.format(old=str(old_root), new=str(new_root)))
    print(f"griffe      : {g:6.2f} s  peak RSS {g_rss:7.0f} MiB   {out.strip()}")
    print(
        f"ratio griffe/instep-cold = {g / cold:.2f}x (target >= 5x); "
        f"cold {'OK' if cold <= 20 else 'SLOW'} (<= 20 s); warm {'OK' if warm <= 3 else 'SLOW'} "
        f"(<= 3 s); RSS {'OK' if max(cold_rss, warm_rss) <= 2048 else 'HIGH'} (<= 2 GB)"
    )


def per_commit(tmp: Path, commits: int) -> None:
    """A generated history: 6 files of ~6k lines; each commit edits 1-3 functions."""
    import random

    repo = tmp / "hist"
    repo.mkdir()
    git = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    git("config", "user.email", "b@x")
    git("config", "user.name", "bench")
    rng = random.Random(0)
    files = {}
    for f in range(6):
        body = []
        for i in range(600):
            body.append(
                f"def fn_{f}_{i}(x, y=1):\n    z = x + y * {i}\n"
                f"    for k in range(3):\n        z += k\n    return z\n\n"
            )
        files[f] = body
        path = repo / "torch" / "_inductor" / f"mod{f}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(body))
    git("add", "-A")
    git("commit", "-qm", "base")
    git("tag", "base")
    for c in range(commits):
        for f in rng.sample(range(6), rng.randint(1, 3)):
            i = rng.randrange(600)
            files[f][i] = files[f][i].replace("return z", f"return z + {c}")
            (repo / "torch" / "_inductor" / f"mod{f}.py").write_text("".join(files[f]))
        git("commit", "-qam", f"change {c} (#{1000 + c})")
    down = tmp / "down" / "npu"
    down.mkdir(parents=True)
    (down / "a.py").write_text("from torch._inductor.mod0 import fn_0_1\n")
    code = f"""
from pathlib import Path
from instep.impact.analysis import ImpactRequest, analyse
r = analyse(ImpactRequest(downstream={str(tmp / "down")!r}, upstream_git={str(repo)!r},
            rev_range='base..HEAD', cache_dir=Path({str(tmp / "c2")!r}), jobs=2))
print(len(r.units))
"""
    wall, rss, _ = run_child(code)
    print(
        f"per-commit  : {commits} commits in {wall:.2f} s = {commits / wall:.1f} commits/s "
        f"(target >= 20; includes interpreter start), peak RSS {rss:.0f} MiB"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=60)
    ap.add_argument("--skip-release", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="instep-bench-") as tmpdir:
        tmp = Path(tmpdir)
        if not args.skip_release:
            release(tmp)
        per_commit(tmp, args.commits)


if __name__ == "__main__":
    main()
