"""Search on SQLite indexes new messages in batches, not one FTS5 segment per commit.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-21

Until now each ``message_search`` row went into FTS5 (``message_fts``) by a trigger in the
transaction that inserted it. FTS5 writes a new segment of its index at every commit that
touched it, and merges segments as they pile up: about 150 microseconds of CPU per
commit, whatever the text's length, which was most of what search cost a loop step.

From here FTS5 holds every row up to ``message_fts_mark.num``. The trigger
``message_fts_insert`` indexes the rows after the mark in one statement when an insert
brings them to ``BATCH``, and a search indexes them first when it finds any
(``SQLiteStore._search_ready``, the same statement in a transaction of its own): a
search finds every message committed before it began. A row inserted at or below the
mark (when the newest rows were deleted, SQLite gives their rowids again) is indexed at
once by the same trigger; a row deleted is taken out of FTS5 only if it is in it
(``message_fts_delete``). The rows after the mark are in ``message_search`` but not in
FTS5, so FTS5's ``integrity-check`` against its content holds only when none wait.
PostgreSQL is unchanged: its GIN index already takes new rows
in a pending list and merges them later.
"""

from __future__ import annotations

from alembic import op

revision = "0021"
down_revision: str | None = "0020"
branch_labels: str | None = None
depends_on: str | None = None

BATCH = 256
"""How many rows after the mark make the inserting transaction index them all."""

AUTOMERGE = 8
"""FTS5's ``automerge``: how many segments of one level it lets pile up before it merges
them (4 by default). With fewer, larger merges each entry is rewritten fewer times as the
index grows; a search reads a few more segments."""

_MARK = "(SELECT num FROM message_fts_mark WHERE one = 1)"

_UP = [
    "DROP TRIGGER message_fts_insert",
    "DROP TRIGGER message_fts_delete",
    """CREATE TABLE message_fts_mark (
        one INTEGER PRIMARY KEY CHECK (one = 1), num INTEGER NOT NULL)""",
    "INSERT INTO message_fts_mark (one, num) SELECT 1, coalesce(max(num), 0) FROM message_search",
    f"INSERT INTO message_fts(message_fts, rank) VALUES ('automerge', {AUTOMERGE})",
    # One trigger for both cases (two AFTER INSERT triggers would run in an order SQLite
    # does not promise, and the one that moves the mark would change the other's WHEN).
    f"""CREATE TRIGGER message_fts_insert AFTER INSERT ON message_search
        WHEN new.num <= {_MARK} OR new.num - {_MARK} >= {BATCH} BEGIN
        INSERT INTO message_fts(rowid, text, owner)
            SELECT num, text, owner FROM message_search WHERE num > {_MARK}
            UNION ALL
            SELECT new.num, new.text, new.owner WHERE new.num <= {_MARK};
        UPDATE message_fts_mark SET num = max(num, (SELECT max(num) FROM message_search))
            WHERE one = 1;
    END""",
    f"""CREATE TRIGGER message_fts_delete AFTER DELETE ON message_search
        WHEN old.num <= {_MARK} BEGIN
        INSERT INTO message_fts(message_fts, rowid, text, owner)
        VALUES ('delete', old.num, old.text, old.owner);
    END""",
]

_DOWN = [
    "INSERT INTO message_fts(rowid, text, owner)"
    f" SELECT num, text, owner FROM message_search WHERE num > {_MARK}",
    "DROP TRIGGER message_fts_insert",
    "DROP TRIGGER message_fts_delete",
    "DROP TABLE message_fts_mark",
    "INSERT INTO message_fts(message_fts, rank) VALUES ('automerge', 4)",
    """CREATE TRIGGER message_fts_insert AFTER INSERT ON message_search BEGIN
        INSERT INTO message_fts(rowid, text, owner) VALUES (new.num, new.text, new.owner);
    END""",
    """CREATE TRIGGER message_fts_delete AFTER DELETE ON message_search BEGIN
        INSERT INTO message_fts(message_fts, rowid, text, owner)
        VALUES ('delete', old.num, old.text, old.owner);
    END""",
]


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in _UP:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in _DOWN:
            op.execute(statement)
