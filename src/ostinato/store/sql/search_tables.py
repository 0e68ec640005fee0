"""The search table (0018, ``store.search``): declared in the store's one ``MetaData``
(``meta``) and re-exported by ``tables``."""

from __future__ import annotations

import sqlalchemy as sa

from ostinato.store.sql.meta import ID, metadata

# Search of conversations (0018, ``store.search``): the visible text of each message
# (and each title, ``message_id`` NULL), written by the write that stores the row. FTS5's
# ``message_fts`` indexes it on SQLite, ``search_vector`` under GIN on PostgreSQL.
message_search = sa.Table(
    "message_search",
    metadata,
    sa.Column(
        "num",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        sa.Identity(),
        primary_key=True,
    ),
    sa.Column("owner", sa.String(), nullable=True),
    sa.Column("conversation_id", ID, nullable=False),
    sa.Column("message_id", ID, nullable=True),
    sa.Column("text", sa.Text, nullable=False),
    sa.Index(None, "conversation_id"),
)
