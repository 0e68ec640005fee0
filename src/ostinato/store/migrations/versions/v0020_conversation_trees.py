"""Conversations as trees: a row's parent where it starts a run, a conversation's branch.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-20

``messages.parent_seq`` names the row a row follows when that is not the row before it
(NULL elsewhere: the parent is seq - 1), and a partial index holds those rows only (the
starts of runs, ``ostinato.store.tree``). ``conversations`` gains its current branch:
``branch_ranges``, ``branch_since`` and ``branch_tip``, all NULL while it never branched.
Every existing conversation is therefore a one-branch tree as it stands: every column is
added NULL and no row is rewritten, whatever the size of the table.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision: str | None = "0019"
branch_labels: str | None = None
depends_on: str | None = None

RUN_STARTS = "parent_seq IS NOT NULL"


def upgrade() -> None:
    op.add_column("messages", sa.Column("parent_seq", sa.Integer(), nullable=True))
    op.create_index(
        "ix_messages_run_starts",
        "messages",
        ["conversation_id", "seq", "parent_seq"],
        sqlite_where=sa.text(RUN_STARTS),
        postgresql_where=sa.text(RUN_STARTS),
    )
    op.add_column("conversations", sa.Column("branch_ranges", sa.Text(), nullable=True))
    op.add_column("conversations", sa.Column("branch_since", sa.Integer(), nullable=True))
    op.add_column("conversations", sa.Column("branch_tip", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_index("ix_messages_run_starts", table_name="messages")
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("parent_seq")
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("branch_tip")
        batch.drop_column("branch_since")
        batch.drop_column("branch_ranges")
