"""``DeleteConversation`` in SQL, for both engines: one statement per table that holds
the conversation's rows (``erasure.CONVERSATION_ROWS``, ``erasure.SCOPED_ROWS``), built
from the tables themselves, run in the caller's transaction by ``delete_conversation``.
On SQLite the FTS5 index follows ``message_search`` by its triggers; on PostgreSQL the
GIN entries go with the rows."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from ostinato.errors import NotFound
from ostinato.store.erasure import (
    CONVERSATION_ROWS,
    OWNER_ROWS,
    SCOPED_ROWS,
    DeleteConversation,
    EraseOwner,
    conversation_scope,
)
from ostinato.store.sql.meta import metadata


def erasure_statements() -> dict[Any, sa.Executable]:
    """The statements of a conversation's deletion, by name (``action:table``)."""
    found: dict[Any, sa.Executable] = {}
    for name in SCOPED_ROWS:
        table = metadata.tables[name]
        scope = sa.bindparam("scope", type_=table.c.scope.type)
        found[f"scope:{name}"] = sa.delete(table).where(table.c.scope == scope)
    for name, action in CONVERSATION_ROWS.items():
        table = metadata.tables[name]
        cid = sa.bindparam("conversation_id", type_=table.c.conversation_id.type)
        mine = table.c.conversation_id == cid
        if action == "delete":
            found[f"delete:{name}"] = sa.delete(table).where(mine)
        else:
            cleared = {c: sa.null() for c in ("conversation_id", "turn_id") if c in table.c}
            found[f"unlink:{name}"] = sa.update(table).where(mine).values(cleared)
    conversations = metadata.tables["conversations"]
    cid = sa.bindparam("conversation_id", type_=conversations.c.id.type)
    found["delete:conversations"] = sa.delete(conversations).where(conversations.c.id == cid)
    owner = sa.bindparam("owner", type_=conversations.c.owner.type)
    found["owner_conversations"] = sa.select(conversations.c.id).where(
        conversations.c.owner == owner
    )
    memories = metadata.tables["memories"]
    learned = sa.bindparam("conversation_id", type_=memories.c.conversation_id.type)
    found["learned_in"] = sa.delete(memories).where(memories.c.conversation_id == learned)
    for name in OWNER_ROWS:
        table = metadata.tables[name]
        found[f"owner:{name}"] = sa.delete(table).where(table.c.owner == owner)
    return found


def delete_conversation(ex: Any, op: DeleteConversation, now: Any) -> None:
    """Every row of the conversation, children first; ``NotFound`` for none."""
    cid = op.conversation_id
    if ex.row("find_conversation", {"b_id": cid}) is None:
        raise NotFound(f"no conversation {cid!r}")
    scope = conversation_scope(cid)
    for name in SCOPED_ROWS:
        ex.execute(f"scope:{name}", {"scope": scope})
    for name, action in CONVERSATION_ROWS.items():
        ex.execute(f"{action}:{name}", {"conversation_id": cid})
    ex.execute("delete:conversations", {"conversation_id": cid})


def erase_owner(ex: Any, op: EraseOwner, now: Any) -> list[str]:
    """Every conversation of the owner, then every row of theirs; the conversations' ids."""
    ids = [row[0] for row in ex.rows("owner_conversations", {"owner": op.owner})]
    for cid in ids:
        ex.execute("learned_in", {"conversation_id": cid})
        delete_conversation(ex, DeleteConversation(cid), now)
    for name in SCOPED_ROWS:
        ex.execute(f"scope:{name}", {"scope": op.owner})
    for name in OWNER_ROWS:
        ex.execute(f"owner:{name}", {"owner": op.owner})
    return ids
