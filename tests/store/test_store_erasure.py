"""Deleting a conversation on every engine: every row of it goes in one write (the
owner's facts learned in it stay, unlinked), other conversations are untouched, and no
table with a ``conversation_id`` column is left out of the deletion."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from ostinato.approvals import Approval, Grant, arguments_hash
from ostinato.errors import NotFound
from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock, user_text
from ostinato.store import PostgresStore, SQLiteStore, Store
from ostinato.store.base import (
    AppendSummary,
    CreateApproval,
    CreateGrant,
    Enqueue,
    FinishTurn,
    QueuedInput,
    RememberFact,
    SetToolSwitch,
    StartToolCall,
    StartTurn,
    ToolCallRecord,
    Turn,
    append,
    utcnow,
)
from ostinato.store.erasure import CONVERSATION_ROWS, SCOPED_ROWS, DeleteConversation
from ostinato.store.sql.meta import metadata
from tests.store.test_store_search import conversation


async def filled(store: Store, title: str) -> tuple[str, str]:
    """A conversation with a row of every kind; its id and the owner's fact learned in it."""
    cid = await conversation(store, "ann", title)
    now = utcnow()
    turn = Turn(new_id(), cid, new_id(), "running", now)
    await store.write(StartTurn(turn))
    await append(store, cid, user_text(f"{title} secret words"), turn.id)
    await append(store, cid, Message("user", (TextBlock("hidden"),), hidden=True), turn.id)
    call = ToolCallRecord("t1", cid, turn.id, "shell", {"cmd": "ls"}, "running", now)
    approval = Approval(
        new_id(), cid, turn.id, "t1", "shell", {}, arguments_hash("shell", {}), "exec", None, now
    )
    grant = Grant(new_id(), None, cid, "shell", "exact", "k", now)
    await store.write(StartToolCall(call), CreateApproval(approval), CreateGrant(grant))
    await store.write(FinishTurn(turn.id, cid, "end_turn", now, timeline={"steps": []}))
    await store.write(Enqueue(QueuedInput(new_id(), cid, user_text("later"), now)))
    await store.write(AppendSummary(cid, user_text("summary"), through_seq=1))
    scope = f"conversation:{cid}"
    await store.write(
        RememberFact(scope, f"{title} own fact"), SetToolSwitch(scope, "shell", False)
    )
    (fact,) = await store.write(RememberFact("ann", f"{title} learned", conversation_id=cid))
    return cid, fact.id


async def test_a_conversation_is_deleted_with_every_row_of_it(store: Store) -> None:
    gone, fact = await filled(store, "Alpha")
    kept, _ = await filled(store, "Beta")
    await store.write(DeleteConversation(gone))
    assert await store.get_conversation(gone) is None
    assert await store.list_messages(gone) == []
    assert await store.list_turns(gone) == []
    assert await store.list_tool_calls(gone) == []
    assert await store.list_approvals(gone) == []
    assert await store.list_grants(conversation_id=gone, include_revoked=True) == []
    assert await store.list_queued(gone) == []
    assert await store.list_memories(f"conversation:{gone}", include_closed=True) == []
    assert await store.switched_off_tools(f"conversation:{gone}") == frozenset()
    assert await store.search_messages("alpha", owner="ann") == []
    learned = await store.get_memory(fact)
    assert learned is not None and learned.conversation_id is None  # the owner's still
    assert len(await store.list_messages(kept)) == 3  # the other is untouched
    assert len(await store.search_messages("beta", owner="ann")) == 2
    with pytest.raises(NotFound):
        await store.write(DeleteConversation(gone))


async def test_no_sql_table_keeps_a_row_of_a_deleted_conversation(
    sql_store: SQLiteStore | PostgresStore,
) -> None:
    gone, _ = await filled(sql_store, "Alpha")
    await sql_store.write(DeleteConversation(gone))
    found = []
    for table in metadata.sorted_tables:
        for column in table.columns:
            if isinstance(column.type, sa.String | sa.Text):
                where = sa.cast(column, sa.Text).contains(gone)
                stmt = sa.select(sa.func.count()).select_from(table).where(where)
                (count,) = (await sql_store._fetch(stmt, {}))[0]
                if count:
                    found.append(f"{table.name}.{column.name}")
    assert found == []


def test_every_table_with_a_conversation_is_deleted_with_it() -> None:
    with_column = {t.name for t in metadata.sorted_tables if "conversation_id" in t.c}
    assert with_column == set(CONVERSATION_ROWS), "say in store.erasure what deleting does"
    with_scope = {t.name for t in metadata.sorted_tables if "scope" in t.c}
    assert with_scope - {"grants"} == set(SCOPED_ROWS)  # a grant's scope: exact or family
