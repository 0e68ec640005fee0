"""A step's writes: what they cost in statements, and what they leave readable.

An append does not write its conversation's row (issue 14 item 6): the conversation's
``updated_at`` is read as the newer of the stored one and its last message's time, on
every engine, and SQLite commits a step's write in four statements.
"""

from __future__ import annotations

import sqlite3

import pytest

from ostinato.messages import Message, TextBlock, ToolUseBlock, user_text
from ostinato.store import PostgresStore, SQLiteStore, Store
from ostinato.store.base import (
    AppendMessage,
    SetConversationState,
    SetMessageMetadata,
    StartToolCall,
    StartTurn,
    append,
)
from ostinato.store.sql import rows
from tests.store.test_store_ops import new_conversation, tool_call, turn


async def test_updated_at_follows_appends(store: Store) -> None:
    conv = await new_conversation(store)
    first = await append(store, conv.id, user_text("hello"))
    got = await store.get_conversation(conv.id)
    assert got is not None and first.created_at is not None
    assert got.updated_at >= first.created_at >= conv.updated_at
    second = await append(store, conv.id, user_text("again"))
    listed = [c for c in await store.list_conversations(owner="ann") if c.id == conv.id]
    assert second.created_at is not None
    assert listed[0].updated_at >= second.created_at
    await store.write(SetConversationState(conv.id, "running"))
    after = await store.get_conversation(conv.id)
    assert after is not None and after.updated_at >= second.created_at
    assert after.state == "running"


async def test_an_append_leaves_the_conversation_row_alone(sqlite_store: SQLiteStore) -> None:
    conv = await new_conversation(sqlite_store)
    with sqlite3.connect(sqlite_store.path) as conn:
        before = conn.execute("SELECT updated_at FROM conversations").fetchall()
    stored = await append(sqlite_store, conv.id, user_text("hello"))
    with sqlite3.connect(sqlite_store.path) as conn:
        assert conn.execute("SELECT updated_at FROM conversations").fetchall() == before
    got = await sqlite_store.get_conversation(conv.id)
    assert got is not None and got.updated_at == stored.created_at


async def test_a_steps_write_is_five_statements_on_sqlite(sqlite_store: SQLiteStore) -> None:
    """BEGIN, the assistant row, its text for search, the tool call's record, COMMIT: no
    conversation touch. (SQLite's trace also shows the statements FTS5 runs itself, on
    its own tables, and repeats a statement for each trigger it runs.)"""
    conv = await new_conversation(sqlite_store)
    t = turn(conv.id)
    await sqlite_store.write(StartTurn(t))
    seen: list[str] = []
    sqlite_store._writer._conn.set_trace_callback(seen.append)
    record = tool_call(conv.id, t.id)
    reply = Message("assistant", (TextBlock("let me"), ToolUseBlock(record.id, "search", {})))
    await sqlite_store.write(AppendMessage(conv.id, reply, t.id), StartToolCall(record))
    sqlite_store._writer._conn.set_trace_callback(None)
    sent = [s for s in seen if not s.startswith("--") and "'main'." not in s]
    sent = [s for i, s in enumerate(sent) if i == 0 or s != sent[i - 1]]
    assert [s.split(" (")[0] for s in sent] == [
        "BEGIN IMMEDIATE",
        "INSERT INTO messages",
        "INSERT INTO message_search",
        "INSERT INTO tool_calls",
        "COMMIT",
    ], seen
    assert not any(s.lstrip().upper().startswith("UPDATE") for s in seen), seen


async def test_rows_a_write_stored_are_not_decoded_again(
    sql_store: SQLiteStore | PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The messages a write returns are what its rows hold: the next read of the history
    takes them as they are (``rows.MessageCache.written``), and decodes only rows it has
    not seen, such as one whose metadata changed since."""
    conv = await new_conversation(sql_store)
    first = await append(sql_store, conv.id, Message("user", (TextBlock("hi"),), metadata={"a": 1}))
    second = await append(sql_store, conv.id, user_text("there"))
    decoded: list[object] = []
    real = rows.message
    monkeypatch.setattr(
        rows, "message", lambda row, decode: decoded.append(row) or real(row, decode)
    )
    found = await sql_store.list_messages(conv.id)
    assert found == [first, second] and found[0] is first and not decoded
    await sql_store.write(SetMessageMetadata(conv.id, 1, {"a": 2}))
    again = await sql_store.list_messages(conv.id)
    assert len(decoded) == 1 and again[0].metadata == {"a": 2} and again[1] is second
