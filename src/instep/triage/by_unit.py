"""A run's outcomes grouped by impact unit: the unit that selected each case's test file
(``instep run --impact`` records it in the run's ``settings.impact.units_of``) and the
unit triage named as each failure's likely cause (``evidence.culprits``, first one).

Only counting: nothing here selects, attributes or renders (``instep show --by-unit``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from instep.outcome import FAILING, PASSING


@dataclass
class UnitOutcomes:
    """The outcomes one unit is tied to, counted by status."""

    unit: str
    title: str | None = None
    passed: int = 0
    failed: int = 0
    other: int = 0  # skipped, expected failures, not run...
    cases: list[str] = field(default_factory=list)

    def count(self, case: str, status: str) -> None:
        self.cases.append(case)
        if status in PASSING:
            self.passed += 1
        elif status in FAILING:
            self.failed += 1
        else:
            self.other += 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "title": self.title,
            "passed": self.passed,
            "failed": self.failed,
            "other": self.other,
            "cases": self.cases,
        }


def by_unit(
    outcomes: Iterable[dict[str, Any]], settings: dict[str, Any] | None
) -> tuple[list[UnitOutcomes], list[UnitOutcomes]]:
    """(by the unit that selected the case, by the case's first culprit), each unit with
    most failures first; a case selected by two units counts for both."""
    units_of: dict[str, list[str]] = ((settings or {}).get("impact") or {}).get("units_of") or {}
    selected: dict[str, UnitOutcomes] = {}
    culprit: dict[str, UnitOutcomes] = {}
    for o in outcomes:
        case, status = str(o["case"]), str(o["status"])
        for unit in units_of.get(case.split("::", 1)[0], ()):
            selected.setdefault(unit, UnitOutcomes(unit)).count(case, status)
        ranked = (o.get("evidence") or {}).get("culprits") or []
        if ranked:
            first = ranked[0]
            group = culprit.setdefault(str(first["unit"]), UnitOutcomes(str(first["unit"])))
            group.title = group.title or first.get("title")
            group.count(case, status)

    def order(groups: dict[str, UnitOutcomes]) -> list[UnitOutcomes]:
        return sorted(groups.values(), key=lambda g: (-g.failed, -len(g.cases), g.unit))

    return order(selected), order(culprit)
