"""People in the loop: approvals, grants, queued inputs.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

_TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "approvals",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("conversation_id", sa.String(), nullable=False),
        sa.Column("turn_id", sa.String(), nullable=False),
        sa.Column("tool_use_id", sa.String(), nullable=False),
        sa.Column("tool", sa.String(), nullable=False),
        sa.Column("arguments", sa.Text(), nullable=False),
        sa.Column("arguments_hash", sa.String(64), nullable=False),
        sa.Column("risk", sa.String(16), nullable=False),
        sa.Column("family", sa.String(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("ending", sa.String(16), nullable=True),
        sa.Column("requested_at", _TIME, nullable=False),
        sa.Column("decided_at", _TIME, nullable=True),
        sa.Column("decided_by", sa.String(), nullable=True),
        sa.Column("remember", sa.String(16), server_default="none", nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name="fk_approvals_conversation_id_conversations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_approvals"),
    )
    op.create_index("ix_approvals_status", "approvals", ["status"])
    op.create_index("ix_approvals_conversation_id", "approvals", ["conversation_id"])
    op.create_table(
        "grants",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("owner", sa.String(), nullable=True),
        sa.Column("conversation_id", sa.String(), nullable=True),
        sa.Column("tool", sa.String(), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("expires_at", _TIME, nullable=True),
        sa.Column("revoked_at", _TIME, nullable=True),
        sa.Column("approval_id", sa.String(), nullable=True),
        sa.Column("metadata", sa.Text(), server_default="{}", nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_grants"),
    )
    op.create_index("ix_grants_owner_tool", "grants", ["owner", "tool"])
    op.create_index("ix_grants_conversation_id_tool", "grants", ["conversation_id", "tool"])
    op.create_table(
        "queued_inputs",
        sa.Column("id", sa.String(), nullable=False),
        # An identity column on PostgreSQL; SQLite ignores ``Identity`` (the store
        # allocates the position there, under the write lock).
        sa.Column("position", sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column("conversation_id", sa.String(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("blocks", sa.Text(), nullable=False),
        sa.Column("hidden", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("metadata", sa.Text(), server_default="{}", nullable=False),
        sa.Column("client_message_id", sa.String(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name="fk_queued_inputs_conversation_id_conversations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_queued_inputs"),
        sa.UniqueConstraint("position", name="uq_queued_inputs_position"),
    )
    op.create_index("ix_queued_inputs_status_position", "queued_inputs", ["status", "position"])
    op.create_index(
        "ix_queued_inputs_conversation_id_status", "queued_inputs", ["conversation_id", "status"]
    )


def downgrade() -> None:
    op.drop_table("queued_inputs")
    op.drop_table("grants")
    op.drop_table("approvals")
