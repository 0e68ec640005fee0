"""History window and long-term memory: summaries, memories, their full-text indexes.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29

- ``summaries``: one row per compaction summary (the watermark), keyed by conversation
  and the summary message's seq, so the latest is one index probe.
- ``memories``: bitemporal facts per scope. Full-text search over current facts:
  on SQLite an external-content FTS5 table (``memories_fts``, Porter stemming) kept in
  step by triggers in the writing transaction; on PostgreSQL a stored generated
  ``tsvector`` column (``search_vector``: subject weighted above text) under a partial
  GIN index.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

_TIME = sa.DateTime(timezone=True)

_SQLITE_FTS = [
    """CREATE VIRTUAL TABLE memories_fts USING fts5(
        text, subject, content='memories', content_rowid='num',
        tokenize='porter unicode61 remove_diacritics 2')""",
    # Only current facts are indexed: a fact enters when recorded current and leaves when
    # it is closed. Text and subject are never updated.
    """CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories
    WHEN new.valid_to IS NULL BEGIN
        INSERT INTO memories_fts(rowid, text, subject) VALUES (new.num, new.text, new.subject);
    END""",
    """CREATE TRIGGER memories_fts_close AFTER UPDATE OF valid_to ON memories
    WHEN old.valid_to IS NULL AND new.valid_to IS NOT NULL BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, text, subject)
        VALUES ('delete', old.num, old.text, old.subject);
    END""",
    """CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories
    WHEN old.valid_to IS NULL BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, text, subject)
        VALUES ('delete', old.num, old.text, old.subject);
    END""",
]

# PostgreSQL keeps each fact's document as a stored generated column (so ranking reads it
# instead of parsing the text again), the subject weighted A and the text B, and indexes
# the current facts' documents. ``statements.search_memories`` queries this column.
_PG_FTS = [
    """ALTER TABLE memories ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', coalesce(subject, '')), 'A')
        || setweight(to_tsvector('english', text), 'B')) STORED""",
    """CREATE INDEX ix_memories_fts ON memories USING gin (search_vector)
    WHERE valid_to IS NULL""",
]


def upgrade() -> None:
    op.create_table(
        "summaries",
        sa.Column("conversation_id", sa.String(), nullable=False),
        sa.Column("message_seq", sa.Integer(), nullable=False),
        sa.Column("message_id", sa.String(), nullable=False),
        sa.Column("through_seq", sa.Integer(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name="fk_summaries_conversation_id_conversations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("conversation_id", "message_seq", name="pk_summaries"),
    )
    op.create_table(
        "memories",
        # The rowid on SQLite (INTEGER PRIMARY KEY), an identity column on PostgreSQL.
        sa.Column(
            "num",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.Identity(),
            nullable=False,
        ),
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("scope", sa.String(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("subject", sa.String(), nullable=True),
        sa.Column("valid_from", _TIME, nullable=False),
        sa.Column("valid_to", _TIME, nullable=True),
        sa.Column("recorded_at", _TIME, nullable=False),
        sa.Column("supersedes", sa.String(), nullable=True),
        sa.Column("superseded_by", sa.String(), nullable=True),
        sa.Column("conversation_id", sa.String(), nullable=True),
        sa.Column("turn_id", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("num", name="pk_memories"),
        sa.UniqueConstraint("id", name="uq_memories_id"),
    )
    op.create_index(
        "ix_memories_scope_valid_to_recorded_at", "memories", ["scope", "valid_to", "recorded_at"]
    )
    op.create_index("ix_memories_scope_subject", "memories", ["scope", "subject"])
    if op.get_bind().dialect.name == "sqlite":
        for statement in _SQLITE_FTS:
            op.execute(statement)
    else:
        for statement in _PG_FTS:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE IF EXISTS memories_fts")
    op.drop_table("memories")
    op.drop_table("summaries")
