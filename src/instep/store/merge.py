"""``instep merge``: copy the runs of other stores (other hosts, other shards) into one.

A run is identified by its ``uid``: merging the same store twice copies nothing the
second time. A run whose *name* is taken by a different run is copied as
``NAME@HOST`` (plus the uid's start if that is taken too). Cases are matched by node id,
so outcomes of one case from several hosts meet under one case row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select

from instep.errors import MissingInput
from instep.store.queries import Store
from instep.store.schema import Case, Outcome, Run, RunCase

_RUN_COPY = (
    "profile",
    "tier",
    "shard",
    "host",
    "status",
    "started_at",
    "finished_at",
    "argv",
    "settings",
    "version_matrix",
)


@dataclass
class MergeReport:
    copied: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    outcomes: int = 0


def merge_into(target: Store, sources: list[str]) -> MergeReport:
    report = MergeReport()
    for source in sources:
        if "://" not in source and not Path(source).is_file():
            raise MissingInput(f"merge: store {source} does not exist")
        with Store(source) as src:
            for run in src.list_runs():
                _copy_run(src, target, run, report)
    return report


def _copy_run(src: Store, target: Store, run: Run, report: MergeReport) -> None:
    with target.session() as s:
        if s.scalar(select(Run.id).where(Run.uid == run.uid)) is not None:
            report.skipped.append(run.name)
            return
        name = run.name
        for candidate in (
            run.name,
            f"{run.name}@{run.host}",
            f"{run.name}@{run.host}-{run.uid[:6]}",
        ):
            name = candidate
            if s.scalar(select(Run.id).where(Run.name == candidate)) is None:
                break
    with src.session() as s:
        plan = list(
            s.execute(
                select(RunCase.position, RunCase.timeout, RunCase.case_id).where(
                    RunCase.run_id == run.id
                )
            )
        )
        outcomes = list(s.scalars(select(Outcome).where(Outcome.run_id == run.id)))
        nodeids = {c.id: (c.nodeid, c.file) for c in (o.case for o in outcomes)}
        for case in s.scalars(select(Case).where(Case.id.in_([p[2] for p in plan]))):
            nodeids[case.id] = (case.nodeid, case.file)
    ids = target.case_ids(nodeids.values())
    columns = [
        c.name for c in Outcome.__table__.columns if c.name not in ("id", "run_id", "case_id")
    ]
    with target.session() as s:
        new = Run(uid=run.uid, name=name, **{k: getattr(run, k) for k in _RUN_COPY})
        s.add(new)
        s.flush()
        s.add_all(
            RunCase(run_id=new.id, case_id=ids[nodeids[cid][0]], position=pos, timeout=t)
            for pos, t, cid in plan
        )
        for o in outcomes:
            s.add(
                Outcome(
                    run_id=new.id,
                    case_id=ids[nodeids[o.case_id][0]],
                    **{c: getattr(o, c) for c in columns},
                )
            )
        s.commit()
    report.copied.append(name)
    report.outcomes += len(outcomes)
