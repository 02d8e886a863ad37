"""The native half of instep impact on real wheels, with a cross-check by the toolchain.

    python validation/impact_native.py OLD NEW DOWN [--check OBJECT]

OLD, NEW and DOWN are what ``instep impact`` takes (wheel paths or pip specs). Prints the
scope, the linked symbols each downstream shared object takes from the old upstream and
how many the new one no longer gives it, and every native unit with its couplings
(rule, symbol, what became of it). ``--check torch_npu/lib/libtorch_npu.so`` extracts
that object and the old and new upstream libraries it names into a temporary folder and
counts the same with ``nm -D`` and ``c++filt`` (the toolchain checks the product; the
product never runs it): the symbols the object takes from the old upstream's libraries
(undefined in it, defined in them) and those the new upstream's libraries lack.
``--next WHEEL`` (the downstream's next release, built against the new upstream) says,
for every missing symbol, whether that release's same object still takes it: a Shim the
backend's own next release adapted to is a confirmed one.
Results are in docs/validation/impact-native.md.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from instep.impact.join.linked_symbol_pass import LinkedSymbolPass
from instep.impact.join.pass_api import Found, PassSources, Snapshots
from instep.impact.join.verdicts import decide, judge_unit
from instep.impact.model import Coupling
from instep.impact.upstream.sources import open_snapshot
from instep.impact.upstream.versions import snapshot_version


def _nm(path: Path, defined: bool) -> set[str]:
    flag = "--defined-only" if defined else "--undefined-only"
    out = subprocess.run(["nm", "-D", flag, str(path)], capture_output=True, text=True, check=True)
    names = set()
    for line in out.stdout.splitlines():
        parts = line.split()
        if not parts:
            continue
        kind, name = (parts[-2], parts[-1]) if len(parts) >= 2 else ("U", parts[-1])
        if defined and kind not in "TWDBRVuiG":  # global (upper case), weak, unique, ifunc
            continue
        names.add(name.split("@")[0])
    return names


def check_with_nm(old: Path, new: Path, down: Path, obj: str) -> None:
    with tempfile.TemporaryDirectory(prefix="instep-nm-") as tmp:
        root = Path(tmp)
        with zipfile.ZipFile(down) as zf:
            zf.extract(obj, root / "down")
        target = root / "down" / obj
        needed = subprocess.run(
            ["readelf", "-d", str(target)], capture_output=True, text=True, check=True
        ).stdout
        names = [
            line.split("[", 1)[1].rstrip("]") for line in needed.splitlines() if "(NEEDED)" in line
        ]
        defined = {}
        for side, wheel in (("old", old), ("new", new)):
            defined[side] = set()
            with zipfile.ZipFile(wheel) as zf:
                members = {
                    m.rsplit("/", 1)[-1]: m for m in zf.namelist() if m.startswith("torch/lib/")
                }
                for name in names:
                    if name in members:
                        zf.extract(members[name], root / side)
                        defined[side] |= _nm(root / side / members[name], True)
        undefined = _nm(target, False)
        taken = undefined & defined["old"]
        gone = sorted(taken - defined["new"])
        print(
            f"nm -D check of {obj}: takes {len(taken)} symbols from the old upstream, "
            f"{len(gone)} gone in the new one"
        )
        if gone:
            text = subprocess.run(
                ["c++filt"], input="\n".join(gone), capture_output=True, text=True
            ).stdout
            for line in text.splitlines():
                print(f"  {line}")


def decided(f: Found) -> Coupling:
    """The verdict of one linked-symbol coupling, as the coupling book gives it (its place
    has no gate and no breaking path to search)."""
    c = decide(
        f.change,
        f.ref,
        kind=f.kind,
        extra_facts=f.extra,
        chain=f.chain,
        detail=f.detail,
        evidence=f.evidence,
    )
    c.problems = list(f.problems) or c.problems
    return c


def next_release(result, wheel: Path) -> None:
    """Which missing symbols the downstream's next release still takes (same object)."""
    from instep.elfindex.files import SharedObjectFiles
    from instep.elfindex.model import SharedObject

    files = SharedObjectFiles(wheel=wheel)
    for unit, found in result.units:
        couplings = [decided(f) for f in found]
        obj = unit.id.removesuffix(" (linked symbols)")
        so = files.read(obj) if obj in files else None
        if not isinstance(so, SharedObject):
            print(f"next release {wheel.name}: no readable {obj}")
            continue
        missing = [c for c in couplings if c.action.value != "Check"]
        kept = [c for c in missing if c.evidence.rsplit(" ", 1)[-1] in so.imports]
        print(
            f"next release {wheel.name}: {obj} still takes {len(kept)} of the "
            f"{len(missing)} symbols reported missing"
        )
        for c in kept:
            print(f"  still taken: {c.upstream}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("down")
    ap.add_argument("--check", metavar="OBJECT", help="cross-check one object with nm -D")
    ap.add_argument("--cache", type=Path, default=None, help="analysis cache (default: none)")
    ap.add_argument("--next", metavar="WHEEL", help="the downstream's next release")
    args = ap.parse_args()
    where = Path(tempfile.mkdtemp(prefix="instep-native-"))
    old, new, down = (open_snapshot(x, where) for x in (args.old, args.new, args.down))
    labels = {
        side: f"torch {'.'.join(map(str, v))}" if (v := snapshot_version(s, None)) else s.label
        for side, s in (("old", old), ("new", new))
    }
    sources = PassSources(
        Snapshots(old, new, down), "release", labels, lambda path: False, args.cache
    )
    cpu, wall = time.process_time(), time.perf_counter()
    result = LinkedSymbolPass().prepare(sources)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{args.old} -> {args.new} on {args.down}")
    print(
        f"native half: {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {rss:.0f} MiB, "
        f"{result.reads} shared objects read"
    )
    print(f"scope: {result.scope()}")
    for obj, (taken, missing) in sorted(result.by_object.items()):
        print(f"  {obj}: takes {taken} symbols from the old upstream, {missing} missing")
    for unit, found in result.units:
        couplings = [decided(f) for f in found]
        impact = judge_unit(unit, couplings)
        print(f"UNIT {impact.action} {unit.id}: {unit.title}")
        for c in couplings:
            print(f"  {c.action} {c.rule} {c.downstream} {c.upstream}")
            print(f"      {c.problems[0] if c.problems else c.detail}")
    for w in result.warnings:
        print(f"warning: {w}")
    if args.next:
        next_release(result, Path(args.next))
    if args.check:
        wheels = [getattr(s, "wheel", None) for s in (old, new, down)]
        if None in wheels:
            sys.exit("--check needs three wheels")
        check_with_nm(*wheels, args.check)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
