"""The protocols other clients speak: one record per thing they name.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03

``protocol_records``: keyed by kind and id (a Responses API response, an Agent Protocol
run, a store item...), with its owner, the conversation it belongs to (if any), its
data as JSON text and its times; listed by kind and owner, or kind and conversation,
newest first.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision: str | None = "0015"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    time = sa.DateTime(timezone=True)
    op.create_table(
        "protocol_records",
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("owner", sa.String(), nullable=False),
        sa.Column("conversation_id", sa.String(), nullable=True),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("created_at", time, nullable=False),
        sa.Column("updated_at", time, nullable=False),
        sa.PrimaryKeyConstraint("kind", "id", name="pk_protocol_records"),
    )
    op.create_index(
        "ix_protocol_records_kind_owner_created_at",
        "protocol_records",
        ["kind", "owner", "created_at"],
    )
    op.create_index(
        "ix_protocol_records_kind_conversation_id_created_at",
        "protocol_records",
        ["kind", "conversation_id", "created_at"],
    )


def downgrade() -> None:
    op.drop_table("protocol_records")
