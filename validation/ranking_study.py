"""Leave one pair out: would a change to the "Test these" order generalise?

For each release pair given, instep's impact (Test places in a def or class, ranked by
``export/priority.py``) is compared with what the downstream changed in its next release
(``impact_adaptations.downstream_changes``). Each candidate order is chosen on all pairs
but one and measured on that one; the script prints the adapted places in the top 25.
Every order breaks ties as ``rank_test_places`` does (more units first, then by name):

* ``main``: the priority as it is;
* ``kind refit``: the coupling-kind weight of each place's strongest coupling replaced by
  the pooled lift of that kind on the other pairs (kinds with 20 places or more);
* ``size``: the priority times ``1 + a*log2(1 + lines/50)``, the lines of the place's
  def in the old downstream, ``a`` chosen on the other pairs from ``SIZES`` (mean log
  lift, ties to the smaller ``a``);
* ``kind refit x size``: both, ``a`` chosen with the refit weights.

With ``--history`` and consecutive pairs (each downstream old the one before's new) it
prints instead how often the Test places the downstream changed in the release before
were changed again. docs/validation/impact-adaptations.md, "Held-out lift on two fresh
releases", has both. Usage (each --pair: a name, then the upstream old/new and
downstream old/new, as ``instep impact`` reads them)::

    python validation/ranking_study.py --cache DIR \\
      --pair 2.10 torch-2.10.0-3-….whl torch-2.11.0-….whl torch_npu-2.10.0-….whl \\
        torch_npu-2.11.0-….whl --pair 2.11 …
"""

from __future__ import annotations

import argparse
import ast
import math
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from impact_adaptations import downstream_changes

from instep.impact.analysis import ImpactRequest, analyse
from instep.impact.export.priority import COUPLING_WEIGHT, TestPlace, rank_test_places
from instep.impact.join.skipped_init import find_class, find_def

TOP = 25
MIN_KIND = 20  # places a kind needs on the other pairs for its weight to be refit
SIZES = (0, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.0)


@dataclass
class Pair:
    name: str
    down: tuple[str, str]  # the downstream old and new, as given
    places: list[TestPlace]  # Test places in a def or class, in main's order
    adapted: set[str]
    base: float  # adapted share of all coupled places in a def or class
    lines: dict[str, int]  # place -> lines of its def or class


def load(name: str, up_old, up_new, down_old, down_new, cache: Path) -> Pair:
    report = analyse(
        ImpactRequest(
            downstream=down_old, upstream_old=up_old, upstream_new=up_new, cache_dir=cache
        )
    )
    adapted, _, old = downstream_changes(cache, down_old, down_new)
    coupled = {c.place for u in report.units for c in u.couplings}
    owned = {p for p in coupled if not p.endswith("::<module>")}
    places = [p for p in rank_test_places(report.units) if p.place in owned]
    trees: dict[str, ast.Module | None] = {}
    lines = {}
    for p in places:
        path, qual = p.place.split("::", 1)
        if path not in trees:
            try:
                trees[path] = ast.parse(old.read(path).decode("utf-8", "replace"))
            except (OSError, KeyError, SyntaxError, ValueError):
                trees[path] = None
        node = find_def(trees[path], qual) or find_class(trees[path], qual)
        lines[p.place] = (node.end_lineno - node.lineno + 1) if node is not None else 0
    base = len(owned & adapted) / len(owned)
    return Pair(name, (down_old, down_new), places, adapted, base, lines)


def top(pair: Pair, factor) -> int:
    """Adapted places in the top 25 when each priority is multiplied by ``factor(place)``."""
    order = sorted(
        pair.places,
        key=lambda p: (p.sinks, -round(p.priority * factor(pair, p), 2), -len(p.units), p.place),
    )
    return sum(p.place in pair.adapted for p in order[:TOP])


def lift(pair: Pair, factor) -> float:
    return top(pair, factor) / TOP / pair.base


def refit(train: list[Pair]) -> dict[str, float]:
    """Kind -> its pooled lift over ``train`` (each pair against its own Test-place rate)."""
    seen, expected, count = Counter(), Counter(), Counter()
    for pair in train:
        rate = sum(p.place in pair.adapted for p in pair.places) / len(pair.places)
        for p in pair.places:
            kind = str(p.top.coupling.kind)
            seen[kind] += p.place in pair.adapted
            expected[kind] += rate
            count[kind] += 1
    return {k: max(round(seen[k] / expected[k], 1), 0.1) for k in count if count[k] >= MIN_KIND}


def kind_factor(weights: dict[str, float]):
    def f(pair: Pair, p: TestPlace) -> float:
        kind = p.top.coupling.kind
        return (
            weights.get(str(kind), 1.0) / COUPLING_WEIGHT.get(kind, 1.0)
            if str(kind) in weights
            else 1.0
        )

    return f


def size_factor(a: float):
    return lambda pair, p: 1 + a * math.log2(1 + pair.lines[p.place] / 50)


def both(weights: dict[str, float], a: float):
    k, s = kind_factor(weights), size_factor(a)
    return lambda pair, p: k(pair, p) * s(pair, p)


def choose(train: list[Pair], make) -> float:
    """The ``a`` of SIZES with the best mean log lift over ``train`` (ties: the smaller)."""
    score = {a: sum(math.log(max(lift(t, make(a)), 0.05)) for t in train) for a in SIZES}
    return max(SIZES, key=lambda a: (score[a], -a))


def leave_one_out(pairs: list[Pair]) -> None:
    rows: dict[str, list[str]] = {
        k: [] for k in ("main", "kind refit", "kind refit x size", "size")
    }
    for held in pairs:
        train = [p for p in pairs if p is not held]
        weights = refit(train)
        a_both = choose(train, lambda a, w=weights: both(w, a))
        a_size = choose(train, size_factor)
        for name, f in (
            ("main", lambda pair, p: 1.0),
            ("kind refit", kind_factor(weights)),
            ("kind refit x size", both(weights, a_both)),
            ("size", size_factor(a_size)),
        ):
            rows[name].append(f"{top(held, f)} ({lift(held, f):.1f}x)")
    print("| order | " + " | ".join(p.name for p in pairs) + " |")
    print("|---|" + "---|" * len(pairs))
    for name, cells in rows.items():
        print(f"| {name} | " + " | ".join(cells) + " |")


def history(pairs: list[Pair]) -> None:
    """For each pair whose downstream old is the one before's new: how often its Test
    places that the downstream changed in the release before were changed again."""
    for before, pair in pairwise(pairs):
        if before.down[1] != pair.down[0]:
            continue
        rate = sum(p.place in pair.adapted for p in pair.places) / len(pair.places)
        again = [p for p in pair.places if p.place in before.adapted]
        hits = sum(p.place in pair.adapted for p in again)
        ratio = hits / len(again) / rate if again and rate else 0.0
        print(
            f"{pair.name}: changed in {before.name}'s release {len(again)}, "
            f"again {hits}, {ratio:.1f}x"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--pair", nargs=5, action="append", required=True, metavar="X")
    ap.add_argument(
        "--history",
        action="store_true",
        help="print, instead, the places changed in the release before (consecutive pairs)",
    )
    args = ap.parse_args()
    pairs = [load(*spec, args.cache) for spec in args.pair]
    (history if args.history else leave_one_out)(pairs)


if __name__ == "__main__":
    main()
