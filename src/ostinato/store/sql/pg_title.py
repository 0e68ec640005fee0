"""A conversation's first title on PostgreSQL in one statement (the ``Titler``'s write).

``UpdateConversation`` is a transaction of its own: the row read and locked
(``SELECT ... FOR UPDATE``), the row changed, the title's search entry dropped and the
new one added; with ``BEGIN`` and ``COMMIT``, six round trips. It is made so because
each statement of a transaction in READ COMMITTED sees what committed before it began:
once the lock is taken, the entry another change left is seen and replaced, and two
renames made at once cannot leave two entries.

A first title (``expect_title=None``: the conversation has none; a new title with
words) needs none of that. ``first_title_statement`` is one statement: the row updated
only while its title is still empty (a change committed meanwhile is waited for and
then seen by the ``UPDATE``'s own check, as PostgreSQL re-reads a row it waited on),
the title's entry, if any, dropped and the new one added, and the row read. A
conversation without a title has no entry, so there is no entry a concurrent change
could add that this statement's snapshot would miss: the one that could add one (a
title set meanwhile) has also set the title, and then the ``UPDATE`` changes nothing
and nor does the rest. Any other change of a title goes the ordinary way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert

from ostinato.errors import NotFound
from ostinato.store.accounts import UpdateConversation
from ostinato.store.base import Conversation, WriteOp
from ostinato.store.search import searchable
from ostinato.store.sql import rows
from ostinato.store.sql.search_tables import message_search
from ostinato.store.sql.tables import conversations


def first_title(ops: tuple[WriteOp, ...]) -> UpdateConversation | None:
    """The op, if ``ops`` is one first title: a title with words, set only while the
    conversation has none (``expect_title=None``), nothing else changed."""
    if len(ops) != 1 or not isinstance(ops[0], UpdateConversation):
        return None
    op = ops[0]
    changes = op.changes()
    if op.expect_title is not None or set(changes) != {"title"}:
        return None
    title = changes["title"]
    return op if isinstance(title, str) and title.strip() else None


def _build() -> sa.Select[Any]:
    c, s = conversations, message_search
    cid = sa.bindparam("b_id", type_=c.c.id.type)
    title = sa.bindparam("title", type_=c.c.title.type)
    changed = (
        sa.update(c)
        .where(c.c.id == cid, c.c.title.is_(None))
        .values(title=title, updated_at=sa.bindparam("updated_at", type_=c.c.updated_at.type))
        .returning(c.c.id, c.c.owner)
        .cte("changed")
    )
    dropped = (
        sa.delete(s)
        .where(s.c.conversation_id == changed.c.id, s.c.message_id.is_(None))
        .returning(s.c.num)
        .cte("dropped")
    )
    text = sa.bindparam("text", type_=s.c.text.type)
    entry = sa.select(changed.c.owner, changed.c.id, sa.null(), text)
    added = (
        insert(s)
        .from_select(["owner", "conversation_id", "message_id", "text"], entry)
        .returning(s.c.num)
        .cte("added")
    )
    hit = sa.exists(sa.select(changed.c.id)).label("hit")
    return sa.select(hit, *c.c).where(c.c.id == cid).add_cte(dropped, added)


FIRST_TITLE = _build()


async def write_first_title(
    op: UpdateConversation,
    now: datetime,
    fetch: Callable[[sa.Executable, dict[str, Any]], Awaitable[list[Any]]],
    decode: rows.TimeDecoder,
) -> Conversation:
    """Run ``op`` (``first_title``) with ``fetch`` (one statement in a transaction of
    its own); the conversation as ``UpdateConversation`` returns it."""
    title = op.changes()["title"]
    params = {"b_id": op.conversation_id, "title": title, "updated_at": now}
    found = await fetch(FIRST_TITLE, {**params, "text": searchable(title)})
    if not found:
        raise NotFound(f"no conversation {op.conversation_id!r}")
    hit, *row = found[0]
    current = rows.conversation(row, decode)
    return dataclasses.replace(current, title=title, updated_at=now) if hit else current
