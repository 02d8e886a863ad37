"""A priority for each downstream place that a Test coupling reaches, from the evidence the
verdicts already hold: what kind of upstream change, how the place couples to it, the
compile stage, how many hops of inherited calls lie between them, and how many upstream
units reach the place.

Nothing here decides a verdict or reads source code: it orders what the join produced so
that a report can list the places worth testing first. Places reached only through long
inherited call paths sink below every other place, whatever their score. Import lines are
not places (the functions using the imported name are); module-level registrations,
tables and patches are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from instep.impact.model import Action, ChangeKind, Coupling, CouplingKind, Impact, Stage

# how likely the change kind is to alter what the downstream sees
CHANGE_WEIGHT = {
    ChangeKind.REMOVED: 5,
    ChangeKind.RENAMED: 5,
    ChangeKind.SIGNATURE: 4,
    ChangeKind.VALUE: 3,
    ChangeKind.DECORATOR: 3,
    ChangeKind.BODY: 2,
    ChangeKind.ANNOTATION: 1,
    ChangeKind.ADDED: 1,
}
# how tightly the place is bound to the upstream code: replacing or extending it binds
# more than calling it, calling it more than inheriting a call path into it
COUPLING_WEIGHT = {
    CouplingKind.MONKEYPATCH: 4,
    CouplingKind.SUBCLASS_OVERRIDE: 4,
    CouplingKind.FORK: 3,
    CouplingKind.REGISTRATION: 3,
    CouplingKind.CONFIG: 3,
    CouplingKind.C_SHIM: 2,
    CouplingKind.IMPORT_USE: 2,
    CouplingKind.INHERITED_PATH: 1,
}
# the stages a compile backend implements itself weigh most
STAGE_WEIGHT = {
    Stage.INDUCTOR: 3,
    Stage.DECOMPOSITION: 3,
    Stage.AOT: 2,
    Stage.DYNAMO: 2,
    Stage.FX: 2,
    Stage.RUNTIME: 2,
    Stage.DISTRIBUTED: 1,
    Stage.OTHER: 1,
}
LONG_PATH = 2  # inherited paths with this many hops or more (beyond the direct link) sink


@dataclass(frozen=True)
class Scored:
    """One Test coupling with its score and the facts the score came from."""

    unit: Impact
    coupling: Coupling
    change: str  # the strongest change kind of the upstream symbol
    stage: str
    hops: int  # calls between the changed symbol and the place, beyond the direct link
    score: float

    @property
    def sinks(self) -> bool:
        return self.coupling.kind is CouplingKind.INHERITED_PATH and self.hops >= LONG_PATH


@dataclass(frozen=True)
class TestPlace:
    """A downstream place reached by Test couplings, with its priority."""

    place: str  # 'path::qualname' ('path::<module>' for module level)
    at: str  # 'path:line' of its strongest coupling
    priority: float
    sinks: bool  # reached only through long inherited paths
    units: tuple[str, ...]  # ids of the upstream units reaching it
    couplings: int
    top: Scored  # the strongest coupling
    tests: tuple[str, ...]  # suggested tests of the units reaching it


def score(unit: Impact, coupling: Coupling) -> Scored:
    change = next((c for c in unit.change.changes if c.ref == coupling.upstream), None)
    aspects = change.aspects if change is not None else frozenset()
    strongest = max(aspects, key=lambda k: CHANGE_WEIGHT.get(k, 1), default=None)
    stage = change.stage if change is not None else unit.stage
    hops = max(0, len(coupling.chain) - 2)
    value = (
        CHANGE_WEIGHT.get(strongest, 1)
        * COUPLING_WEIGHT.get(coupling.kind, 1)
        * STAGE_WEIGHT.get(stage, 1)
        / (1 + hops)
    )
    return Scored(unit, coupling, str(strongest or "?"), str(stage), hops, value)


def rank_test_places(units: list[Impact]) -> list[TestPlace]:
    """Every place holding a Test coupling (not already adapted), most urgent first.

    A place's priority is its best coupling's score times ``1 + log2(units reaching it)``;
    places whose every coupling is a long inherited path come after all others.
    """
    by_place: dict[str, list[Scored]] = {}
    for unit in units:
        for c in unit.couplings:
            if c.action is not Action.TEST or c.already_adapted:
                continue
            if c.owner is None and c.kind is CouplingKind.IMPORT_USE:
                continue  # an import line: the functions using the name are the places
            by_place.setdefault(c.place, []).append(score(unit, c))
    places = []
    for place, scored in by_place.items():
        ids = tuple(dict.fromkeys(s.unit.change.id for s in scored))
        top = max(scored, key=lambda s: (not s.sinks, s.score))
        tests: dict[str, None] = {}
        for s in scored:
            tests.update(dict.fromkeys(s.unit.suggested_tests))
        places.append(
            TestPlace(
                place=place,
                at=top.coupling.downstream,
                priority=round(top.score * (1 + math.log2(len(ids))), 2),
                sinks=all(s.sinks for s in scored),
                units=ids,
                couplings=len(scored),
                top=top,
                tests=tuple(tests),
            )
        )
    places.sort(key=lambda p: (p.sinks, -p.priority, -len(p.units), p.place))
    return places
