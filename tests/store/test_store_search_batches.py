"""Search on SQLite indexes new messages in batches (migration 0021): FTS5 takes the rows
after its mark when they reach a batch or when a search comes, a search still finds
every message written before it, and deletes keep the index whole, whichever side of
the mark their rows are on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock
from ostinato.store.base import Conversation, CreateConversation, append, utcnow
from ostinato.store.erasure import DeleteConversation
from ostinato.store.migrations.versions import v0021_search_batches, v0022_spend_tabs
from ostinato.store.migrations.versions.v0021_search_batches import AUTOMERGE, BATCH
from ostinato.store.sql.sqlite import SQLiteStore


async def conversation(store: SQLiteStore) -> str:
    now = utcnow()
    cid = new_id()
    await store.write(CreateConversation(Conversation(cid, "idle", now, now, "ann", None, None)))
    return cid


async def say(store: SQLiteStore, cid: str, words: list[str]) -> None:
    for word in words:
        await append(store, cid, Message("assistant", (TextBlock(f"about {word} today"),)))


def words(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(n)]


def in_index(store: SQLiteStore, word: str) -> int:
    """How many rows FTS5 itself holds for ``word`` (not through the store's search)."""
    with sqlite3.connect(store.path) as conn:
        query = "SELECT count(*) FROM message_fts WHERE message_fts MATCH ?"
        return int(conn.execute(query, (f'"{word}"',)).fetchone()[0])


def check_index(store: SQLiteStore) -> tuple[int, int]:
    """FTS5's checks of its index (and against ``message_search`` when no row waits for
    a batch); the mark and the last row."""
    with sqlite3.connect(store.path) as conn:
        conn.execute("INSERT INTO message_fts(message_fts) VALUES ('integrity-check')")
        mark = conn.execute("SELECT num FROM message_fts_mark").fetchone()[0]
        last = conn.execute("SELECT coalesce(max(num), 0) FROM message_search").fetchone()[0]
        if mark >= last:  # every row is in the index: it must hold exactly them
            check = "INSERT INTO message_fts(message_fts, rank) VALUES ('integrity-check', 1)"
            conn.execute(check)
        return int(mark), int(last)


def automerge(store: SQLiteStore) -> int:
    with sqlite3.connect(store.path) as conn:
        found = conn.execute("SELECT v FROM message_fts_config WHERE k = 'automerge'").fetchone()
        return 4 if found is None else int(found[0])


async def found(store: SQLiteStore, word: str) -> int:
    return len(await store.search_messages(word, owner="ann"))


async def test_writes_index_in_batches_and_a_search_indexes_the_rest(
    sqlite_store: SQLiteStore,
) -> None:
    cid = await conversation(sqlite_store)
    await say(sqlite_store, cid, ["zebra"])
    assert in_index(sqlite_store, "zebra") == 0  # written, not indexed yet
    assert await found(sqlite_store, "zebra") == 1  # the search indexes it first
    assert in_index(sqlite_store, "zebra") == 1
    mark, last = check_index(sqlite_store)
    assert mark == last

    many = words("batch", BATCH + 10)
    await say(sqlite_store, cid, many)
    mark, last = check_index(sqlite_store)
    assert mark == last - 10  # the write of the batch's last row indexed the batch
    assert in_index(sqlite_store, many[0]) == in_index(sqlite_store, many[BATCH - 1]) == 1
    assert in_index(sqlite_store, many[BATCH]) == in_index(sqlite_store, many[-1]) == 0
    for word in (many[0], many[BATCH - 1], many[-1]):
        assert await found(sqlite_store, word) == 1, word
    assert check_index(sqlite_store)[0] == last


async def test_deletes_on_both_sides_of_the_mark_keep_the_index_whole(
    sqlite_store: SQLiteStore,
) -> None:
    kept, gone = await conversation(sqlite_store), await conversation(sqlite_store)
    await say(sqlite_store, kept, words("kept", 5))
    await say(sqlite_store, gone, words("gone", 5))
    assert await found(sqlite_store, "about") == 10  # everything indexed
    await say(sqlite_store, gone, ["pending"])  # after the mark
    await sqlite_store.write(DeleteConversation(gone))
    mark, last = check_index(sqlite_store)
    assert await found(sqlite_store, "about") == 5
    assert await found(sqlite_store, "pending") == 0 and await found(sqlite_store, "goneaa") == 0

    # The deleted rows were the newest: the next rows take their numbers again, at or
    # below the mark, and are indexed as they are written.
    assert last < mark
    await say(sqlite_store, kept, ["reused"])
    assert in_index(sqlite_store, "reused") == 1
    assert await found(sqlite_store, "reused") == 1
    check_index(sqlite_store)


async def test_a_store_at_0020_is_marked_as_fully_indexed(tmp_path: Path) -> None:
    store = await SQLiteStore.open(tmp_path / "store.db")
    cid = await conversation(store)
    await say(store, cid, ["before"])
    await store.close()
    with sqlite3.connect(store.path) as conn:  # back to 0020: every row in FTS5
        for column in ("unit_usd", *(name for name, _ in v0022_spend_tabs._COUNTS)):
            conn.execute(f"ALTER TABLE spend_holds DROP COLUMN {column}")  # 0022's
        for statement in v0021_search_batches._DOWN:
            conn.execute(statement)
        conn.execute("UPDATE alembic_version SET version_num = '0020'")
    assert in_index(store, "before") == 1
    assert automerge(store) == 4  # FTS5's default, as before 0021
    store = await SQLiteStore.open(tmp_path / "store.db")
    try:
        assert automerge(store) == AUTOMERGE
        assert check_index(store)[0] == check_index(store)[1] == 1
        await say(store, cid, ["after"])
        assert await found(store, "before") == 1 and await found(store, "after") == 1
        check_index(store)
    finally:
        await store.close()
