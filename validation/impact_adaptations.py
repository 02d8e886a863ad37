"""Calibrate `instep impact` against the adaptations a backend really made.

torch_npu 2.14.0 is torch_npu 2.13.0 adapted to torch 2.14. This script asks instep for
the impact of torch 2.13.0 -> 2.14.1 on torch_npu 2.13.0, then diffs torch_npu 2.13.0
against 2.14.0 with instep's own symbol diff, and compares, per downstream symbol
(function, method, class, module-level block of torch_npu 2.13.0):

* flagged: the symbol holds a coupling instep rated Shim (or Test, or Check);
* adapted: torch_npu changed the symbol in 2.14.0 (body, signature, value, decorator,
  removed or moved).

It prints, per action, how many flagged symbols were adapted (against the base rate of
all coupled symbols), how many adapted coupled symbols instep flagged at least Test, how
many of the top downstream hotspots (``ImpactReport.hotspots``) were adapted, and
the flagged-but-unchanged Shim places (either a false alarm or an adaptation still owed).
Many torch_npu changes are its own work, unrelated to upstream: the base rate says how
often a coupled symbol changes anyway. Nothing is imported or executed.

Usage: python validation/impact_adaptations.py [--cache DIR] [--json OUT] [--places OUT]
[--upstream OLD NEW] [--downstream OLD NEW] (default: torch 2.13.0 / 2.14.1, torch-npu
2.13.0 / 2.14.0; the wheels come through pip download). Each OLD / NEW is anything
``instep impact`` reads: a pip spec, a wheel, or a source directory (two checkouts of a
backend, e.g. ``git archive`` of a commit and of its parent).
"""

from __future__ import annotations

import argparse
import bisect
import json
from collections import defaultdict
from pathlib import Path

from instep.impact.analysis import ImpactRequest, analyse
from instep.impact.export.priority import rank_test_places
from instep.impact.join.change_index import BEHAVIOUR
from instep.impact.upstream.release_diff import diff_versions
from instep.impact.upstream.sources import diff_snapshots, is_test_path, open_snapshot
from instep.pyindex.cache import ContentCache

UP_OLD, UP_NEW = "torch==2.13.0", "torch==2.14.1"
DOWN_OLD, DOWN_NEW = "torch-npu==2.13.0", "torch-npu==2.14.0"
FORK_RULES = frozenset({"fork.stale", "fork.diverged", "fork.lacks_added"})
RISKS = ("low", "medium", "high")
CODE_CHANGES = ("no", "unsure", "yes")
ADAPTING = BEHAVIOUR  # body, signature, value, decorator, removed, renamed


def downstream_changes(cache: Path, down_old: str = DOWN_OLD, down_new: str = DOWN_NEW):
    """torch_npu 2.13.0 -> 2.14.0 (or the pair given): (adapted symbols 'path::qualname',
    the version diff)."""
    old = open_snapshot(down_old, cache)
    new = open_snapshot(down_new, cache)
    pairs = [(f.path, f.old, f.new) for f in diff_snapshots(old, new) if not is_test_path(f.path)]
    diff = diff_versions(pairs, cache=ContentCache(cache, "symbols"), jobs=2)
    adapted = {f"{c.path}::{c.qualname}" for c in diff.changes if c.aspects & ADAPTING}
    return adapted, diff, old


class Enclosing:
    """The innermost symbol of torch_npu 2.13.0 that holds a given path:line."""

    def __init__(self, snapshot, diff) -> None:
        self.snapshot, self.diff = snapshot, diff
        self.spans: dict[str, tuple[list[int], list[tuple[int, int, str]]]] = {}

    def _load(self, path: str):
        if path not in self.spans:
            index = self.diff.index(path, "old")
            if index is None:
                from instep.pyindex.symbols import index_source

                try:
                    index = index_source(path, self.snapshot.read(path))
                except (KeyError, OSError):
                    index = None
            spans = sorted(
                (s.line, s.end_line, q)
                for q, s in (index.symbols.items() if index is not None else ())
            )
            self.spans[path] = ([a for a, _, _ in spans], spans)
        return self.spans[path]

    def __call__(self, where: str) -> str | None:
        path, _, line_text = where.rpartition(":")
        line = int(line_text)
        starts, spans = self._load(path)
        best = None
        for i in range(bisect.bisect_right(starts, line) - 1, -1, -1):
            start, end, q = spans[i]
            if start <= line <= end and (best is None or end - start < best[1] - best[0]):
                best = (start, end, q)
            if best is not None and start < best[0] - 5000:
                break
        return f"{path}::{best[2]}" if best else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "instep")
    ap.add_argument("--json", type=Path, help="write the per-symbol table here")
    ap.add_argument("--places", type=Path, help="write the Test places by priority here")
    ap.add_argument(
        "--upstream",
        nargs=2,
        default=(UP_OLD, UP_NEW),
        metavar=("OLD", "NEW"),
        help=f"upstream pair: pip specs, wheels or directories (default {UP_OLD} {UP_NEW})",
    )
    ap.add_argument(
        "--downstream",
        nargs=2,
        default=(DOWN_OLD, DOWN_NEW),
        metavar=("OLD", "NEW"),
        help="downstream before and after its adaptation: pip specs, wheels or source "
        f"directories (default {DOWN_OLD} {DOWN_NEW})",
    )
    args = ap.parse_args()

    report = analyse(
        ImpactRequest(
            downstream=args.downstream[0],
            upstream_old=args.upstream[0],
            upstream_new=args.upstream[1],
            cache_dir=args.cache,
        )
    )
    adapted, diff, old_snapshot = downstream_changes(args.cache, *args.downstream)
    enclosing = Enclosing(old_snapshot, diff)

    flagged: dict[str, str] = {}  # downstream symbol -> strongest action of its couplings
    risk_of: dict[str, int] = {}  # downstream symbol -> highest risk of its couplings
    change_of: dict[str, int] = {}  # downstream symbol -> strongest code change of its couplings
    evidence: dict[str, list[str]] = defaultdict(list)
    test_rules: dict[str, set[str]] = defaultdict(set)  # symbol -> rules of its Test couplings
    rank = {"Check": 0, "Test": 1, "Shim": 2}
    for unit in report.units:
        for c in unit.couplings:
            symbol = enclosing(c.downstream)
            if symbol is None:
                continue
            action = str(c.action)
            if symbol not in flagged or rank[action] > rank[flagged[symbol]]:
                flagged[symbol] = action
            risk_of[symbol] = max(risk_of.get(symbol, 0), RISKS.index(str(c.risk)))
            change = CODE_CHANGES.index(str(c.code_change))
            change_of[symbol] = max(change_of.get(symbol, 0), change)
            evidence[symbol].append(f"{action} {c.kind} <- {c.upstream} ({c.rule})")
            if action == "Test":
                test_rules[symbol].add(str(c.rule))

    coupled = set(flagged)
    base = len(coupled & adapted) / len(coupled) if coupled else 0.0
    old_v, new_v = (spec.split("==")[-1] for spec in args.downstream)
    print(f"downstream symbols adapted {old_v} -> {new_v}: {len(adapted)}")
    print(
        f"downstream symbols holding a coupling: {len(coupled)}; adapted: "
        f"{len(coupled & adapted)} ({base:.1%}, the base rate)"
    )
    groups = [
        (f"strongest action {action:5}", {s for s, a in flagged.items() if a == action})
        for action in ("Shim", "Test", "Check")
    ]
    groups += [
        (f"highest risk {name:6}", {s for s, r in risk_of.items() if r == level})
        for level, name in enumerate(RISKS)
    ]
    groups += [
        (f"code change {name:7}", {s for s, r in change_of.items() if r == level})
        for level, name in enumerate(CODE_CHANGES)
    ]
    for label, mine in groups:
        hit = mine & adapted
        rate = len(hit) / len(mine) if mine else 0.0
        print(
            f"  {label}: {len(mine):5} symbols, adapted {len(hit):4} "
            f"({rate:.1%}, {rate / base if base else 0:.1f}x the base rate)"
        )
    changed_coupled = coupled & adapted
    at_least_test = {s for s in changed_coupled if rank[flagged[s]] >= 1}
    print(
        f"adapted coupled symbols flagged at least Test: {len(at_least_test)} of "
        f"{len(changed_coupled)} ({len(at_least_test) / max(1, len(changed_coupled)):.1%})"
    )
    adapted_files = {s.split("::")[0] for s in adapted}
    for action in ("Shim", "Test"):
        files = {s.split("::")[0] for s, a in flagged.items() if a == action}
        print(
            f"  files holding a {action:4} place: {len(files):4}, changed in {new_v}: "
            f"{len(files & adapted_files)} ({len(files & adapted_files) / max(1, len(files)):.1%})"
        )
    # hotspots: downstream symbols ranked by how many upstream units reach them
    places = {c.place for unit in report.units for c in unit.couplings}
    place_base = len(places & adapted) / max(1, len(places))
    ranked = [h["symbol"] for h in report.hotspots(limit=len(places))]
    print(
        f"hotspots (downstream symbols by upstream units reaching them; base rate "
        f"{place_base:.1%} of {len(places)} coupled places):"
    )
    for k in (10, 25, 50, 100, 200):
        hit = sum(s in adapted for s in ranked[:k])
        lift = hit / k / place_base if place_base else 0.0
        print(f"  top {k:3}: adapted {hit:3} ({lift:.1f}x the base rate)")
    # Test places by priority (export/priority.py, the order of the report's "Test these").
    # Module-level places ('path::<module>') are left out of this list and of its base
    # rate: the symbol diff names module-level blocks otherwise, so they never count as
    # adapted here, and a ranking that sank them would gain lift for nothing.
    owned = {p for p in places if not p.endswith("::<module>")}
    owned_base = len(owned & adapted) / max(1, len(owned))
    test_places = [p.place for p in rank_test_places(report.units) if p.place in owned]
    test_hit = sum(p in adapted for p in test_places)
    print(
        f"Test places by priority ({len(test_places)} places in a def or class, adapted "
        f"{test_hit}; base rate {owned_base:.1%} of {len(owned)} such coupled places):"
    )
    for k in (10, 25, 50, 100, 200):
        hit = sum(s in adapted for s in test_places[:k])
        lift = hit / k / owned_base if owned_base else 0.0
        print(f"  top {k:3}: adapted {hit:3} ({lift:.1f}x the base rate)")
    # a Test symbol counts under every rule that made one of its couplings Test
    tests = {s for s, a in flagged.items() if a == "Test"}
    by_rule: dict[str, set[str]] = defaultdict(set)
    for s in tests:
        for rule in test_rules[s]:
            by_rule[rule].add(s)
    print("Test symbols per verdict rule (symbols, adapted, x the base rate):")
    for rule, mine in sorted(by_rule.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:14]:
        hit = len(mine & adapted)
        print(f"  {rule:40} {len(mine):5} {hit:4} ({hit / len(mine) / base:.1f}x)")
    forks_only = {s for s in tests if test_rules[s] <= FORK_RULES}
    rest = tests - forks_only
    print(
        f"  Test only through forks: {len(forks_only)} symbols, adapted "
        f"{len(forks_only & adapted)}; the rest: {len(rest)}, adapted {len(rest & adapted)} "
        f"({len(rest & adapted) / max(1, len(rest)) / base:.1f}x)"
    )
    if args.places:
        rows = [{"place": p, "adapted": p in adapted} for p in test_places]
        args.places.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    pending = sorted(s for s, a in flagged.items() if a == "Shim" and s not in adapted)
    print(f"Shim places the downstream {new_v} left unchanged ({len(pending)}):")
    for s in pending[:30]:
        shim = next(e for e in evidence[s] if e.startswith("Shim"))
        print(f"  {s}\n      {shim}")
    if args.json:
        rows = [
            {"symbol": s, "action": a, "adapted": s in adapted, "evidence": evidence[s][:5]}
            for s, a in sorted(flagged.items())
        ]
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
