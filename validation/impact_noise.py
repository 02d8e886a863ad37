"""Compare two `instep impact --format json` reports of the same pair: what left Test.

Given the report of one release pair made by two versions of instep (before: an earlier
main; after: a branch), it counts Test and Shim couplings and places (a place is a
downstream ``path:line``; it is Test when one of its couplings is Test, Shim when one is
Shim) on both sides, lists the places that were Shim or Test before and are less after,
and groups the places that left Test by why they left:

* ``rule <name>``: the place is still coupled, and the strongest coupling's rule says why
  it is Check now (``use.type_position``, ``adapted.old_branch``,
  ``registration.decomposed_first``, ...);
* ``upstream change gone``: the upstream symbols its Test couplings named no longer have a
  change in the after report (a typing-only or neutral rewrite is no body change now);
* ``coupling gone (<kind>)``: the upstream change is still there, the coupling is not
  (a fork below the threshold or of vendored code, an annotation that is no use, an
  other overload).

With ``--sample N`` it prints N of the places that left Test, drawn with a fixed seed
(``--seed``), each with its before couplings and the downstream line, for judging from
the code. Nothing is imported or executed; the reports are the only input.

Usage: python validation/impact_noise.py BEFORE.json AFTER.json [--sample N] [--seed S]
[--places OUT.json]
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter, defaultdict
from pathlib import Path

ORDER = {"Check": 0, "Test": 1, "Shim": 2}


def load(path: Path) -> dict:
    report = json.loads(path.read_text())
    if not str(report.get("schema", "")).startswith("instep.impact/"):
        raise SystemExit(f"{path}: not an instep impact JSON report (no instep.impact schema)")
    return report


def couplings_by_place(report: dict) -> dict[str, list[dict]]:
    places: dict[str, list[dict]] = defaultdict(list)
    for unit in report["units"]:
        for c in unit.get("couplings", ()):
            places[c["downstream"]].append(c)
    return places


def changed_upstream(report: dict) -> set[str]:
    """Upstream symbols ('path::qualname') with a change in the report's units."""
    out = set()
    for unit in report["units"]:
        for entry in unit.get("upstream", ()):
            out.add(entry.rsplit(" (", 1)[0])
    return out


def strongest(cs: list[dict]) -> str:
    return max((c["action"] for c in cs), key=ORDER.__getitem__, default="none")


def why_left(place: str, before: list[dict], after: list[dict], after_changed: set[str]) -> str:
    if after:
        top = max(after, key=lambda c: ORDER[c["action"]])
        return f"rule {top['rule']}"
    tests = [c for c in before if c["action"] == "Test"]
    if all(c["upstream"] not in after_changed for c in tests):
        return "upstream change gone"
    kinds = sorted({c["kind"] for c in tests if c["upstream"] in after_changed})
    return f"coupling gone ({', '.join(kinds)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--sample", type=int, default=0)
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--places", type=Path, help="write every place that left Test as JSON")
    args = ap.parse_args()
    rb, ra = load(args.before), load(args.after)
    same = all(rb[k].get("old_version") == ra[k].get("old_version") for k in ("upstream",))
    if not same or rb["upstream"].get("new_version") != ra["upstream"].get("new_version"):
        raise SystemExit("the two reports are of different upstream pairs")
    if rb["downstream"]["files"] != ra["downstream"]["files"]:
        raise SystemExit("the two reports read different downstream files")
    pb, pa = couplings_by_place(rb), couplings_by_place(ra)
    after_changed = changed_upstream(ra)
    for name, places in (("before", pb), ("after", pa)):
        cs = [c for v in places.values() for c in v]
        acts = Counter(c["action"] for c in cs)
        top = Counter(strongest(v) for v in places.values())
        print(
            f"{name}: couplings {len(cs)} (Shim {acts['Shim']}, Test {acts['Test']}, "
            f"Check {acts['Check']}); places {len(places)} (Shim {top['Shim']}, "
            f"Test {top['Test']}, Check {top['Check']})"
        )
    lost_shim = sorted(
        p for p, v in pb.items() if strongest(v) == "Shim" and strongest(pa.get(p, [])) != "Shim"
    )
    print(f"places Shim before and not after: {len(lost_shim)}")
    for p in lost_shim:
        print(f"  {p}: now {strongest(pa.get(p, []))}")
    left = sorted(
        p
        for p, v in pb.items()
        if strongest(v) == "Test" and ORDER.get(strongest(pa.get(p, [])), -1) < ORDER["Test"]
    )
    entered = sorted(
        p
        for p, v in pa.items()
        if strongest(v) in ("Test", "Shim")
        and ORDER.get(strongest(pb.get(p, [])), -1) < ORDER["Test"]
    )
    reasons = {p: why_left(p, pb[p], pa.get(p, []), after_changed) for p in left}
    print(f"places that left Test: {len(left)}; places that entered Test or Shim: {len(entered)}")
    for reason, n in Counter(reasons.values()).most_common():
        print(f"  {n:5d}  {reason}")
    for p in entered:
        print(f"  entered: {p} ({strongest(pa[p])}, {sorted({c['rule'] for c in pa[p]})})")
    if args.places:
        rows = [
            {
                "place": p,
                "why": reasons[p],
                "before": [c for c in pb[p] if c["action"] == "Test"],
                "after": pa.get(p, []),
            }
            for p in left
        ]
        args.places.write_text(json.dumps(rows, indent=1))
    if args.sample:
        rng = random.Random(args.seed)
        for i, p in enumerate(sorted(rng.sample(left, min(args.sample, len(left)))), 1):
            tests = [c for c in pb[p] if c["action"] == "Test"]
            print(f"\n[{i}] {p}  ({reasons[p]})  `{tests[0]['snippet']}`")
            for c in tests[:4]:
                print(f"     before {c['rule']}: {c['upstream']} {c['kind']} {c['detail'][:160]}")
            if len(tests) > 4:
                print(f"     ... {len(tests) - 4} more Test couplings")
            for c in pa.get(p, [])[:2]:
                print(f"     after  {c['action']} {c['rule']}: {c['upstream']} {c['detail'][:160]}")


if __name__ == "__main__":
    main()
