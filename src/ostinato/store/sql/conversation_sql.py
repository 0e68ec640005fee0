"""A conversation's columns as every read of a conversation selects them (``statements``'
reads, and ``tree_sql``'s opening of a turn, which reads the row with its window)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from ostinato.store.sql.tables import conversations, messages


def conversation_columns() -> list[sa.ColumnElement[Any]]:
    """A conversation's columns in table order, its ``updated_at`` the newer of the stored
    one (set with its state, title, ...) and its last message's time: an append does not
    write the conversation row (``ops._append``). The last message is found at the top
    of the ``(conversation_id, seq)`` index."""
    earlier = messages.alias("earlier")
    last_seq = (
        sa.select(sa.func.max(earlier.c.seq))
        .where(earlier.c.conversation_id == conversations.c.id)
        .correlate_except(earlier)
        .scalar_subquery()
    )
    last = (
        sa.select(messages.c.created_at)
        .where(messages.c.conversation_id == conversations.c.id, messages.c.seq == last_seq)
        .correlate(conversations)  # only: a query that selects a message row too has its own
        .scalar_subquery()
    )
    stored = conversations.c.updated_at
    updated = sa.case((last > stored, last), else_=stored).label("updated_at")
    return [updated if c.name == "updated_at" else c for c in conversations.columns]
