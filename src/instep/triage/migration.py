"""Error migration: how each case's failure moves between runs (seed 000 2.2, 9.10).

For one case, the chain of ``(status, layer, signature)`` across runs in order, and a
label per step and for the pair of runs compared:

* ``new``: passed (or absent) before, fails now;
* ``fixed``: failed before, passes now;
* ``deeper``: fails in a later layer than before: the earlier blocker is gone (progress);
* ``shallower``: fails in an earlier layer: a regression;
* ``changed``: same layer, another signature; ``still_failing``: same cause;
* ``flaky``: the new outcome is marked flaky (passed on a re-run), or the case
  alternated pass/fail across three or more runs.

Outcomes are records (``OutcomeRecord``) or store rows; nothing here reads the store or
prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from instep.layers import Layer
from instep.outcome import FAILING, OutcomeRecord, records

#: An outcome as the functions here take it: a record, or a store row (``outcome_dict``).
Row = OutcomeRecord | dict[str, Any]

LABELS = ("new", "fixed", "deeper", "shallower", "changed", "still_failing", "flaky")


@dataclass(frozen=True)
class Step:
    run: str
    status: str | None  # None: the case was not in that run
    layer: str | None
    signature: str | None

    @property
    def failing(self) -> bool:
        return self.status in FAILING


@dataclass
class CaseMigration:
    case: str
    steps: list[Step] = field(default_factory=list)
    flaky_flag: bool = False

    @property
    def label(self) -> str | None:
        """The label of the last two runs (``None`` when passing in both or absent)."""
        if len(self.steps) < 2:
            return None
        if self.flaky_flag or _alternates(self.steps):
            return "flaky"
        return step_label(self.steps[-2], self.steps[-1])

    def as_dict(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "label": self.label,
            "chain": [
                {"run": s.run, "status": s.status, "layer": s.layer, "signature": s.signature}
                for s in self.steps
            ],
        }


def _depth(layer: str | None) -> int | None:
    try:
        return Layer(layer).depth if layer else None
    except ValueError:
        return None


def step_label(before: Step, after: Step) -> str | None:
    if not before.failing and after.failing:
        return "new"
    if before.failing and not after.failing:
        return "fixed" if after.status is not None else None
    if not before.failing:
        return None
    d0, d1 = _depth(before.layer), _depth(after.layer)
    if d0 is not None and d1 is not None and d0 != d1:
        return "deeper" if d1 > d0 else "shallower"
    if before.signature != after.signature or before.layer != after.layer:
        return "changed"
    return "still_failing"


def _alternates(steps: Sequence[Step]) -> bool:
    states = [s.failing for s in steps if s.status is not None]
    flips = sum(1 for a, b in pairwise(states) if a != b)
    return len(states) >= 3 and flips >= 2


def follow_cases(runs: Sequence[tuple[str, Iterable[Row]]]) -> list[CaseMigration]:
    """Per case, its steps across ``runs`` (``(run name, outcomes)``, oldest first)."""
    tables = [(name, {r.case: r for r in records(rows)}) for name, rows in runs]
    cases: dict[str, None] = {}
    for _, table in tables:
        cases.update(dict.fromkeys(table))
    result = []
    for case in cases:
        migration = CaseMigration(case)
        for name, table in tables:
            row = table.get(case)
            migration.steps.append(
                Step(
                    name,
                    row.status.value if row else None,
                    row.layer if row else None,
                    row.signature if row else None,
                )
            )
        last = tables[-1][1].get(case) if tables else None
        migration.flaky_flag = bool(last and last.flaky)
        result.append(migration)
    return result


def compare(
    base: tuple[str, Iterable[Row]], new: tuple[str, Iterable[Row]]
) -> dict[str, list[CaseMigration]]:
    """``instep compare``: the cases of two runs grouped by label (see :data:`LABELS`)."""
    groups: dict[str, list[CaseMigration]] = {label: [] for label in LABELS}
    for migration in follow_cases([base, new]):
        label = migration.label
        if label is not None:
            groups[label].append(migration)
    return groups
