"""Spend: budget accounts per day, the holds of calls under way, usage per owner.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03

``spend_days`` keeps, per budget account (``pool`` and ``owner``) and UTC day, the cost
settled and the estimates reserved by calls under way; ``spend_holds`` one row per call
under way (what it reserved, on which accounts, by which server); ``usage_days`` each
owner's calls, tokens and cost by day, model and agent (``store.spend``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision: str | None = "0014"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "spend_days",
        sa.Column("pool", sa.String(16), nullable=False),
        sa.Column("owner", sa.String(), nullable=False),
        sa.Column("day", sa.String(10), nullable=False),
        sa.Column("spent_usd", sa.Float(), nullable=False),
        sa.Column("reserved_usd", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("pool", "owner", "day", name="pk_spend_days"),
    )
    op.create_index("ix_spend_days_owner", "spend_days", ["owner"])
    op.create_table(
        "spend_holds",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("owner", sa.String(), nullable=False),
        sa.Column("day", sa.String(10), nullable=False),
        sa.Column("amount_usd", sa.Float(), nullable=False),
        sa.Column("accounts", sa.Text(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("agent", sa.String(), nullable=False),
        sa.Column("holder", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_spend_holds"),
    )
    op.create_index("ix_spend_holds_owner", "spend_holds", ["owner"])
    op.create_table(
        "usage_days",
        sa.Column("owner", sa.String(), nullable=False),
        sa.Column("day", sa.String(10), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("agent", sa.String(), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("tokens_in", sa.BigInteger(), nullable=False),
        sa.Column("tokens_out", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("unpriced_calls", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("owner", "day", "model", "agent", name="pk_usage_days"),
    )
    op.create_index("ix_usage_days_day", "usage_days", ["day"])


def downgrade() -> None:
    op.drop_index("ix_usage_days_day", table_name="usage_days")
    op.drop_table("usage_days")
    op.drop_index("ix_spend_holds_owner", table_name="spend_holds")
    op.drop_table("spend_holds")
    op.drop_index("ix_spend_days_owner", table_name="spend_days")
    op.drop_table("spend_days")
