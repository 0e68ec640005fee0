"""Two-stage schedules and idle-gated background jobs.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02

``schedules`` gains ``run_id``, ``result`` and ``attempts``: the run_id of a firing's
work (a prompt's stage one, a background turn), what it answered (kept while the
schedule is ``ran`` so stage two can hand it on after a crash), and how many attempts
at it began. ``job_states`` (one row per owner
and job: its claim and lease, the activity it ran after, its model calls today),
``job_runs`` (what each run changed and cost) and ``memory_uses`` (when recall last
returned a fact) serve the idle-gated jobs.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision: str | None = "0013"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    time = sa.DateTime(timezone=True)
    with op.batch_alter_table("schedules") as batch:
        batch.add_column(sa.Column("run_id", sa.String(), nullable=True))
        batch.add_column(sa.Column("result", sa.Text(), nullable=True))
        batch.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"))
    op.create_table(
        "job_states",
        sa.Column("owner", sa.String(), nullable=False),
        sa.Column("job", sa.String(), nullable=False),
        sa.Column("holder", sa.String(), nullable=True),
        sa.Column("lease_until", time, nullable=True),
        sa.Column("active_at", time, nullable=True),
        sa.Column("last_run_at", time, nullable=True),
        sa.Column("day", sa.String(), nullable=True),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("not_before", time, nullable=True),
        sa.Column("notes", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("owner", "job", name="pk_job_states"),
    )
    op.create_table(
        "job_runs",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("owner", sa.String(), nullable=False),
        sa.Column("job", sa.String(), nullable=False),
        sa.Column("started_at", time, nullable=False),
        sa.Column("finished_at", time, nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("changes", sa.Text(), nullable=False),
        sa.Column("model_calls", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_job_runs"),
    )
    op.create_index("ix_job_runs_owner_started_at", "job_runs", ["owner", "started_at"])
    op.create_table(
        "memory_uses",
        sa.Column("scope", sa.String(), nullable=False),
        sa.Column("memory_id", sa.String(), nullable=False),
        sa.Column("used_at", time, nullable=False),
        sa.PrimaryKeyConstraint("scope", "memory_id", name="pk_memory_uses"),
    )


def downgrade() -> None:
    op.drop_table("memory_uses")
    op.drop_index("ix_job_runs_owner_started_at", table_name="job_runs")
    op.drop_table("job_runs")
    op.drop_table("job_states")
    with op.batch_alter_table("schedules") as batch:
        batch.drop_column("attempts")
        batch.drop_column("result")
        batch.drop_column("run_id")
