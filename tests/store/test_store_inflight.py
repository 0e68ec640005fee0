"""A caller cancelled while its write is in flight is told what the write committed
(``store.inflight``): the SQLite and PostgreSQL stores wait for the outcome and raise
the cancel carrying the results, or a plain cancel when nothing was written. The turn's
record books what it carries (tests/loop/test_cancel_writes.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ostinato.ids import new_id
from ostinato.messages import Message, user_text
from ostinato.store import Store
from ostinato.store.base import AppendMessage, Conversation, CreateConversation, WriteOp, utcnow
from ostinato.store.inflight import written


async def _cancelled_during(store: Store, *ops: WriteOp) -> asyncio.CancelledError:
    """Cancel a task whose write was handed to the store and has not come back."""
    task = asyncio.ensure_future(store.write(*ops))
    await asyncio.sleep(0)  # the task is now waiting on its write
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as raised:
        await task
    return raised.value


def _conversation() -> CreateConversation:
    now = utcnow()
    return CreateConversation(Conversation(new_id(), "idle", now, now))


async def test_a_cancelled_caller_gets_what_its_write_committed(sql_store: Store) -> None:
    create = _conversation()
    cancel = await _cancelled_during(sql_store, create)
    assert written(cancel) is not None  # the conversation's write committed
    cid = create.conversation.id
    assert await sql_store.get_conversation(cid) is not None
    cancel = await _cancelled_during(sql_store, AppendMessage(cid, user_text("hello")))
    results: Any = written(cancel)
    (row,) = results
    assert isinstance(row, Message) and row.seq is not None
    assert [m.text for m in await sql_store.list_messages(cid)] == ["hello"]


async def test_a_cancel_during_a_write_that_fails_carries_nothing(sql_store: Store) -> None:
    cancel = await _cancelled_during(sql_store, AppendMessage(new_id(), user_text("lost")))
    assert written(cancel) is None  # the conversation does not exist: nothing written
