"""SQLite's durable commits (``store.sql.wal_sync``): a write that acknowledges something
to a client is answered only after the WAL file was fsynced, writes committed together
share one fsync (group commit), a turn's bookkeeping is answered without waiting for
one, and ``durability=relaxed`` in the URL fsyncs nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock, user_text
from ostinato.store import open_store
from ostinato.store.accounts import UpdateConversation
from ostinato.store.base import (
    AppendMessage,
    Conversation,
    CreateConversation,
    FinishToolCall,
    SetTurnMetrics,
    StartTurn,
    Turn,
    utcnow,
)
from ostinato.store.spend import Charge, SettleSpend
from ostinato.store.sql import wal_sync
from ostinato.store.sql.sqlite import SQLiteStore
from ostinato.store.sql.wal_sync import acknowledges


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files ``wal_sync`` fsyncs, in order (the real fsync still runs)."""
    seen: list[str] = []
    real = wal_sync.fsync_file

    def record(path: str) -> None:
        seen.append(path)
        real(path)

    monkeypatch.setattr(wal_sync, "fsync_file", record)
    return seen


async def _conversation(store: SQLiteStore) -> str:
    now, cid = utcnow(), new_id()
    await store.write(CreateConversation(Conversation(cid, "idle", now, now)))
    return cid


async def test_an_accepted_message_is_on_disk_before_write_returns(
    tmp_path: Path, synced: list[str]
) -> None:
    store = await SQLiteStore.open(tmp_path / "d.db")
    wal = store.path + "-wal"
    try:
        cid = await _conversation(store)
        assert synced.count(wal) == 1
        turn = Turn(new_id(), cid, new_id(), "running", utcnow())
        await store.write(StartTurn(turn), AppendMessage(cid, user_text("hi"), turn.id))
        assert synced.count(wal) == 2  # answered after its fsync
        reply = Message("assistant", (TextBlock("hello"),))
        await store.write(AppendMessage(cid, reply, turn.id), SetTurnMetrics(turn.id, {}, None))
        assert synced.count(wal) == 2  # a turn's own bookkeeping waits for none
        charge = Charge("", "2026-12-04", "offline:ostinato", "", (("deployment", ""),), None)
        reply = Message("assistant", (TextBlock("again"),))
        await store.write(AppendMessage(cid, reply, turn.id), SettleSpend(None, charge))
        assert synced.count(wal) == 2  # nor does a reply with its call's cost
        writes = [store.write(AppendMessage(cid, user_text(f"m{n}"))) for n in range(20)]
        await asyncio.gather(*writes)
        assert synced.count(wal) == 3  # twenty committed together: one fsync
    finally:
        await store.close()


async def test_relaxed_durability_fsyncs_nothing(tmp_path: Path, synced: list[str]) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'r.db'}?durability=relaxed")
    try:
        assert isinstance(store, SQLiteStore)
        await _conversation(store)
        assert not [path for path in synced if path.endswith("-wal")]
    finally:
        await store.close()
    with pytest.raises(ValueError, match="durability"):
        await open_store(f"sqlite:///{tmp_path / 'x.db'}?durability=sometimes")


def test_which_writes_acknowledge_something() -> None:
    cid, tid = "c", "t"
    assert acknowledges((AppendMessage(cid, user_text("hi")),))
    assert not acknowledges((AppendMessage(cid, Message("assistant", (TextBlock("a"),))),))
    assert not acknowledges((SetTurnMetrics(tid, {}, None),))
    # a step's reply with its call's cost settled: bookkeeping (a hold a power loss
    # leaves is charged by recovery; a counted call is lost with its reply, as before)
    reply = AppendMessage(cid, Message("assistant", (TextBlock("a"),)))
    settled = SettleSpend(None, Charge("ann", "2026-12-04", "offline:ostinato", "", (), None))
    assert not acknowledges((reply, settled))
    # a tool call's end acknowledges (its tool may have changed something), unless the
    # call changed nothing: a turn-zero seed's read
    now = utcnow()
    assert acknowledges((FinishToolCall(tid, "u1", "ok", "done", False, now, 0.1),))
    seed = FinishToolCall(tid, "u2", "ok", "tea", False, now, 0.1, side_effects=False)
    result = AppendMessage(cid, Message("tool", (TextBlock("x"),), hidden=True), tid)
    assert not acknowledges((result, seed))
    # a client's rename answers that client; a title the server made answers nobody
    assert acknowledges((UpdateConversation(cid, title="Trip to Lisbon"),))
    made = UpdateConversation(cid, title="Trip to Lisbon", expect_title=None, made=True)
    assert not acknowledges((made,))


async def test_a_title_the_server_made_waits_for_no_fsync(
    tmp_path: Path, synced: list[str]
) -> None:
    """The ``Titler``'s write: the title of a conversation is the server's own
    bookkeeping; the same rename sent by a client is on disk before it is answered."""
    store = await SQLiteStore.open(tmp_path / "t.db")
    wal = store.path + "-wal"
    try:
        cid = await _conversation(store)
        assert synced.count(wal) == 1
        await store.write(UpdateConversation(cid, title="Tea", expect_title=None, made=True))
        assert synced.count(wal) == 1
        await store.write(UpdateConversation(cid, title="Green tea"))
        assert synced.count(wal) == 2
    finally:
        await store.close()
