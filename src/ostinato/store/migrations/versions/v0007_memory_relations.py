"""Relations between long-term memory facts (part_of, relates_to, about).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

``memory_relations``: ``source`` is ``relation`` of ``target``, both facts of ``scope``;
keyed by the three, so relating two facts twice stores one row. Indexed by
``(scope, target)`` for the facts that point at one (the key serves ``source``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "memory_relations",
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("relation", sa.String(), nullable=False),
        sa.Column("target", sa.String(), nullable=False),
        sa.Column("scope", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["source"], ["memories.id"], name="fk_memory_relations_source_memories"
        ),
        sa.ForeignKeyConstraint(
            ["target"], ["memories.id"], name="fk_memory_relations_target_memories"
        ),
        sa.PrimaryKeyConstraint("source", "relation", "target", name="pk_memory_relations"),
    )
    op.create_index("ix_memory_relations_scope_target", "memory_relations", ["scope", "target"])


def downgrade() -> None:
    op.drop_table("memory_relations")
