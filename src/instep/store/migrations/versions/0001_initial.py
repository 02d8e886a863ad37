"""The first schema: runs, cases, run_cases, outcomes.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("uid", sa.String(32), nullable=False, unique=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("profile", sa.String(100), nullable=False),
        sa.Column("tier", sa.String(100)),
        sa.Column("shard", sa.String(20)),
        sa.Column("host", sa.String(200)),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("started_at", sa.DateTime, nullable=False),
        sa.Column("finished_at", sa.DateTime),
        sa.Column("argv", sa.JSON, nullable=False),
        sa.Column("settings", sa.JSON, nullable=False),
        sa.Column("version_matrix", sa.JSON, nullable=False),
    )
    op.create_table(
        "cases",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("nodeid", sa.String(2000), nullable=False, unique=True),
        sa.Column("file", sa.String(1000), nullable=False),
    )
    op.create_table(
        "run_cases",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("case_id", sa.Integer, sa.ForeignKey("cases.id"), nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("timeout", sa.Float),
        sa.UniqueConstraint("run_id", "case_id", name="uq_run_case"),
    )
    op.create_index("ix_run_cases_run_id", "run_cases", ["run_id"])
    op.create_table(
        "outcomes",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("case_id", sa.Integer, sa.ForeignKey("cases.id"), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("final", sa.Boolean, nullable=False),
        sa.Column("flaky", sa.Boolean, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("duration", sa.Float),
        sa.Column("started_at", sa.DateTime),
        sa.Column("finished_at", sa.DateTime),
        sa.Column("worker", sa.Integer),
        sa.Column("device", sa.String(50)),
        sa.Column("pid", sa.Integer),
        sa.Column("exit_code", sa.Integer),
        sa.Column("signal", sa.String(20)),
        sa.Column("layer", sa.String(30)),
        sa.Column("category", sa.String(100)),
        sa.Column("signature", sa.String(200)),
        sa.Column("stage", sa.String(50)),
        sa.Column("confidence", sa.Float),
        sa.Column("evidence", sa.JSON, nullable=False),
        sa.Column("exception_type", sa.String(300)),
        sa.Column("message", sa.Text),
        sa.Column("exception_chain", sa.JSON, nullable=False),
        sa.Column("longrepr", sa.Text),
        sa.Column("skip_reason", sa.Text),
        sa.Column("warnings", sa.JSON, nullable=False),
        sa.Column("stdout_tail", sa.Text),
        sa.Column("stderr_tail", sa.Text),
        sa.Column("timings", sa.JSON, nullable=False),
        sa.Column("stage_timings", sa.JSON, nullable=False),
        sa.Column("metrics", sa.JSON, nullable=False),
        sa.Column("artifacts", sa.JSON, nullable=False),
        sa.UniqueConstraint("run_id", "case_id", "attempt", name="uq_outcome_attempt"),
    )
    op.create_index("ix_outcome_run_final", "outcomes", ["run_id", "final"])
    op.create_index("ix_outcomes_case_id", "outcomes", ["case_id"])
    op.create_index("ix_outcomes_signature", "outcomes", ["signature"])


def downgrade() -> None:
    op.drop_table("outcomes")
    op.drop_table("run_cases")
    op.drop_table("cases")
    op.drop_table("runs")
