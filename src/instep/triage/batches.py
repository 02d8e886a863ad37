"""Batches: a run's failures grouped by root cause, with ids stable across runs.

A batch is the set of failing final outcomes sharing ``(layer, category, signature)``
(seed 000 section 7). Its id is a hash of that triple, so the same root cause has the
same id in every run and on every host: a batch of last week's run can be followed in
today's (:func:`follow`). The representative is the member that failed fastest (the
cheapest reproducer). Batch ids are stored in each member outcome's
``evidence.batch`` (:func:`store_batches`); nothing here classifies or renders.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from instep.layers import Layer
from instep.outcome import FAILING, OutcomeRecord, records


def batch_id(layer: str | None, category: str | None, signature: str | None) -> str:
    """``B`` + 8 hex digits of the root-cause triple: equal in every run for one cause."""
    key = "\x1f".join((layer or "", category or "", signature or ""))
    return "B" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:8]


@dataclass
class Batch:
    id: str
    layer: str | None
    category: str | None
    signature: str | None
    cases: list[str] = field(default_factory=list)
    representative: str | None = None
    statuses: dict[str, int] = field(default_factory=dict)

    @property
    def depth(self) -> int:
        try:
            return Layer(self.layer).depth if self.layer else 99
        except ValueError:
            return 99

    def as_dict(self) -> dict[str, Any]:
        return {
            "batch": self.id,
            "layer": self.layer,
            "category": self.category,
            "signature": self.signature,
            "cases": list(self.cases),
            "size": len(self.cases),
            "representative": self.representative,
            "statuses": dict(self.statuses),
        }


def group_batches(outcomes: Iterable[OutcomeRecord | dict[str, Any]]) -> list[Batch]:
    """Batches of the failing outcomes (records or ``outcome_dict`` rows), largest first."""
    found: dict[str, Batch] = {}
    fastest: dict[str, float] = {}
    for row in records(outcomes):
        if not row.failing:
            continue
        bid = batch_id(row.layer, row.category, row.signature)
        batch = found.setdefault(bid, Batch(bid, row.layer, row.category, row.signature))
        case = row.case
        batch.cases.append(case)
        status = row.status.value
        batch.statuses[status] = batch.statuses.get(status, 0) + 1
        duration = float(row.duration or 0.0)
        if batch.representative is None or duration < fastest[bid]:
            batch.representative, fastest[bid] = case, duration
    return sorted(found.values(), key=lambda b: (-len(b.cases), b.depth, b.id))


def batch_hints(
    batches: Iterable[Batch], outcomes: Iterable[OutcomeRecord | dict[str, Any]]
) -> list[tuple[str, str]]:
    """What to do for a batch, where the profile's rule that filed it says (its ``hint``):
    ``(batch id, hint)`` read from the representative's ``evidence.triage.rule``."""
    by_case = {o.case: o for o in records(outcomes)}
    hints = []
    for b in batches:
        row = by_case.get(b.representative or (b.cases[0] if b.cases else ""))
        rule = ((row.evidence if row else {}).get("triage") or {}).get("rule") or {}
        if rule.get("hint"):
            hints.append((b.id, str(rule["hint"])))
    return hints


def select_batches(batches: Iterable[Batch], refs: Iterable[str]) -> list[Batch]:
    """The batches named in ``refs`` by id (``B1a2b3c4d``) or by signature; all without."""
    wanted = set(refs)
    if not wanted:
        return list(batches)
    return [b for b in batches if b.id in wanted or (b.signature or "") in wanted]


@dataclass
class BatchProgress:
    """How the members of an earlier run's batch fared in a later run."""

    batch: Batch
    passed: list[str] = field(default_factory=list)
    same: list[str] = field(default_factory=list)  # still in the same batch
    moved: dict[str, str] = field(default_factory=dict)  # case -> its new batch id
    missing: list[str] = field(default_factory=list)

    @property
    def judgement(self) -> str:
        total = len(self.batch.cases)
        if self.missing and len(self.missing) == total:
            return "not re-run"
        if len(self.passed) == total:
            return "fixed"
        if self.moved and not self.same:
            return "sank: errors changed (re-classify the new batches)"
        if self.passed:
            return "partly fixed: the rest still fails" + (
                ", some with new errors" if self.moved else ""
            )
        if self.moved:
            return "open: some errors changed"
        return "open"

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.batch.as_dict(),
            "passed": len(self.passed),
            "failed": len(self.same) + len(self.moved),
            "moved": dict(self.moved),
            "missing": list(self.missing),
            "judgement": self.judgement,
        }


def follow(
    base: list[Batch], new_outcomes: Iterable[OutcomeRecord | dict[str, Any]]
) -> list[BatchProgress]:
    """For each batch of the base run: its members' state in the new run."""
    rows = {r.case: r for r in records(new_outcomes)}
    out = []
    for batch in base:
        progress = BatchProgress(batch)
        for case in batch.cases:
            row = rows.get(case)
            if row is None:
                progress.missing.append(case)
            elif not row.failing:
                progress.passed.append(case)
            else:
                now = batch_id(row.layer, row.category, row.signature)
                if now == batch.id:
                    progress.same.append(case)
                else:
                    progress.moved[case] = now
        out.append(progress)
    return out


def store_batches(
    store: Any, run_id: int, batches: list[Batch], also: dict[str, dict[str, Any]] | None = None
) -> int:
    """Write each member's batch id into its final outcome's ``evidence.batch`` (and the
    evidence keys ``also`` gives, in the same pass: ``{"culprits": {nodeid: ...}}``)."""
    ids = {case: b.id for b in batches for case in b.cases}
    return store.set_evidence_keys(run_id, {"batch": ids, **(also or {})})


def first_seen(store: Any, run: Any) -> dict[str, str]:
    """For every batch id of runs started before ``run``: the name of the first run it was in.

    Read from the stored layer/category/signature of final failing outcomes (no
    re-classification), so a batch of today's run can say since when it has existed.
    """
    # SQLAlchemy only for the store functions: grouping stays store-free
    from sqlalchemy import select

    from instep.store.schema import Outcome, Run

    seen: dict[str, str] = {}
    with store.session() as s:
        rows = s.execute(
            select(Run.name, Outcome.layer, Outcome.category, Outcome.signature)
            .join(Run, Run.id == Outcome.run_id)
            .where(
                Outcome.final.is_(True),
                Outcome.status.in_(sorted(s.value for s in FAILING)),
                Outcome.signature.is_not(None),
                Run.id != run.id,
                Run.started_at <= run.started_at,
            )
            .order_by(Run.started_at, Run.id)
        )
        for name, layer, category, signature in rows:
            seen.setdefault(batch_id(layer, category, signature), name)
    return seen
