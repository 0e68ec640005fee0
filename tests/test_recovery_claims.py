"""Recovery claims a gone holder's turn in the write that closes it (issue 24).

Before, the claim (a compare-and-set on the turn's holder) was its own write: between it
and the close the turn was this server's and still running, so this server's worker
could take the conversation's hold (``claim_conversation`` waits only for *other*
servers' running turns), begin a new turn, and answer the old turn's open call
("interrupted: no result") beside recovery's "outcome unknown". On both SQL engines.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock, ToolUseBlock
from ostinato.recovery import recover
from ostinato.store.base import (
    AppendMessage,
    Conversation,
    CreateConversation,
    FinishTurn,
    StartToolCall,
    StartTurn,
    ToolCallRecord,
    Turn,
    WriteOp,
    utcnow,
)
from ostinato.store.sql.postgres import PostgresStore
from ostinato.store.sql.sqlite import SQLiteStore
from ostinato.tools.builtins import default_registry
from tests.store.conftest import postgres_url, sql_store

__all__ = ["postgres_url", "sql_store"]

GONE = "a-lease-nobody-holds"  # no such lease row: its holder is gone


async def _crashed(store: SQLiteStore | PostgresStore) -> tuple[str, Turn]:
    """A conversation whose turn a dead server left running in a ``shell`` call."""
    cid = (await _conversation(store)).id
    turn = Turn(new_id(), cid, new_id(), "running", utcnow(), holder=GONE)
    call = ToolUseBlock("toolu_1", "shell", {"command": "sleep 30"})
    record = ToolCallRecord(call.id, cid, turn.id, "shell", call.input, "running", utcnow())
    await store.write(
        StartTurn(turn),
        AppendMessage(cid, Message("user", (TextBlock("run it"),)), turn.id),
        AppendMessage(cid, Message("assistant", (call,)), turn.id),
        StartToolCall(record),
    )
    return cid, turn


async def _conversation(store: SQLiteStore | PostgresStore) -> Conversation:
    now = utcnow()
    conversation = Conversation(new_id(), "running", now, now)
    await store.write(CreateConversation(conversation))
    return conversation


async def test_the_turn_stays_its_gone_holders_until_recovery_has_closed_it(
    sql_store: SQLiteStore | PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = sql_store
    cid, turn = await _crashed(store)
    write = store.write
    held_during: list[bool] = []

    async def watched(*ops: WriteOp) -> list[Any]:
        if any(isinstance(op, FinishTurn) and op.turn_id == turn.id for op in ops):
            # this server's worker tries to hold the conversation just as recovery writes
            held_during.append(await store.claim_conversation(cid, "me", new_id()))
        return await write(*ops)

    monkeypatch.setattr(store, "write", watched)
    assert await recover(store, default_registry(), holder="me") == [turn.id]
    assert held_during == [False]  # the old turn was still running and not this server's
    assert await store.claim_conversation(cid, "me", new_id())  # and now it is closed
    (closed,) = await store.list_turns(cid)
    assert (closed.status, closed.stop_reason, closed.holder) == ("finished", "interrupted", "me")
    answers = [r.text for m in await store.list_messages(cid) for r in m.tool_results]
    assert len(answers) == 1 and answers[0].startswith("outcome unknown")


async def test_two_servers_recovering_at_once_close_a_turn_once(
    sql_store: SQLiteStore | PostgresStore,
) -> None:
    store = sql_store
    cid, turn = await _crashed(store)
    tools = default_registry()
    closed = await asyncio.gather(
        recover(store, tools, holder="one"), recover(store, tools, holder="two")
    )
    assert sorted(closed, key=len) == [[], [turn.id]]
    answers = [r.text for m in await store.list_messages(cid) for r in m.tool_results]
    assert len(answers) == 1
