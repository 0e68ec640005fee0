"""Agent versions: every version of every agent, and each conversation's pins.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03

``agent_versions`` keeps each version of an agent (its number, content hash and content);
``conversation_agents`` the version each conversation is pinned to (null: the latest).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision: str | None = "0016"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "agent_versions",
        sa.Column("agent", sa.String(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("agent", "number", name="pk_agent_versions"),
    )
    op.create_table(
        "conversation_agents",
        sa.Column("conversation_id", sa.String(), nullable=False),
        sa.Column("agent", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("conversation_id", "agent", name="pk_conversation_agents"),
    )


def downgrade() -> None:
    op.drop_table("conversation_agents")
    op.drop_table("agent_versions")
