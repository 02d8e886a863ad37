"""Run the join's passes over one set of inputs and add their couplings in registry order.

:func:`run_passes` starts every pass that declares ``forked = True`` in a forked child at
once (:mod:`forked_passes`: with ``jobs`` 1, without ``fork``, or when a child dies, the
pass runs here when its findings are needed), then runs the others here in registry
order, each after the passes it ``needs``. A pass's couplings are added to the book as
soon as it and every pass before it have ended: so the parent decides the couplings of
the reference pass (breaking-path searches included) while the children work, and yet
the order of the adds, which decides which of two equal couplings is kept, is always the
registry's. What a forked pass returns crosses the process boundary with each change
named by its place (unit, index) rather than copied.

:func:`start_early` starts the ``prepare`` of every pass that declares ``early = True`` in
a forked child, before the indexing (the caller calls it as soon as the snapshots are
open); :func:`run_passes` collects each result when its pass's turn comes and puts it in
``inputs.prepared`` (a pass not started early is prepared then, here). The units a pass
adds (``Findings.units``) follow the diff's, in registry order; a coupling of one is
renumbered to its place there. Nothing here knows a pass by name.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from instep.impact.join import forked_passes
from instep.impact.join.coupling_book import CouplingBook
from instep.impact.join.pass_api import Findings, Found, JoinInputs, JoinPass, PassSources
from instep.impact.model import UpstreamChange

BOOK = "coupling book"  # the seconds the book took to decide the couplings added
PREPARED = "{} (prepare)"  # the seconds an early pass's prepare ran (in its child)

#: an early pass's prepare, started: its result and the seconds it ran, when called
Started = Callable[[], tuple[Any, float]]


@dataclass
class PassReport:
    """What the runner tells its caller: the passes' stats (each pass's own, and how many
    of its couplings were new for those with ``counted_as``), in registry order; the
    wall seconds each pass ran (a forked one: in its child, its own pools included; an
    early one's ``prepare`` apart) and the book took to decide the couplings (``coupling
    book``); the units the passes added (after the diff's, in registry order); the fields
    of the report's scope they filled."""

    stats: dict[str, Any]
    seconds: dict[str, float]
    units: list[UpstreamChange] = field(default_factory=list)
    scope: dict[str, Any] = field(default_factory=dict)


def start_early(
    passes: Sequence[type[JoinPass]], sources: PassSources, jobs: int
) -> dict[str, Started]:
    """Start the ``prepare`` of every early pass of ``passes`` (in forked children when
    ``jobs`` > 1); pass name -> its result when called."""
    work = {p.name: _timed_prepare(p(), sources) for p in passes if p.early}
    return forked_passes.start(jobs, work)


def _timed_prepare(p: JoinPass, sources: PassSources) -> Started:
    def work() -> tuple[Any, float]:
        start = time.perf_counter()
        result = p.prepare(sources)
        return result, time.perf_counter() - start

    return work


def run_passes(
    passes: Sequence[type[JoinPass]],
    inputs: JoinInputs,
    book: CouplingBook,
    early: Mapping[str, Started] | None = None,
) -> PassReport:
    """Run ``passes`` over ``inputs``; their couplings end in ``book``, in their order
    (``early``: what :func:`start_early` started for them)."""
    runs = [p() for p in passes]
    _check_order(runs)
    early = dict(early or {})
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
            couplings = _own_units(found, len(inputs.units), len(report.units))
            new = sum(book.add(f) for f in couplings)
            report.seconds[BOOK] = report.seconds.get(BOOK, 0.0) + time.perf_counter() - start
            report.stats.update(found.stats)
            report.units += found.units
            _fill_scope(report.scope, found.scope, p.name)
            if p.counted_as:
                report.stats[p.counted_as] = new
            added += 1

    for p in runs:
        if p.forked:
            continue
        if p.early:
            inputs.prepared[p.name], report.seconds[PREPARED.format(p.name)] = _collect(
                p, early, inputs
            )
        earlier = {name: findings_of(name) for name in p.needs}
        start = time.perf_counter()
        results[p.name] = p.run(inputs, earlier)
        report.seconds[p.name] = time.perf_counter() - start
        add_ready()
    for p in forked:
        findings_of(p.name)
        add_ready()
    return report


def _collect(p: JoinPass, early: dict[str, Started], inputs: JoinInputs) -> tuple[Any, float]:
    """An early pass's prepared result: from its child, or prepared here now."""
    started = early.pop(p.name, None)
    if started is not None:
        return started()
    if inputs.sources is None:
        raise ValueError(f"join pass {p.name!r} is early: the inputs need their sources")
    return _timed_prepare(p, inputs.sources)()


def _own_units(found: Findings, diff_units: int, added_before: int) -> list[Found]:
    """The pass's couplings, those of its own units renumbered to their place: after the
    diff's units and the units earlier passes added."""
    if not found.units or not added_before:
        return found.couplings
    return [
        dataclasses.replace(f, unit=f.unit + added_before) if f.unit >= diff_units else f
        for f in found.couplings
    ]


def _fill_scope(scope: dict[str, Any], part: dict[str, Any], name: str) -> None:
    twice = sorted(set(scope) & set(part))
    if twice:
        raise ValueError(f"join pass {name!r} fills scope fields another pass filled: {twice}")
    scope.update(part)


def _check_order(runs: list[JoinPass]) -> None:
    """Every pass named once; what a pass needs runs before it; a forked pass needs none
    (it starts before anything has run), nor is it early (its run is in a child)."""
    seen: set[str] = set()
    for p in runs:
        if p.name in seen:
            raise ValueError(f"join pass {p.name!r} registered twice")
        missing = [n for n in p.needs if n not in seen]
        if missing or (p.forked and p.needs):
            raise ValueError(f"join pass {p.name!r} needs {p.needs}, not all earlier passes")
        if p.forked and p.early:
            raise ValueError(f"join pass {p.name!r}: forked or early, not both")
        seen.add(p.name)


# A forked pass's findings as they travel: each coupling as a tuple of Found's fields, its
# change as its index in the unit; then the references, the stats, the pass's own units,
# its scope fields and the seconds.
_Wire = tuple[list[tuple], list, dict[str, Any], list, dict[str, Any], float]
_AFTER_CHANGE = tuple(f.name for f in fields(Found))[2:]
assert _AFTER_CHANGE[0] == "ref", "Found's first fields are unit and change"


def _portable(p: JoinPass, inputs: JoinInputs) -> Callable[[], _Wire]:
    def work() -> _Wire:
        start = time.perf_counter()
        found = p.run(inputs, {})
        seconds = time.perf_counter() - start
        units = [*inputs.units, *found.units]
        place = {id(c): j for u in units for j, c in enumerate(u.changes)}
        couplings = [
            (f.unit, place[id(f.change)], *(getattr(f, k) for k in _AFTER_CHANGE))
            for f in found.couplings
        ]
        rest = (found.references, found.stats, found.units, found.scope)
        return couplings, *rest, seconds

    return work


def _restored(wire: _Wire, inputs: JoinInputs) -> tuple[Findings, float]:
    couplings, references, stats, own, scope, seconds = wire
    units = [*inputs.units, *own]
    found = [Found(i, units[i].changes[j], *rest) for i, j, *rest in couplings]
    return Findings(found, references, stats, own, scope), seconds
