"""Many writers at once: seq allocation, group commit, SQLITE_BUSY, lost races."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import textwrap
from pathlib import Path

import pytest
import sqlalchemy as sa

from ostinato.errors import NotFound, StoreError
from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock, user_text
from ostinato.store import PostgresStore, SQLiteStore, Store
from ostinato.store.base import (
    AppendMessage,
    Conversation,
    CreateConversation,
    SetConversationState,
    append,
    utcnow,
)


async def new_conversation(store: Store) -> str:
    now = utcnow()
    cid = new_id()
    await store.write(CreateConversation(Conversation(cid, "idle", now, now)))
    return cid


async def test_concurrent_appends_get_seqs_without_gaps(store: Store) -> None:
    cid = await new_conversation(store)
    stored = await asyncio.gather(*(append(store, cid, user_text(str(i))) for i in range(50)))
    assert sorted(m.seq or 0 for m in stored) == list(range(1, 51))
    listed = await store.list_messages(cid)
    assert [m.seq for m in listed] == list(range(1, 51))
    assert sorted(m.text for m in listed) == sorted(str(i) for i in range(50))


async def test_concurrent_appends_across_conversations(sql_store: Store) -> None:
    cids = [await new_conversation(sql_store) for _ in range(10)]
    await asyncio.gather(
        *(append(sql_store, cid, user_text(f"{cid}-{i}")) for i in range(20) for cid in cids)
    )
    for cid in cids:
        messages = await sql_store.list_messages(cid)
        assert [m.seq for m in messages] == list(range(1, 21))
        assert all(m.text.startswith(cid) for m in messages)


async def test_one_failing_write_among_many_fails_alone(sql_store: Store) -> None:
    cid = await new_conversation(sql_store)

    async def good(i: int) -> object:
        (stored,) = await sql_store.write(AppendMessage(cid, user_text(str(i))))
        return stored

    async def bad() -> object:
        return await sql_store.write(
            AppendMessage(cid, user_text("undone")), SetConversationState("nope", "idle")
        )

    calls = [good(i) for i in range(100)]
    calls[37:37] = [bad()]
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(failures) == 1 and isinstance(failures[0], NotFound)
    messages = await sql_store.list_messages(cid)
    assert [m.seq for m in messages] == list(range(1, 101))
    assert "undone" not in [m.text for m in messages]


async def test_200_concurrent_writers_never_see_busy(sqlite_store: SQLiteStore) -> None:
    cids = [await new_conversation(sqlite_store) for _ in range(20)]
    results = await asyncio.gather(
        *(append(sqlite_store, cids[i % 20], user_text(str(i))) for i in range(200)),
        return_exceptions=True,
    )
    assert not [r for r in results if isinstance(r, BaseException)]
    for cid in cids:
        assert [m.seq for m in await sqlite_store.list_messages(cid)] == list(range(1, 11))


async def test_two_stores_on_one_file_write_at_once(tmp_path: Path) -> None:
    first = await SQLiteStore.open(tmp_path / "shared.db")
    second = await SQLiteStore.open(tmp_path / "shared.db")
    try:
        cid = await new_conversation(first)
        writes = [append(first if i % 2 else second, cid, user_text(str(i))) for i in range(200)]
        await asyncio.gather(*writes)
        assert [m.seq for m in await second.list_messages(cid)] == list(range(1, 201))
    finally:
        await first.close()
        await second.close()


_OTHER_PROCESS = textwrap.dedent(
    """
    import asyncio, sys
    from ostinato.messages import Message, TextBlock, user_text
    from ostinato.store import SQLiteStore
    from ostinato.store.base import append

    async def main(path, cid, count):
        store = await SQLiteStore.open(path)
        print("ready", flush=True)
        sys.stdin.readline()
        await asyncio.gather(*(append(store, cid, user_text(f"other {i}")) for i in range(count)))
        await store.close()

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    """
)


async def test_another_process_writes_the_same_file_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    store = await SQLiteStore.open(path)
    try:
        cid = await new_conversation(store)
        other = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _OTHER_PROCESS,
            str(path),
            cid,
            "300",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert other.stdout is not None and other.stdin is not None
        ready = await other.stdout.readline()
        assert ready.strip() == b"ready"
        other.stdin.write(b"go\n")
        await other.stdin.drain()
        await asyncio.gather(*(append(store, cid, user_text(f"ours {i}")) for i in range(300)))
        _, err = await other.communicate()
        assert other.returncode == 0, err.decode()
        messages = await store.list_messages(cid)
        assert [m.seq for m in messages] == list(range(1, 601))
        assert sum(m.text.startswith("other") for m in messages) == 300
    finally:
        await store.close()


async def test_a_lost_seq_race_is_retried(postgres_store: PostgresStore) -> None:
    """PostgreSQL: another transaction holds the next seq uncommitted; the append waits
    for it, finds the seq taken and retries with the one after."""
    store = postgres_store
    cid = await new_conversation(store)
    await append(store, cid, user_text("first"))
    async with store.engine.connect() as rival:
        await rival.begin()
        # Take seq 2 without touching the conversation row (so nothing serialises us).
        await rival.execute(
            sa.text(
                "INSERT INTO messages (id, conversation_id, seq, role, blocks, hidden,"
                " metadata, created_at) VALUES (:id, :c, 2, 'user', '[]', false, '{}', now())"
            ),
            {"id": new_id(), "c": cid},
        )
        pending = asyncio.create_task(append(store, cid, user_text("third")))
        await asyncio.sleep(0.2)  # let the append reach the clash and wait on it
        assert not pending.done()
        await rival.commit()
    stored = await pending
    assert stored.seq == 3
    assert [m.seq for m in await store.list_messages(cid)] == [1, 2, 3]


async def test_write_after_close_is_refused(sqlite_store: SQLiteStore) -> None:
    await sqlite_store.close()
    with pytest.raises(Exception, match="closed"):
        await new_conversation(sqlite_store)


async def test_concurrent_writes_share_transactions(sqlite_store: SQLiteStore) -> None:
    cid = await new_conversation(sqlite_store)
    before = sqlite_store.stats.transactions
    await asyncio.gather(*(append(sqlite_store, cid, user_text(str(i))) for i in range(300)))
    assert sqlite_store.stats.transactions - before < 300


async def test_a_batch_that_breaks_is_retried_call_by_call(sqlite_store: SQLiteStore) -> None:
    """An error that ends the whole transaction (here a trigger's RAISE(ROLLBACK)) must
    still fail only its own write() call."""
    with sqlite3.connect(sqlite_store.path) as conn:
        conn.execute(
            "CREATE TRIGGER poison BEFORE INSERT ON messages WHEN NEW.role = 'system'"
            " BEGIN SELECT RAISE(ROLLBACK, 'poisoned'); END"
        )
    cid = await new_conversation(sqlite_store)
    calls = [append(sqlite_store, cid, user_text(str(i))) for i in range(100)]
    calls[50:50] = [append(sqlite_store, cid, Message("system", (TextBlock("x"),)))]
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(failures) == 1 and isinstance(failures[0], StoreError)
    assert "poisoned" in str(failures[0])
    assert [m.seq for m in await sqlite_store.list_messages(cid)] == list(range(1, 101))


async def test_writes_wait_in_the_thread_while_another_connection_holds_the_lock(
    sqlite_store: SQLiteStore,
) -> None:
    cid = await new_conversation(sqlite_store)
    rival = sqlite3.connect(sqlite_store.path, isolation_level=None)
    try:
        rival.execute("BEGIN IMMEDIATE")  # the write lock, held from outside the store
        pending = [
            asyncio.ensure_future(append(sqlite_store, cid, user_text(str(i)))) for i in range(20)
        ]
        for _ in range(3):  # the calls are queued, then flushed, within a few loop turns
            await asyncio.sleep(0)
        assert sqlite_store.stats.in_thread == 1
        assert not any(p.done() for p in pending)  # waiting, not failing with BUSY
        # The event loop stays free while they wait: reads still answer.
        assert await sqlite_store.list_messages(cid) == []
        rival.execute("COMMIT")
        stored = await asyncio.gather(*pending)
    finally:
        rival.close()
    assert sorted(m.seq or 0 for m in stored) == list(range(1, 21))


async def test_the_wal_is_checkpointed_off_the_event_loop(tmp_path: Path) -> None:
    store = await SQLiteStore.open(tmp_path / "c.db")
    cid = await new_conversation(store)
    for i in range(300):
        await append(store, cid, user_text(str(i)))
    await store.close()  # the thread finishes what it was asked before it stops
    assert store.stats.checkpoints >= 1
