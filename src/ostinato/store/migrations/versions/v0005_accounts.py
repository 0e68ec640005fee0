"""Accounts: API keys (their hashes) and the counters behind per-owner limits.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-10

- ``api_keys``: one row per key: its owner, a name, the SHA-256 of its secret, when it
  expires and when it was revoked. The secret itself is never stored.
- ``limit_slots``: what owners hold for a while (running turns, open streams), each
  with an expiry its holder keeps moving, so a crashed holder's slot frees itself.
- ``limit_events``: what is counted over a sliding window (turns per minute).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None

_TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("owner", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("expires_at", _TIME, nullable=True),
        sa.Column("revoked_at", _TIME, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_api_keys"),
    )
    op.create_index("ix_api_keys_owner", "api_keys", ["owner"])
    op.create_table(
        "limit_slots",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("owner", sa.String(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("expires_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_limit_slots"),
    )
    op.create_index(
        "ix_limit_slots_owner_kind_expires_at", "limit_slots", ["owner", "kind", "expires_at"]
    )
    op.create_table(
        "limit_events",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("owner", sa.String(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_limit_events"),
    )
    op.create_index("ix_limit_events_owner_kind_at", "limit_events", ["owner", "kind", "at"])


def downgrade() -> None:
    op.drop_table("limit_events")
    op.drop_table("limit_slots")
    op.drop_table("api_keys")
