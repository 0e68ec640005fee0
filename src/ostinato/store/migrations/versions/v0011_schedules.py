"""Schedules: prompts and reminders that fire at a time, and who holds each while it fires.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    time = sa.DateTime(timezone=True)
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("owner", sa.String(), nullable=False),
        sa.Column("conversation_id", sa.String(), nullable=False),
        sa.Column("mode", sa.String(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("spec", sa.String(), nullable=False),
        sa.Column("zone", sa.String(), nullable=False),
        sa.Column("created_at", time, nullable=False),
        sa.Column("next_fire", time, nullable=True),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("holder", sa.String(), nullable=True),
        sa.Column("lease_until", time, nullable=True),
        sa.Column("fired", sa.Integer(), nullable=False),
        sa.Column("last_fired_at", time, nullable=True),
        sa.Column("late_seconds", sa.Float(), nullable=True),
        sa.Column("wake_at", time, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_schedules"),
    )
    op.create_index("ix_schedules_wake_at", "schedules", ["wake_at"])
    op.create_index("ix_schedules_owner_state", "schedules", ["owner", "state"])


def downgrade() -> None:
    op.drop_index("ix_schedules_owner_state", table_name="schedules")
    op.drop_index("ix_schedules_wake_at", table_name="schedules")
    op.drop_table("schedules")
