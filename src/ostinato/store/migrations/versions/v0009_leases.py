"""Leases: the server processes that run turns, and which one holds each turn.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-10
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "servers",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column("machine", sa.String(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("pid_start", sa.String(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("renewed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_servers"),
    )
    # Turns and queued inputs written before leases existed have no holder: recovery
    # treats them as it always did (nobody holds them).
    op.add_column("turns", sa.Column("holder", sa.String(), nullable=True))
    op.add_column("queued_inputs", sa.Column("holder", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("queued_inputs") as batch:
        batch.drop_column("holder")
    with op.batch_alter_table("turns") as batch:
        batch.drop_column("holder")
    op.drop_table("servers")
