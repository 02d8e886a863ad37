"""Run the join's passes over one set of inputs and add their couplings in registry order.

:func:`run_passes` starts every pass that declares ``forked = True`` in a forked child at
once (:mod:`forked_passes`: with ``jobs`` 1, without ``fork``, or when a child dies, the
pass runs here when its findings are needed), then runs the others here in registry
order, each after the passes it ``needs``. A pass's couplings are added to the book as
soon as it and every pass before it have ended: so the parent decides the couplings of
the reference pass (breaking-path searches included) while the children work, and yet
the order of the adds, which decides which of two equal couplings is kept, is always the
registry's. What a forked pass returns crosses the process boundary with each change
named by its place (unit, index) rather than copied. Nothing here knows a pass by name.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

from instep.impact.join import forked_passes
from instep.impact.join.coupling_book import CouplingBook
from instep.impact.join.pass_api import Findings, Found, JoinInputs, JoinPass

BOOK = "coupling book"  # the seconds the book took to decide the couplings added


@dataclass
class PassReport:
    """What the runner tells its caller: the passes' stats (each pass's own, and how many
    of its couplings were new for those with ``counted_as``), in registry order, and the
    wall seconds each pass ran (a forked one: in its child, its own pools included) and
    the book took to decide the couplings (``coupling book``)."""

    stats: dict[str, int]
    seconds: dict[str, float]


def run_passes(
    passes: Sequence[type[JoinPass]], inputs: JoinInputs, book: CouplingBook
) -> PassReport:
    """Run ``passes`` over ``inputs``; their couplings end in ``book``, in their order."""
    runs = [p() for p in passes]
    _check_order(runs)
    forked = [p for p in runs if p.forked]
    if forked and inputs.jobs > 1:
        inputs.warm()  # read once here what the children and this process all read
    started = forked_passes.start(inputs.jobs, {p.name: _portable(p, inputs) for p in forked})
    results: dict[str, Findings] = {}
    report = PassReport({}, {})
    added = 0  # how many passes, in registry order, have had their couplings added

    def findings_of(name: str) -> Findings:
        if name not in results:
            results[name], report.seconds[name] = _restored(started[name](), inputs)
        return results[name]

    def add_ready() -> None:
        nonlocal added
        while added < len(runs) and runs[added].name in results:
            p = runs[added]
            found = results[p.name]
            start = time.perf_counter()
            new = sum(book.add(f) for f in found.couplings)
            report.seconds[BOOK] = report.seconds.get(BOOK, 0.0) + time.perf_counter() - start
            report.stats.update(found.stats)
            if p.counted_as:
                report.stats[p.counted_as] = new
            added += 1

    for p in runs:
        if p.forked:
            continue
        earlier = {name: findings_of(name) for name in p.needs}
        start = time.perf_counter()
        results[p.name] = p.run(inputs, earlier)
        report.seconds[p.name] = time.perf_counter() - start
        add_ready()
    for p in forked:
        findings_of(p.name)
        add_ready()
    return report


def _check_order(runs: list[JoinPass]) -> None:
    """Every pass named once; what a pass needs runs before it; a forked pass needs none
    (it starts before anything has run)."""
    seen: set[str] = set()
    for p in runs:
        if p.name in seen:
            raise ValueError(f"join pass {p.name!r} registered twice")
        missing = [n for n in p.needs if n not in seen]
        if missing or (p.forked and p.needs):
            raise ValueError(f"join pass {p.name!r} needs {p.needs}, not all earlier passes")
        seen.add(p.name)


# A forked pass's findings as they travel: each coupling as a tuple of Found's fields, its
# change as its index in the unit; then the references, the stats and the seconds.
_Wire = tuple[list[tuple], list, dict[str, int], float]
_AFTER_CHANGE = tuple(f.name for f in fields(Found))[2:]
assert _AFTER_CHANGE[0] == "ref", "Found's first fields are unit and change"


def _portable(p: JoinPass, inputs: JoinInputs) -> Callable[[], _Wire]:
    def work() -> _Wire:
        start = time.perf_counter()
        found = p.run(inputs, {})
        seconds = time.perf_counter() - start
        place = {id(c): j for u in inputs.units for j, c in enumerate(u.changes)}
        couplings = [
            (f.unit, place[id(f.change)], *(getattr(f, k) for k in _AFTER_CHANGE))
            for f in found.couplings
        ]
        return couplings, found.references, found.stats, seconds

    return work


def _restored(wire: _Wire, inputs: JoinInputs) -> tuple[Findings, float]:
    couplings, references, stats, seconds = wire
    units = inputs.units
    found = [Found(i, units[i].changes[j], *rest) for i, j, *rest in couplings]
    return Findings(found, references, stats), seconds
