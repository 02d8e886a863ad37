"""Classify a stored run's failures again (``instep triage``, ``compare``, ``--bisect``).

The runner classifies each outcome as it arrives; runs stored before triage existed, or
after the profile's rules changed, are brought up to date here by updating the stored
outcomes' layer, category, signature, confidence and ``evidence.triage``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from instep.outcome import FAILING
from instep.profiles import Profile
from instep.store import outcome_dict
from instep.store.schema import Outcome
from instep.triage.classifier import Classifier


def reclassify_run(store: Any, run: Any, profile: Profile, every: bool = False) -> int:
    """Classify the final failing outcomes of ``run`` lacking a signature (or all)."""
    classifier = Classifier(profile)
    changed = 0
    with store.session() as s:
        rows = s.scalars(
            select(Outcome).where(
                Outcome.run_id == run.id,
                Outcome.final.is_(True),
                Outcome.status.in_(sorted(s.value for s in FAILING)),
            )
        ).all()
        for outcome in rows:
            if outcome.signature and not every:
                continue
            data = outcome_dict(outcome)
            found = classifier.classify(data)
            if found is None:
                continue
            values: dict[str, Any] = {"evidence": data.get("evidence")}
            found.apply(values)
            for key in ("layer", "category", "signature", "confidence", "evidence"):
                setattr(outcome, key, values[key])
            changed += 1
        s.commit()
    return changed
