"""Benchmark: `instep impact` on the torch 2.13.0 -> 2.14.1 release vs griffe, same run.

Measures, each in its own child process pinned to ``--cpus`` CPUs (default 2, the
target machine; instep's workers follow the pinning; wall seconds and peak RSS from
wait4):
  1. instep cold: release diff torch==2.13.0 -> torch==2.14.1 against torch-npu==2.13.0,
     empty analysis cache (wheels already downloaded, so pip is not timed);
  2. instep warm: the same again (nothing changed: the remembered report);
  3. instep warm, one downstream file edited: the per-file caches answer all but one
     file (the everyday re-run while adapting the backend);
  4. griffe: load torch._inductor from both versions and `find_breaking_changes`;
  5. instep on griffe's scope: the symbol diff of torch/_inductor alone, cold.
Before the griffe ratio is printed, both sides must have read the same files of both
versions (griffe's loaded modules against instep's file pairs: count and names).
The warm run must give the cold run's summary (units, couplings, actions), and the edited
run the same units. Prints the figures and the ratios (targets: cold <= 20 s, >= 5x
faster than griffe, warm <= 3 s, peak RSS <= 2 GB). Needs `pip install -e .[bench]`
(griffe) and the wheels reachable by `pip download` (they lie on local disk here), or
--old/--new/--down given as wheels or source trees.

Also measures per-commit mode on a generated git history with torch-sized files
(target >= 20 commits/s).

Usage: python benchmarks/impact_release.py [--commits 60] [--skip-release] [--cpus 2]
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


CPUS: set[int] | None = None  # the CPUs every child is pinned to (--cpus)


def _pin() -> None:
    if CPUS:
        os.sched_setaffinity(0, CPUS)


def run_child(code: str, env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Run python -c CODE; return (wall s, peak RSS MiB, stdout)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        preexec_fn=_pin,
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
                          cache_dir=Path({cache!r})))
s = r.summary()
print("units", s["units"], "couplings", s["couplings"], s["by_action"])
print("timings", r.stats["timings_s"])
"""

GRIFFE = """
import hashlib
from pathlib import Path
import griffe
old = griffe.load("torch._inductor", search_paths=[{old!r}], resolve_aliases=False)
new = griffe.load("torch._inductor", search_paths=[{new!r}], resolve_aliases=False)
n = sum(1 for _ in griffe.find_breaking_changes(old, new))
def files(module, root):
    out = {{Path(module.filepath).resolve().relative_to(root).as_posix()}}
    for member in module.members.values():
        if not member.is_alias and member.is_module:
            out |= files(member, root)
    return out
for side, mod, root in (("old", old, {old!r}), ("new", new, {new!r})):
    read = sorted(files(mod, Path(root).resolve()))
    print("read", side, len(read), hashlib.sha1("\\n".join(read).encode()).hexdigest()[:12])
print("griffe breakages", n)
"""


def wheel_path(spec: str, cache: Path) -> Path:
    from instep.impact.upstream.sources import download_wheel

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


SCOPE = """
import hashlib, sys, time
from pathlib import Path
from instep.pyindex.cache import ContentCache
from instep.impact.upstream.release_diff import diff_versions
old, new = Path({old!r}), Path({new!r})
paths = sorted({{p.relative_to(r).as_posix() for r in (old, new)
                for p in r.rglob("*.py") if "_inductor" in p.parts}})
read = lambda r, p: (r / p).read_bytes() if (r / p).is_file() else None
pairs = [(p, read(old, p), read(new, p)) for p in paths]
d = diff_versions(pairs, cache=ContentCache(Path({cache!r}), "symbols"))
for side, at in (("old", 1), ("new", 2)):
    read = [pair[0] for pair in pairs if pair[at] is not None]
    print("read", side, len(read), hashlib.sha1("\\n".join(read).encode()).hexdigest()[:12])
print("files", len(paths), "symbol changes", len(d.changes))
"""


def _inputs(tmp: Path, args: argparse.Namespace) -> tuple[str, str, str]:
    """The three inputs as local paths (pip specs downloaded once, outside the timings)."""
    out = []
    for spec in (args.old, args.new, args.down):
        path = Path(spec)
        out.append(str(path if path.exists() else wheel_path(spec, tmp / "wheels-cache")))
    return out[0], out[1], out[2]


def _tree(source: str, dest: Path, only: str | None = None) -> Path:
    """``source`` (a wheel or a tree) as a tree of .py files under ``dest``."""
    if Path(source).is_dir():
        if only is None:
            shutil.copytree(source, dest, ignore=shutil.ignore_patterns("*.so*", "*.a"))
            return dest
        src = Path(source)
        for p in src.rglob("*.py"):
            if only in p.relative_to(src).as_posix() or p.relative_to(src).as_posix() in (
                "torch/__init__.py",
            ):
                (dest / p.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(p, dest / p.relative_to(src))
        return dest
    with zipfile.ZipFile(source) as zf:
        for m in zf.namelist():
            if m.endswith(".py") and (only is None or only in m or m == "torch/__init__.py"):
                zf.extract(m, dest)
    return dest


def release(tmp: Path, args: argparse.Namespace) -> None:
    old, new, down = _inputs(tmp, args)
    cache = tmp / "cache"
    code = INSTEP.format(down=down, old=old, new=new, cache=str(cache))
    cold, cold_rss, cold_out = run_child(code)
    print(f"instep cold : {cold:6.2f} s  peak RSS {cold_rss:7.0f} MiB   {cold_out.strip()}")
    warm, warm_rss, warm_out = run_child(code)
    print(f"instep warm : {warm:6.2f} s  peak RSS {warm_rss:7.0f} MiB   (unchanged inputs)")
    if cold_out.splitlines()[0] != warm_out.splitlines()[0]:  # the same report, remembered
        raise SystemExit(f"warm and cold runs disagree: {warm_out!r} vs {cold_out!r}")
    # the everyday re-run: one downstream file edited since the last analysis
    edited = _tree(down, tmp / "down-edited")
    code = INSTEP.format(down=str(edited), old=old, new=new, cache=str(cache))
    # same paths as in the wheel, so the per-file caches of the cold run apply
    first = sorted(edited.rglob("*.py"))[len(list(edited.rglob("*.py"))) // 2]
    first.write_text(first.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    edit, edit_rss, edit_out = run_child(code)
    if edit_out.splitlines()[0].split()[:2] != cold_out.splitlines()[0].split()[:2]:
        raise SystemExit(f"the edited run analysed other units: {edit_out!r} vs {cold_out!r}")
    note = "(one downstream file edited)"
    print(f"instep edit : {edit:6.2f} s  peak RSS {edit_rss:7.0f} MiB   {note}")
    old_root = _tree(old, tmp / "old", only="torch/_inductor/")
    new_root = _tree(new, tmp / "new", only="torch/_inductor/")
    g, g_rss, g_out = run_child(GRIFFE.format(old=str(old_root), new=str(new_root)))
    print(f"griffe      : {g:6.2f} s  peak RSS {g_rss:7.0f} MiB   {_last(g_out)}")
    scope_code = SCOPE.format(old=str(old_root), new=str(new_root), cache=str(tmp / "c-scope"))
    s, s_rss, s_out = run_child(scope_code)
    print(f"instep scope: {s:6.2f} s  peak RSS {s_rss:7.0f} MiB   {_last(s_out)} (griffe's scope)")
    # the same work: both sides read the same files of both versions (count and names)
    g_read, s_read = _read_lines(g_out), _read_lines(s_out)
    if g_read != s_read or len(g_read) != 2:
        raise SystemExit(f"griffe and instep read different files: {g_read} vs {s_read}")
    print("same files read by both: " + "; ".join(g_read))
    print(
        f"ratio griffe/instep on griffe's scope = {g / s:.2f}x (target >= 5x); "
        f"griffe/instep whole release cold = {g / cold:.2f}x; "
        f"cold {'OK' if cold <= 20 else 'SLOW'} (<= 20 s); warm {'OK' if warm <= 3 else 'SLOW'} "
        f"(<= 3 s); RSS {'OK' if max(cold_rss, warm_rss, edit_rss) <= 2048 else 'HIGH'} (<= 2 GB)"
    )


def _last(out: str) -> str:
    return out.strip().splitlines()[-1] if out.strip() else ""


def _read_lines(out: str) -> list[str]:
    """The ``read SIDE N SHA`` lines a child printed: which files it read, per version."""
    return [line[5:] for line in out.splitlines() if line.startswith("read ")]


def per_commit(tmp: Path, commits: int) -> None:
    """A generated history: 6 files of 3,600 lines; each commit edits 1-3 functions."""
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
            rev_range='base..HEAD', cache_dir=Path({str(tmp / "c2")!r})))
print(len(r.units))
"""
    wall, rss, _ = run_child(code)
    print(
        f"per-commit  : {commits} commits in {wall:.2f} s = {commits / wall:.1f} commits/s "
        f"(target >= 20; includes interpreter start), peak RSS {rss:.0f} MiB"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=60, help="0: skip per-commit mode")
    ap.add_argument("--skip-release", action="store_true")
    ap.add_argument("--old", default=OLD, help="upstream old: pip spec, wheel or tree")
    ap.add_argument("--new", default=NEW, help="upstream new: pip spec, wheel or tree")
    ap.add_argument("--down", default=DOWN, help="downstream: pip spec, wheel or tree")
    ap.add_argument("--cpus", type=int, default=2, help="pin every child to this many CPUs")
    args = ap.parse_args()
    global CPUS
    CPUS = set(sorted(os.sched_getaffinity(0))[: args.cpus]) if args.cpus else None
    print(f"children pinned to CPUs {sorted(CPUS) if CPUS else 'all'}")
    with tempfile.TemporaryDirectory(prefix="instep-bench-") as tmpdir:
        tmp = Path(tmpdir)
        if not args.skip_release:
            release(tmp, args)
        if args.commits:
            per_commit(tmp, args.commits)


if __name__ == "__main__":
    main()
