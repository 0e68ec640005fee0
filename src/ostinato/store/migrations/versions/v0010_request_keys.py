"""Idempotency keys: what the first request sent with a client's key did.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "request_keys",
        sa.Column("owner", sa.String(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("conversation_id", sa.String(), nullable=True),
        sa.Column("turn_id", sa.String(), nullable=True),
        sa.Column("after_seq", sa.Integer(), nullable=True),
        sa.Column("queued_id", sa.String(), nullable=True),
        sa.Column("queued_position", sa.BigInteger(), nullable=True),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("response", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("owner", "key", name="pk_request_keys"),
    )
    op.create_index("ix_request_keys_expires_at", "request_keys", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_request_keys_expires_at", table_name="request_keys")
    op.drop_table("request_keys")
