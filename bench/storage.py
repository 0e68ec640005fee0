"""Storage cost: the bytes a stored message takes, by engine, with and without the search
index, in conversations of 10, 1,000 and 10,000 messages.

For each engine, index mode and conversation length L, a fresh database is given
``--messages`` messages (10,000) in conversations of L (so 1,000 conversations of 10,
10 of 1,000, one of 10,000), each message a sentence of this repository's prose (the
text ``bench/search.py`` stores), appended the way the loop appends them. The bytes the
database grew by, divided by the messages, is the cost of a message:

- SQLite: the pages in use (``page_count - freelist_count``, times ``page_size``) after
  the WAL is checkpointed, against the same count just after the migration;
- PostgreSQL: ``pg_total_relation_size`` (table, indexes, TOAST) of every table, after
  ``VACUUM ANALYZE``, against the same sum before.

The index off is ``ops.index_message`` replaced by nothing: no ``message_search`` row,
so no FTS5 or GIN entry. A conversation's title is indexed either way.

Run:  python bench/storage.py [--messages N] [--postgres URL_OF_A_SCRATCH_SERVER]
(each PostgreSQL run makes and drops a database of its own on that server).
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock
from ostinato.store import open_store
from ostinato.store.base import AppendMessage, Conversation, CreateConversation, Store, utcnow
from ostinato.store.sql import ops

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search import corpus

LENGTHS = (10, 1_000, 10_000)
BATCH = 500  # messages a write


async def fill(store: Store, texts: list[str], length: int) -> None:
    for start in range(0, len(texts), length):
        now = utcnow()
        conversation = Conversation(new_id(), "idle", now, now, "ann", None, f"Chat {start}")
        await store.write(CreateConversation(conversation))
        part = texts[start : start + length]
        for at in range(0, len(part), BATCH):
            appends = [
                AppendMessage(
                    conversation.id, Message(("user", "assistant")[i % 2], (TextBlock(t),))
                )
                for i, t in enumerate(part[at : at + BATCH], start=at)
            ]
            await store.write(*appends)


def sqlite_used(path: str) -> int:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * size)
    finally:
        conn.close()


async def sqlite_cost(texts: list[str], length: int, folder: Path) -> float:
    path = str(folder / f"s{length}_{new_id()}.db")
    store = await open_store(f"sqlite:///{path}")
    before = sqlite_used(path)
    await fill(store, texts, length)
    await store.close()
    return (sqlite_used(path) - before) / len(texts)


def _async(url: str) -> str:
    return (
        sa.make_url(url).set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)
    )


async def pg_sizes(url: str) -> int:
    engine = create_async_engine(_async(url), isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.exec_driver_sql("VACUUM ANALYZE")
            found = (
                await conn.exec_driver_sql(
                    "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN "
                    "pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = 'public' AND c.relkind = 'r'"
                )
            ).scalar()
            return int(found or 0)
    finally:
        await engine.dispose()


async def pg_cost(texts: list[str], length: int, server: str) -> float:
    name = f"storage_{new_id()}"
    admin = create_async_engine(_async(server), isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.exec_driver_sql(f"CREATE DATABASE {name}")
    url = sa.make_url(server).set(database=name).render_as_string(hide_password=False)
    try:
        store = await open_store(url)
        before = await pg_sizes(url)
        await fill(store, texts, length)
        await store.close()
        return (await pg_sizes(url) - before) / len(texts)
    finally:
        async with admin.connect() as conn:
            await conn.exec_driver_sql(f"DROP DATABASE {name} WITH (FORCE)")
        await admin.dispose()


async def main(args: argparse.Namespace) -> None:
    texts = corpus(args.messages)
    average = sum(len(t.encode()) for t in texts) / len(texts)
    print(f"{args.messages} messages, text {average:.0f} bytes a message on average")
    indexing = ops.index_message
    engines = ["sqlite"] + (["postgres"] if args.postgres else [])
    with tempfile.TemporaryDirectory() as folder:
        for engine in engines:
            for mode in ("on", "off"):
                ops.index_message = indexing if mode == "on" else (lambda *a: None)  # type: ignore[assignment]
                costs = []
                for length in LENGTHS:
                    if engine == "sqlite":
                        costs.append(await sqlite_cost(texts, length, Path(folder)))
                    else:
                        costs.append(await pg_cost(texts, length, args.postgres))
                cells = "  ".join(
                    f"{length:>6}: {cost:7.0f} B"
                    for length, cost in zip(LENGTHS, costs, strict=True)
                )
                print(f"{engine:8} index {mode:3}  {cells}", flush=True)
    ops.index_message = indexing


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--postgres", help="a PostgreSQL server (its postgres database URL)")
    asyncio.run(main(parser.parse_args()))
