"""Conversation holds: which server process runs a conversation's turns (issue 16).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "conversation_holds",
        sa.Column("conversation_id", sa.String(), nullable=False),
        sa.Column("holder", sa.String(), nullable=False),
        sa.Column("token", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", name="pk_conversation_holds"),
    )


def downgrade() -> None:
    op.drop_table("conversation_holds")
