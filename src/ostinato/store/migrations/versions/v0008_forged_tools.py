"""Forged tools: each version of each owner's tools.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

``forged_tools``: keyed by owner, name and version (1, 2, ...); the parameters' JSON
schema as JSON text, the code, when it was made (and, for the newest version of a
removed tool, when it was removed), and the conversation a model made it in.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "forged_tools",
        sa.Column("owner", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("parameters", sa.Text(), nullable=False),
        sa.Column("code", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("removed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("conversation_id", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("owner", "name", "version", name="pk_forged_tools"),
    )


def downgrade() -> None:
    op.drop_table("forged_tools")
