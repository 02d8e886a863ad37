"""Reads and writes of the result store: runs, their plan, outcomes, durations.

:class:`Store` wraps an engine opened by ``database.open_engine``; every write is its own
short transaction (one commit per finished outcome), so a runner killed at any moment
leaves every outcome it recorded. Rows are returned as plain dicts (``outcome_dict``,
``run_dict``) for printers and exporters; nothing here renders or runs tests.
"""

from __future__ import annotations

import logging
import socket
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, contains_eager

from instep.errors import BadInput, MissingInput
from instep.outcome import OutcomeRecord, records
from instep.store.database import describe, open_engine
from instep.store.schema import Case, Outcome, Run, RunCase

log = logging.getLogger(__name__)

_OUTCOME_COLUMNS = frozenset(c.name for c in Outcome.__table__.columns) - {
    "id",
    "run_id",
    "case_id",
}
_OUTCOME_DEFAULTS: dict[str, Any] = {
    "attempt": 1,
    "final": True,
    "flaky": False,
    **{key: {} for key in ("evidence", "timings", "stage_timings", "metrics", "artifacts")},
    "exception_chain": [],
    "warnings": [],
}
#: Keys of ``outcome_dict`` in order; ``instep show`` prints these.
OUTCOME_FIELDS = (
    "case",
    "status",
    "duration",
    "attempt",
    "final",
    "flaky",
    "layer",
    "category",
    "signature",
    "stage",
    "confidence",
    "exception_type",
    "message",
    "signal",
    "exit_code",
    "skip_reason",
    "worker",
    "device",
    "pid",
    "started_at",
    "finished_at",
    "timings",
    "stage_timings",
    "metrics",
    "warnings",
    "exception_chain",
    "evidence",
    "artifacts",
    "stdout_tail",
    "stderr_tail",
    "longrepr",
)


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def new_run_name() -> str:
    """A generated run name: sortable by time, unique enough across hosts."""
    return f"{utcnow():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"


class Store:
    """The result store at ``target`` (path or URL), migrated to the current schema.

    A context manager: ``with Store(target) as store:`` closes it (disposes of its
    engine) on leaving the block, whatever happened inside."""

    def __init__(self, target: str | Path) -> None:
        self.target = str(target)
        self.engine: Engine = open_engine(target)
        self._case_ids: dict[str, int] = {}  # node id -> id; case rows are never deleted

    def __repr__(self) -> str:
        return f"Store({describe(self.target)})"

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def session(self) -> Session:
        return Session(self.engine, expire_on_commit=False)

    # ---- runs ---------------------------------------------------------------------------

    def create_run(
        self,
        *,
        name: str | None,
        profile: str,
        settings: dict[str, Any],
        argv: Sequence[str] = (),
        tier: str | None = None,
        shard: str | None = None,
        version_matrix: dict[str, Any] | None = None,
        started_at: datetime | None = None,
    ) -> Run:
        """A new run, ``running``; ``started_at`` (naive UTC) defaults to now: an importer or
        a test may give the time a run really started."""
        name = name or new_run_name()
        run = Run(
            uid=uuid.uuid4().hex,
            name=name,
            profile=profile,
            tier=tier,
            shard=shard,
            host=socket.gethostname(),
            status="running",
            started_at=started_at or utcnow(),
            argv=list(argv),
            settings=settings,
            version_matrix=version_matrix or {},
        )
        with self.session() as s:
            if s.scalar(select(Run.id).where(Run.name == name)) is not None:
                raise BadInput(
                    f"--run {name}: a run of that name exists in {describe(self.target)};"
                    " pick another name or use --resume"
                )
            s.add(run)
            try:
                s.commit()
            except IntegrityError as exc:
                raise BadInput(f"--run {name}: a run of that name exists") from exc
        return run

    def get_run(self, ref: str) -> Run:
        """A run by name, by numeric id, or ``latest``."""
        with self.session() as s:
            if ref == "latest":
                run = s.scalar(select(Run).order_by(Run.started_at.desc(), Run.id.desc()))
            else:
                run = s.scalar(select(Run).where(Run.name == ref))
                if run is None and ref.isdigit():
                    run = s.get(Run, int(ref))
        if run is None:
            raise MissingInput(f"run '{ref}' not found in {describe(self.target)}")
        return run

    def list_runs(self) -> list[Run]:
        with self.session() as s:
            return list(s.scalars(select(Run).order_by(Run.started_at, Run.id)))

    def update_run(self, run_id: int, **values: Any) -> None:
        with self.session() as s:
            s.execute(update(Run).where(Run.id == run_id).values(**values))
            s.commit()

    def finish_run(self, run_id: int, status: str = "finished") -> None:
        self.update_run(run_id, status=status, finished_at=utcnow())

    # ---- cases and the plan -------------------------------------------------------------

    def case_ids(self, cases: Iterable[tuple[str, str]]) -> dict[str, int]:
        """Ids of ``(nodeid, file)`` cases, inserting the new ones (race-free)."""
        wanted = list(cases)
        rows = [{"nodeid": n, "file": f} for n, f in wanted if n not in self._case_ids]
        if rows:
            dialect = self.engine.dialect.name
            ins = (postgresql if dialect == "postgresql" else sqlite).insert(Case)
            stmt = ins.on_conflict_do_nothing(index_elements=["nodeid"])
            with self.session() as s:
                for start in range(0, len(rows), 500):
                    chunk = rows[start : start + 500]
                    s.execute(stmt, chunk)
                    names = [r["nodeid"] for r in chunk]
                    found = s.execute(select(Case.nodeid, Case.id).where(Case.nodeid.in_(names)))
                    self._case_ids.update({n: i for n, i in found})
                s.commit()
        return {n: self._case_ids[n] for n, _ in wanted}

    def set_plan(self, run_id: int, cases: Sequence[tuple[str, str, float | None]]) -> None:
        """The run's cases ``(nodeid, file, timeout)``, in execution order."""
        ids = self.case_ids((n, f) for n, f, _ in cases)
        with self.session() as s:
            s.add_all(
                RunCase(run_id=run_id, case_id=ids[n], position=i, timeout=t)
                for i, (n, _, t) in enumerate(cases)
            )
            s.commit()

    def plan(self, run_id: int) -> list[tuple[str, str, float | None]]:
        with self.session() as s:
            rows = s.execute(
                select(Case.nodeid, Case.file, RunCase.timeout)
                .join(RunCase, RunCase.case_id == Case.id)
                .where(RunCase.run_id == run_id)
                .order_by(RunCase.position)
            )
            return [(n, f, t) for n, f, t in rows]

    # ---- outcomes -----------------------------------------------------------------------

    def record_outcome(self, run_id: int, nodeid: str, file: str, data: dict[str, Any]) -> bool:
        """Store one attempt; ``False`` if that attempt was already stored (no duplicate)."""
        case_id = self.case_ids([(nodeid, file)])[nodeid]
        values = {**_OUTCOME_DEFAULTS, **{k: v for k, v in data.items() if k in _OUTCOME_COLUMNS}}
        try:
            with self.engine.begin() as conn:  # Core insert: one short transaction
                conn.execute(insert(Outcome), [{**values, "run_id": run_id, "case_id": case_id}])
        except IntegrityError:
            log.warning("outcome of %s attempt %s already stored", nodeid, data.get("attempt"))
            return False
        return True

    def set_evidence(self, run_id: int, key: str, by_case: dict[str, Any]) -> int:
        """Write ``by_case[nodeid]`` into ``evidence[key]`` of each final outcome of the run
        (removing the key where the case has no value); returns how many rows changed."""
        return self.set_evidence_keys(run_id, {key: by_case})

    def set_evidence_keys(self, run_id: int, by_key: dict[str, dict[str, Any]]) -> int:
        """:meth:`set_evidence` for several keys in one pass over the run's outcomes (each
        row read and written once)."""
        changed = 0
        with self.engine.begin() as conn:  # only the evidence column is read and written
            rows = conn.execute(
                select(Outcome.id, Case.nodeid, Outcome.evidence)
                .join(Case, Case.id == Outcome.case_id)
                .where(Outcome.run_id == run_id, Outcome.final.is_(True))
            ).all()
            for outcome_id, nodeid, stored in rows:
                evidence = dict(stored or {})
                for key, by_case in by_key.items():
                    value = by_case.get(nodeid)
                    if value is None:
                        evidence.pop(key, None)
                    else:
                        evidence[key] = value
                if evidence == (stored or {}):
                    continue
                conn.execute(
                    update(Outcome).where(Outcome.id == outcome_id).values(evidence=evidence)
                )
                changed += 1
        return changed

    def attempts(self, run_id: int) -> dict[str, list[tuple[int, str, bool]]]:
        """Per case: ``(attempt, status, final)`` of every stored attempt, in order."""
        out: dict[str, list[tuple[int, str, bool]]] = {}
        with self.session() as s:
            rows = s.execute(
                select(Case.nodeid, Outcome.attempt, Outcome.status, Outcome.final)
                .join(Case, Case.id == Outcome.case_id)
                .where(Outcome.run_id == run_id)
                .order_by(Outcome.attempt)
            )
            for nodeid, attempt, status, final in rows:
                out.setdefault(nodeid, []).append((attempt, status, bool(final)))
        return out

    def outcomes(self, run_id: int, *, final_only: bool = True) -> list[Outcome]:
        with self.session() as s:
            query = (
                select(Outcome)
                .join(RunCase, (RunCase.case_id == Outcome.case_id) & (RunCase.run_id == run_id))
                .join(Outcome.case)
                .options(contains_eager(Outcome.case))  # cases in the same query, not one each
                .where(Outcome.run_id == run_id)
                .order_by(RunCase.position, Outcome.attempt)
            )
            if final_only:
                query = query.where(Outcome.final.is_(True))
            return list(s.scalars(query))

    def outcome_rows(self, run_id: int, *, final_only: bool = True) -> list[dict[str, Any]]:
        """:meth:`outcomes` as plain dicts (:func:`outcome_dict`), what reports and triage read."""
        return [outcome_dict(o) for o in self.outcomes(run_id, final_only=final_only)]

    def outcome_records(self, run_id: int, *, final_only: bool = True) -> list[OutcomeRecord]:
        """:meth:`outcome_rows` as typed records (:class:`~instep.outcome.OutcomeRecord`)."""
        return records(self.outcome_rows(run_id, final_only=final_only))

    def status_counts(self, run_id: int) -> Counter[str]:
        with self.session() as s:
            rows = s.execute(
                select(Outcome.status, func.count())
                .where(Outcome.run_id == run_id, Outcome.final.is_(True))
                .group_by(Outcome.status)
            )
            return Counter({status: n for status, n in rows})

    def planned_count(self, run_id: int) -> int:
        with self.session() as s:
            return s.scalar(select(func.count()).where(RunCase.run_id == run_id)) or 0

    def durations(self, nodeids: Iterable[str]) -> dict[str, float]:
        """The latest duration of each case in an *unsharded* run, for shard balancing.

        Sharded runs are left out on purpose: shard 1 finishing before shard 2 starts
        must not change the durations shard 2 balances with (the shards would overlap).
        """
        wanted = list(nodeids)
        out: dict[str, float] = {}
        with self.session() as s:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                rows = s.execute(
                    select(Case.nodeid, Outcome.duration)
                    .join(Outcome, Outcome.case_id == Case.id)
                    .join(Run, Run.id == Outcome.run_id)
                    .where(
                        Case.nodeid.in_(chunk),
                        Outcome.duration.is_not(None),
                        Run.shard.is_(None),
                    )
                    .order_by(Outcome.id)
                )
                out.update({n: float(d) for n, d in rows})
        return out


def run_dict(run: Run, counts: Counter[str] | None = None, planned: int | None = None) -> dict:
    data = {
        "name": run.name,
        "uid": run.uid,
        "profile": run.profile,
        "tier": run.tier,
        "shard": run.shard,
        "host": run.host,
        "status": run.status,
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "argv": run.argv,
        "settings": run.settings,
        "version_matrix": run.version_matrix,
    }
    if counts is not None:
        data["counts"] = dict(sorted(counts.items()))
    if planned is not None:
        data["planned"] = planned
    return data


def outcome_dict(outcome: Outcome) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key in OUTCOME_FIELDS:
        value = outcome.case.nodeid if key == "case" else getattr(outcome, key)
        data[key] = _iso(value) if isinstance(value, datetime) else value
    return data


def _iso(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") + "Z" if value else None
