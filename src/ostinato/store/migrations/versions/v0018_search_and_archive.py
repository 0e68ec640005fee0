"""Search of conversations; pinned and archived conversations.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-10

- ``message_search``: the visible text of each message (its text blocks, when it is not
  hidden) and each conversation's title (``message_id`` NULL), with the conversation's
  owner; the store writes a row in the same write as the message (or the title). On
  SQLite an external-content FTS5 table (``message_fts``: the text, and the owner so one
  owner's rows are found from the index; Porter stemming; a prefix index of three
  characters) kept in step by triggers on ``message_search``; on PostgreSQL a stored
  generated ``tsvector`` column (``search_vector``) under a GIN index, and an index of
  each owner's rows newest first.
- ``conversations.pinned`` and ``conversations.archived_at``.

Every message and title already stored is indexed here, in this revision's transaction.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision: str | None = "0017"
branch_labels: str | None = None
depends_on: str | None = None

_SQLITE_FTS = [
    """CREATE VIRTUAL TABLE message_fts USING fts5(
        text, owner, content='message_search', content_rowid='num',
        tokenize='porter unicode61 remove_diacritics 2', prefix='3')""",
    """CREATE TRIGGER message_fts_insert AFTER INSERT ON message_search BEGIN
        INSERT INTO message_fts(rowid, text, owner) VALUES (new.num, new.text, new.owner);
    END""",
    """CREATE TRIGGER message_fts_delete AFTER DELETE ON message_search BEGIN
        INSERT INTO message_fts(message_fts, rowid, text, owner)
        VALUES ('delete', old.num, old.text, old.owner);
    END""",
]

_PG_FTS = [
    """ALTER TABLE message_search ADD COLUMN search_vector tsvector
        GENERATED ALWAYS AS (to_tsvector('english', text)) STORED""",
    "CREATE INDEX ix_message_search_fts ON message_search USING gin (search_vector)",
    "CREATE INDEX ix_message_search_fts_owner ON message_search (owner, num)",
]

_BATCH = 1000


def upgrade() -> None:
    # Added in place: a batch (copy and move) would drop the conversations table, and on
    # SQLite its cascades would take every message with it.
    op.add_column(
        "conversations",
        sa.Column("pinned", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column(
        "conversations", sa.Column("archived_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.create_table(
        "message_search",
        sa.Column(
            "num",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.Identity(),
            nullable=False,
        ),
        sa.Column("owner", sa.String(), nullable=True),
        sa.Column("conversation_id", sa.String(), nullable=False),
        sa.Column("message_id", sa.String(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("num", name="pk_message_search"),
    )
    op.create_index("ix_message_search_conversation_id", "message_search", ["conversation_id"])
    bind = op.get_bind()
    for statement in _SQLITE_FTS if bind.dialect.name == "sqlite" else _PG_FTS:
        op.execute(statement)
    _index_what_is_stored(bind)


def _clean(text: str) -> str:
    """As ``ostinato.store.search.searchable`` (kept here as it was at this revision)."""
    return text.replace("\x00", "\ufffd").replace("\x02", " ").replace("\x03", " ")


def _visible_text(blocks: str) -> str:
    parsed: Any = json.loads(blocks)
    parts = [
        b["text"]
        for b in parsed
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    return _clean("\n".join(parts))


def _index_what_is_stored(bind: sa.Connection) -> None:
    insert = sa.text(
        "INSERT INTO message_search (owner, conversation_id, message_id, text)"
        " VALUES (:owner, :conversation_id, :message_id, :text)"
    )
    titles = bind.execute(
        sa.text("SELECT owner, id, title FROM conversations WHERE title IS NOT NULL")
    ).all()
    rows = [
        {"owner": o, "conversation_id": c, "message_id": None, "text": _clean(t)}
        for o, c, t in titles
        if t.strip()
    ]
    if rows:
        bind.execute(insert, rows)
    select = sa.text(
        "SELECT c.owner, m.conversation_id, m.id, m.blocks FROM messages m"
        " JOIN conversations c ON c.id = m.conversation_id"
        " WHERE m.hidden = :hidden AND m.id > :after ORDER BY m.id LIMIT :batch"
    )
    after = ""
    while batch := bind.execute(select, {"hidden": False, "after": after, "batch": _BATCH}).all():
        after = batch[-1][2]
        rows = []
        for owner, cid, mid, blocks in batch:
            text = _visible_text(blocks)
            if text.strip():
                rows.append(
                    {"owner": owner, "conversation_id": cid, "message_id": mid, "text": text}
                )
        if rows:
            bind.execute(insert, rows)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE IF EXISTS message_fts")
    op.drop_table("message_search")
    op.drop_column("conversations", "archived_at")
    op.drop_column("conversations", "pinned")
