"""A priority for each downstream place that a Test coupling reaches, from the evidence the
verdicts already hold: what kind of upstream change, how the place couples to it, the
compile stage, whether the rule could rule out a code change, how many hops of inherited
calls lie between them, and how many upstream units reach the place.

Nothing here decides a verdict or reads source code: it orders what the join produced so
that a report can list the places worth testing first. Places reached only through long
inherited call paths sink below every other place, whatever their score. Import lines are
not places (the functions using the imported name are); module-level registrations,
tables and patches are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from instep.impact.model import (
    Action,
    ChangeKind,
    Coupling,
    CouplingKind,
    Impact,
    Stage,
    SuggestedTest,
)

# The weights are the rounded lift of each value on a *tuning pair* that no figure uses:
# torch 2.12.1 -> 2.13.0 on torch-npu 2.12.0, against what torch-npu 2.13.0 changed
# (how much more often a Test place holding a coupling with that value was adapted than
# any Test place; docs/validation/impact-adaptations.md "Ranking"). The figures are
# measured on torch 2.13.0 -> 2.14.1 against torch-npu 2.14.0, which tuned nothing.
# how likely the change kind is to make the downstream change
CHANGE_WEIGHT = {
    ChangeKind.SIGNATURE: 1.5,
    ChangeKind.ADDED: 1.5,
    ChangeKind.BODY: 1.0,
    ChangeKind.REMOVED: 1.0,
    ChangeKind.RENAMED: 0.5,
    ChangeKind.VALUE: 0.5,
    ChangeKind.DECORATOR: 0.5,
    ChangeKind.ANNOTATION: 0.5,
}
# how tightly the place is bound to the upstream code: replacing a method binds most; a
# fork is the downstream's own copy, an inherited call path the loosest link
COUPLING_WEIGHT = {
    CouplingKind.SUBCLASS_OVERRIDE: 3.0,
    CouplingKind.MONKEYPATCH: 2.0,
    CouplingKind.IMPORT_USE: 1.0,
    CouplingKind.FORK: 1.0,
    CouplingKind.REGISTRATION: 1.0,
    CouplingKind.CONFIG: 1.0,
    CouplingKind.C_SHIM: 1.0,
    CouplingKind.INHERITED_PATH: 0.7,
}
# the stage a compile backend implements most of itself weighs most
STAGE_WEIGHT = {Stage.INDUCTOR: 1.5}  # every other stage: 0.7
OTHER_STAGE = 0.7
# a rule that could not rule out a code change (breaking path unproven, replacement
# that no longer fits, a caller that could not be checked) over one that did
CODE_CHANGE_WEIGHT = {"unsure": 1.8, "yes": 1.8}
# a place whose own code stands in for the changed upstream code and never calls it (an
# override without super(), a patch or same-key registration that drops the original)
# has to port the change itself: on the tuning pair (torch-npu 2.12.0 -> 2.13.0, rules of
# 2026-12-04) such places were adapted 1.11x as often as the other places coupled by an
# override, a monkey-patch or a registration (docs/validation/impact-adaptations.md
# "Ranking study"). It mostly orders places the other weights tie.
RULE_WEIGHT = {"override.replaces": 1.1, "patch.replaces": 1.1}
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
    deprecation: str = ""  # the symbol diff's note on a rename that keeps the old name

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
    # the suggested tests of the change the place is listed for (its strongest coupling's
    # upstream symbol), then that unit's tests tied to no symbol (upstream test files,
    # downstream tests importing a coupled module)
    tests: tuple[SuggestedTest, ...]
    # the suggested tests of the place's other Test couplings (other changes reaching it)
    other_tests: tuple[SuggestedTest, ...] = ()


def score(unit: Impact, coupling: Coupling) -> Scored:
    change = next((c for c in unit.change.changes if c.ref == coupling.upstream), None)
    aspects = change.aspects if change is not None else frozenset()
    strongest = max(aspects, key=lambda k: CHANGE_WEIGHT.get(k, 1.0), default=None)
    stage = change.stage if change is not None else unit.stage
    hops = max(0, len(coupling.chain) - 2)
    value = (
        CHANGE_WEIGHT.get(strongest, 1.0)
        * COUPLING_WEIGHT.get(coupling.kind, 1.0)
        * STAGE_WEIGHT.get(stage, OTHER_STAGE)
        * CODE_CHANGE_WEIGHT.get(str(coupling.code_change), 1.0)
        * RULE_WEIGHT.get(coupling.rule, 1.0)
        / (1 + hops)
    )
    note = change.deprecation if change is not None else ""
    return Scored(unit, coupling, str(strongest or "?"), str(stage), hops, value, note)


def rank_test_places(units: list[Impact]) -> list[TestPlace]:
    """Every Test place (a place whose strongest coupling is Test: one with a Shim is in
    "Act now"; an import line is no place, :attr:`Coupling.counted_place`), most urgent
    first. Already-adapted couplings are Check (the adapted.* rules), so no Test place.

    A place's priority is its best coupling's score times ``1 + log2(units reaching it)``;
    places whose every coupling is a long inherited path come after all others.
    """
    shim = {c.counted_place for u in units for c in u.couplings if c.action is Action.SHIM}
    by_place: dict[str, list[Scored]] = {}
    for unit in units:
        for c in unit.couplings:
            place = c.counted_place
            if c.action is not Action.TEST or place is None or place in shim:
                continue
            by_place.setdefault(place, []).append(score(unit, c))
    places = []
    for place, scored in by_place.items():
        ids = tuple(dict.fromkeys(s.unit.change.id for s in scored))
        top = max(scored, key=lambda s: (not s.sinks, s.score))
        tests, others = place_tests(top, scored)
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
                other_tests=tuple(others),
            )
        )
    places.sort(key=lambda p: (p.sinks, -p.priority, -len(p.units), p.place))
    return places


def place_tests(
    top: Scored, scored: list[Scored]
) -> tuple[list[SuggestedTest], list[SuggestedTest]]:
    """A place's tests: those chosen for the upstream symbol of its strongest coupling
    (the change the place is listed for) and its unit's tests tied to no symbol; then,
    apart, those of its other couplings' symbols (in their score order)."""
    mine = [t for t in top.unit.tests if top.coupling.upstream in t.symbols]
    mine += [t for t in top.unit.tests if not t.symbols]
    seen = {t.test for t in mine}
    others: list[SuggestedTest] = []
    for s in sorted(scored, key=lambda s: -s.score):
        for t in s.unit.tests:
            if t.test not in seen and (not t.symbols or s.coupling.upstream in t.symbols):
                seen.add(t.test)
                others.append(t)
    return mine, others
