"""What a bundle is about: one case of a run, or one batch of a run, read from the store.

``CASE`` is a node id as stored (``instep show RUN`` lists them) or a unique ``::``
suffix of one (``test_x[a]``, ``Class::test_x``). ``BATCH`` is a batch id as ``instep
triage`` prints it (``B`` + 8 hex digits, :func:`instep.triage.batches.batch_id`); a
batch bundles its representative case (the member that failed fastest) and lists every
member. Unknown runs, cases and batches are one-line :class:`~instep.errors.MissingInput`
errors. This module only reads the store; it renders and runs nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from instep.errors import BadInput, MissingInput
from instep.store import Store, run_dict
from instep.triage.batches import Batch, group_batches

BATCH_ID = re.compile(r"^B[0-9a-f]{8}$")


@dataclass
class Selection:
    """The stored evidence one bundle is built from (plain dicts, as ``instep show`` has)."""

    run: dict[str, Any]  # run_dict
    case: str  # the node id bundled (a batch's representative)
    outcome: dict[str, Any]  # outcome_dict of the case's final attempt
    attempts: list[dict[str, Any]] = field(default_factory=list)  # every attempt, in order
    batch: Batch | None = None
    members: list[dict[str, Any]] = field(default_factory=list)  # a batch's final outcomes

    @property
    def target(self) -> str:
        """What the user asked for: the batch id or the case's node id."""
        return self.batch.id if self.batch is not None else self.case


def select(store: Store, run_ref: str, target: str) -> Selection:
    """The case or batch ``target`` of run ``run_ref`` with its stored outcomes."""
    if not target.strip():
        raise BadInput("instep bundle: give a CASE node id or a BATCH id")
    run = store.get_run(run_ref)
    finals = store.outcome_rows(run.id)
    run_data = run_dict(run, store.status_counts(run.id), store.planned_count(run.id))
    batch: Batch | None = None
    members: list[dict[str, Any]] = []
    if BATCH_ID.match(target):
        batch = _find_batch(finals, target, run.name)
        wanted = set(batch.cases)
        members = [o for o in finals if o["case"] in wanted]
        case = str(batch.representative)
    else:
        case = resolve_case(target, [o["case"] for o in finals], run.name)
    outcome = next(o for o in finals if o["case"] == case)
    attempts = [r for r in store.outcome_rows(run.id, final_only=False) if r["case"] == case]
    return Selection(run_data, case, outcome, attempts, batch, members)


def resolve_case(target: str, nodeids: list[str], run_name: str) -> str:
    """The stored node id ``target`` names: itself, or the one node id it is a suffix of."""
    if target in nodeids:
        return target
    found = [n for n in nodeids if n.endswith("::" + target) or n.endswith("/" + target)]
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise BadInput(
            f"case '{target}' matches {len(found)} cases of run {run_name}"
            f" ({', '.join(found[:3])}{', ...' if len(found) > 3 else ''}): give the node id"
        )
    raise MissingInput(
        f"case '{target}' not found in run {run_name} ({len(nodeids)} cases;"
        f" 'instep show {run_name}' lists them)"
    )


def _find_batch(finals: list[dict[str, Any]], batch_id: str, run_name: str) -> Batch:
    batches = group_batches(finals)
    for batch in batches:
        if batch.id == batch_id:
            return batch
    known = ", ".join(b.id for b in batches[:5]) or "none: no failures"
    raise MissingInput(
        f"batch '{batch_id}' not found in run {run_name} (its batches: {known};"
        f" 'instep triage {run_name}' lists them)"
    )
