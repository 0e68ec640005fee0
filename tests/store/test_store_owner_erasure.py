"""Erasing an owner on every engine: each of their conversations with every row of it,
their memory, keys and the rest go in one write; another owner keeps theirs. Then, on
SQLite and PostgreSQL, a string planted in ann's data is in no file: not in the database
file or its WAL (SQLite, after ``compact``), not in a ``pg_dump`` (PostgreSQL); bob's
is still there (so the scan would have seen ann's)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import sqlalchemy as sa

from ostinato.deletion import erase_owner
from ostinato.identity.keys import create_key
from ostinato.messages import user_text
from ostinato.store import PostgresStore, SQLiteStore, Store
from ostinato.store.base import RememberFact, append
from ostinato.store.erasure import OWNER_ROWS
from ostinato.store.sql.meta import metadata
from tests.store.test_store_erasure import filled
from tests.store.test_store_search import conversation

ANN = "qzvkplant" + os.urandom(4).hex()  # planted in ann's rows: found nowhere after
BOB = "qzvkkeep" + os.urandom(4).hex()  # planted in bob's: still found


async def plant(store: Store) -> str:
    """ann's conversation with a row of every kind, her fact and key; bob's too."""
    cid, _ = await filled(store, ANN)
    await store.write(RememberFact("ann", f"{ANN} likes tea"))
    await create_key(store, "ann", f"{ANN}-laptop")
    bobs = await conversation(store, "bob", BOB)
    await append(store, bobs, user_text(f"{BOB} says hi"))
    await store.write(RememberFact("bob", f"{BOB} likes coffee"))
    await create_key(store, "bob", f"{BOB}-laptop")
    return cid


async def test_an_owner_is_erased_and_no_one_else(store: Store, tmp_path: Path) -> None:
    cid = await plant(store)
    folder = tmp_path / "workdirs" / cid
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text(ANN)
    assert await erase_owner(store, "ann", tmp_path) == [cid]
    assert not folder.exists()
    assert await store.list_conversations(owner="ann") == []
    assert await store.list_memories("ann", include_closed=True) == []
    assert await store.list_api_keys("ann") == []
    assert await store.search_messages(ANN, owner=None) == []
    assert len(await store.list_conversations(owner="bob")) == 1
    assert len(await store.list_memories("bob")) == 1
    assert len(await store.list_api_keys("bob")) == 1
    assert await erase_owner(store, "ann", tmp_path) == []  # nothing left: nothing done


def test_every_table_with_an_owner_is_erased() -> None:
    with_owner = {t.name for t in metadata.sorted_tables if "owner" in t.c}
    assert with_owner - {"conversations"} == set(OWNER_ROWS), "name it in erasure.OWNER_ROWS"


async def test_no_trace_in_the_sqlite_files(sqlite_store: SQLiteStore, tmp_path: Path) -> None:
    await plant(sqlite_store)
    files = [Path(sqlite_store.path), Path(sqlite_store.path + "-wal")]

    def scan(word: str) -> list[str]:
        return [f.name for f in files if f.exists() and word.encode() in f.read_bytes()]

    assert scan(ANN) and scan(BOB)  # the scan sees what is there
    await erase_owner(sqlite_store, "ann", tmp_path)
    assert scan(ANN) == []
    assert scan(BOB)


async def test_no_trace_in_a_pg_dump(postgres_store: PostgresStore, tmp_path: Path) -> None:
    await plant(postgres_store)
    url = postgres_store.engine.url.set(drivername="postgresql")
    address = url.render_as_string(hide_password=False)

    async def dump() -> str:
        run = await asyncio.create_subprocess_exec(
            "pg_dump", "--data-only", address, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await run.communicate()
        assert run.returncode == 0
        return out.decode()

    before = await dump()
    assert ANN in before and BOB in before
    await erase_owner(postgres_store, "ann", tmp_path)
    after = await dump()
    assert ANN not in after and BOB in after
    rows = sa.select(sa.func.count()).select_from(metadata.tables["conversations"])
    assert (await postgres_store._fetch(rows, {}))[0][0] >= 1
