"""The result store's tables (SQLAlchemy 2): ``Run``, ``Case``, ``RunCase``, ``Outcome``.

A *case* is a pytest node id, shared by every run that executed it, so a case can be
followed across runs. A *run* holds its plan (``RunCase``: which cases, in which order,
with which timeout) and one ``Outcome`` per attempt of a case; the last attempt of a case
is marked ``final``. ``(run, case, attempt)`` is unique, which is what makes a SIGKILL at
any moment followed by ``--resume`` produce no duplicate.

Columns that later stages fill (``layer``, ``category``, ``signature``, ``confidence``,
``evidence``...) exist from the first migration and stay null until then. The schema is
created and upgraded only through the alembic migrations in ``migrations/``; this module
declares it and holds no queries (see ``queries.py``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

#: Run statuses.
RUN_STATUSES = ("running", "finished", "interrupted")


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON}


class Run(Base):
    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uid: Mapped[str] = mapped_column(String(32), unique=True, doc="globally unique, for merge")
    name: Mapped[str] = mapped_column(String(200), unique=True)
    profile: Mapped[str] = mapped_column(String(100))
    tier: Mapped[str | None] = mapped_column(String(100))
    shard: Mapped[str | None] = mapped_column(String(20), doc="'K/N' or null")
    host: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(20), default="running")
    started_at: Mapped[datetime] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    argv: Mapped[list[Any]] = mapped_column(JSON, default=list)
    settings: Mapped[dict[str, Any]] = mapped_column(
        JSON, default=dict, doc="paths, -k, isolation, timeout, reruns: what --resume reuses"
    )
    version_matrix: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    plan: Mapped[list[RunCase]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="RunCase.position"
    )


class Case(Base):
    __tablename__ = "cases"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    nodeid: Mapped[str] = mapped_column(String(2000), unique=True)
    file: Mapped[str] = mapped_column(String(1000))


class RunCase(Base):
    """One case planned in a run: what ``--resume`` and progress totals are computed from."""

    __tablename__ = "run_cases"
    __table_args__ = (UniqueConstraint("run_id", "case_id", name="uq_run_case"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    case_id: Mapped[int] = mapped_column(ForeignKey("cases.id"))
    position: Mapped[int] = mapped_column(Integer)
    timeout: Mapped[float | None] = mapped_column(Float, doc="per-case override, seconds")

    run: Mapped[Run] = relationship(back_populates="plan")
    case: Mapped[Case] = relationship()


class Outcome(Base):
    """What one attempt of one case gave."""

    __tablename__ = "outcomes"
    __table_args__ = (
        UniqueConstraint("run_id", "case_id", "attempt", name="uq_outcome_attempt"),
        Index("ix_outcome_run_final", "run_id", "final"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    case_id: Mapped[int] = mapped_column(ForeignKey("cases.id"), index=True)
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    final: Mapped[bool] = mapped_column(Boolean, default=True)
    flaky: Mapped[bool] = mapped_column(Boolean, default=False)
    status: Mapped[str] = mapped_column(String(20))
    duration: Mapped[float | None] = mapped_column(Float)
    started_at: Mapped[datetime | None] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    worker: Mapped[int | None] = mapped_column(Integer)
    device: Mapped[str | None] = mapped_column(String(50))
    pid: Mapped[int | None] = mapped_column(Integer)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    signal: Mapped[str | None] = mapped_column(String(20))
    # triage (filled later; the runner leaves most of these null)
    layer: Mapped[str | None] = mapped_column(String(30))
    category: Mapped[str | None] = mapped_column(String(100))
    signature: Mapped[str | None] = mapped_column(String(200), index=True)
    stage: Mapped[str | None] = mapped_column(String(50))
    confidence: Mapped[float | None] = mapped_column(Float)
    evidence: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # what happened
    exception_type: Mapped[str | None] = mapped_column(String(300))
    message: Mapped[str | None] = mapped_column(Text)
    exception_chain: Mapped[list[Any]] = mapped_column(JSON, default=list)
    longrepr: Mapped[str | None] = mapped_column(Text)
    skip_reason: Mapped[str | None] = mapped_column(Text)
    warnings: Mapped[list[Any]] = mapped_column(JSON, default=list)
    stdout_tail: Mapped[str | None] = mapped_column(Text)
    stderr_tail: Mapped[str | None] = mapped_column(Text)
    timings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict, doc="per pytest phase")
    stage_timings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict, doc="compile counters")
    artifacts: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    case: Mapped[Case] = relationship()
