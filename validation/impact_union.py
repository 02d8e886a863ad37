"""Is a merged branch's impact report exactly the union of the two branches' reports?

    python validation/impact_union.py LEFT.json RIGHT.json MERGED.json

Three ``instep impact --format json`` reports of the same inputs: LEFT and RIGHT made by
the tips of two branches that each added couplings of their own, MERGED by their merge.
When the merge kept both sides' work and changed nothing else, every coupling of MERGED
is in LEFT or RIGHT and every coupling of either is in MERGED (a coupling is its unit,
kind, upstream and downstream places, rule, action, risk, role, detail and evidence; a
role a tip's schema lacks reads as null); every
unit field of MERGED equals the same field in LEFT or in RIGHT; and no ``stats`` key
holds a value neither side had. Prints the counts, every exception (up to ``--show``),
the fields where the two tips disagree (MERGED should follow the tip whose pass added
couplings to that unit) and the top-level keys that differ from both (``schema``, the
summary's counts, ``scope``: explain each). Exit 1 when a coupling or unit field is
found in neither tip or a tip's coupling is lost, else 0; 2 when a file is not JSON.
Reads the files only: nothing is imported from instep. ``impact_same.py`` is the
two-report comparison this extends.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

CouplingKey = tuple[str, ...]


def _load(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        print(f"impact_union: cannot read {path} as an impact JSON report ({e})", file=sys.stderr)
        sys.exit(2)


def couplings(doc: dict[str, Any]) -> set[CouplingKey]:
    fields = (
        "kind",
        "upstream",
        "downstream",
        "rule",
        "action",
        "risk",
        "role",
        "detail",
        "evidence",
    )
    return {
        (u["id"], *(str(c.get(f)) for f in fields)) for u in doc["units"] for c in u["couplings"]
    }


def units(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {u["id"]: {k: v for k, v in u.items() if k != "couplings"} for u in doc["units"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("left", type=Path)
    ap.add_argument("right", type=Path)
    ap.add_argument("merged", type=Path)
    ap.add_argument("--show", type=int, default=10)
    args = ap.parse_args()
    left, right, merged = (_load(p) for p in (args.left, args.right, args.merged))
    bad = 0
    cl, cr, cm = couplings(left), couplings(right), couplings(merged)
    print(f"couplings: left {len(cl)}, right {len(cr)}, merged {len(cm)}")
    extra, lost = sorted(cm - (cl | cr)), sorted((cl | cr) - cm)
    print(f"  in merged, in neither tip: {len(extra)}; in a tip, not in merged: {len(lost)}")
    for sign, rows in (("+", extra), ("-", lost)):
        for row in rows[: args.show]:
            print(f"    {sign} {row[:6]}")
    bad += len(extra) + len(lost)
    print(f"  left's own kinds: {sorted({c[1] for c in cl - cr})}")
    print(f"  right's own kinds: {sorted({c[1] for c in cr - cl})}")
    ul, ur, um = units(left), units(right), units(merged)
    gone = sorted((set(ul) | set(ur)) - set(um))
    print(f"units: left {len(ul)}, right {len(ur)}, merged {len(um)}; lost: {gone}")
    bad += len(gone)
    neither = disagree = 0
    for uid, fields in um.items():
        for name, value in fields.items():
            a = ul.get(uid, {}).get(name, "<absent>")
            b = ur.get(uid, {}).get(name, "<absent>")
            if value not in (a, b):
                neither += 1
                if neither <= args.show:
                    print(f"  {uid!r}.{name}: merged {value!r}, left {a!r}, right {b!r}"[:300])
            elif uid in ul and uid in ur and a != b:
                disagree += 1
                side = "left" if value == a else "right"
                if disagree <= args.show:
                    print(f"  tips disagree on {uid!r}.{name}: merged follows {side}")
    print(f"  unit fields equal to neither tip: {neither}; where the tips disagree: {disagree}")
    bad += neither
    for key in sorted(set(merged["stats"]) - {"timings_s"}):
        value = merged["stats"][key]
        if value not in (left["stats"].get(key), right["stats"].get(key)):
            print(f"  stats.{key}: in neither tip: {str(value)[:200]}")
    for key in sorted(set(merged) - {"units", "stats", "generated_at"}):
        if merged[key] not in (left.get(key), right.get(key)):
            print(f"  {key}: differs from both tips: {json.dumps(merged[key])[:300]}")
    print("UNION" if not bad else f"NOT A UNION: {bad} exception(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
