"""Migrations at open: an empty database, a database left at 0001, reopening."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.ext.asyncio import create_async_engine

from ostinato.approvals import Approval, Ending, arguments_hash
from ostinato.errors import AlreadyAnswered
from ostinato.ids import new_id
from ostinato.messages import Message, ToolResultBlock, user_text
from ostinato.store import PostgresStore, SQLiteStore, Store, is_postgres
from ostinato.store.base import (
    AppendMessage,
    AppendSummary,
    CreateApproval,
    DecideApproval,
    Enqueue,
    QueuedInput,
    RememberFact,
    append,
    utcnow,
)
from ostinato.store.sql.migrate import HEAD_REVISION, SCRIPT_LOCATION, switch_to_wal, upgrade
from ostinato.store.sql.tables import include_object, metadata

HEAD = "0022"
PEOPLE_TABLES = {
    "approvals",
    "grants",
    "queued_inputs",
    "summaries",
    "memories",
    "tool_switches",
    "api_keys",
    "limit_slots",
    "limit_events",
    "memory_relations",
    "forged_tools",
    "servers",
    "request_keys",
    "schedules",
    "conversation_holds",
    "mcp_servers",
    "job_states",
    "job_runs",
    "memory_uses",
    "spend_days",
    "spend_holds",
    "usage_days",
    "protocol_records",
    "agent_versions",
    "conversation_agents",
    "message_search",
    "tool_results",
}
T = TypeVar("T")


def _at_0001_with_a_conversation(connection: sa.Connection, cid: str) -> None:
    """Build the 0001 schema only, and leave one conversation with a message in it."""
    upgrade(connection, "0001")
    now = utcnow()
    connection.execute(
        sa.text(
            "INSERT INTO conversations (id, owner, state, metadata, created_at, updated_at)"
            " VALUES (:id, 'ann', 'idle', '{}', :now, :now)"
        ),
        {"id": cid, "now": now},
    )
    connection.execute(
        sa.text(
            "INSERT INTO messages (id, conversation_id, seq, role, blocks, hidden, metadata,"
            " created_at) VALUES (:id, :c, 1, 'user',"
            ' \'[{"type":"text","text":"from 0001"}]\', false, \'{}\', :now)'
        ),
        {"id": new_id(), "c": cid, "now": now},
    )


def _state(connection: sa.Connection) -> tuple[str | None, set[str], list[object]]:
    """The revision, the tables, and how the schema differs from ``tables.metadata``."""
    opts = {"compare_type": True, "include_object": include_object}
    context = MigrationContext.configure(connection, opts=opts)
    tables = {
        name
        for name in sa.inspect(connection).get_table_names()
        if not name.startswith(("memories_fts", "message_fts"))
    }
    return context.get_current_revision(), tables, list(compare_metadata(context, metadata))


async def _use_the_new_tables(store: Store, cid: str) -> None:
    """The conversation made at 0001 reads back and takes approvals and queued inputs."""
    (message,) = await store.list_messages(cid)
    assert message.text == "from 0001"
    # 0015 indexed what was stored for search, and a new message joins it
    assert [h.message_id for h in await store.search_messages("0001", owner="ann")] == [message.id]
    assert (await append(store, cid, user_text("after 0002"))).seq == 2
    arguments = {"cmd": "ls"}
    asked = Approval(
        id=new_id(),
        conversation_id=cid,
        turn_id=new_id(),
        tool_use_id="tu_1",
        tool="shell",
        arguments=arguments,
        arguments_hash=arguments_hash("shell", arguments),
        risk="exec",
        family=None,
        requested_at=utcnow(),
    )
    await store.write(CreateApproval(asked), DecideApproval(asked.id, Ending.APPROVED, utcnow()))
    item = QueuedInput(new_id(), cid, user_text("queued"), utcnow())
    (stored,) = await store.write(Enqueue(item))
    assert stored.position >= 1
    assert await store.list_queued(cid) == [stored]
    (fact,) = await store.write(RememberFact("ann", "prefers tea after 0003"))
    assert [h.fact for h in await store.search_memories("ann", "tea")] == [fact]
    (summary,) = await store.write(AppendSummary(cid, user_text("summary"), through_seq=2))
    assert (await store.window(cid, limit=5)).summary == summary


def _sqlite(path: Path, work: Callable[[sa.Connection], T]) -> T:
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        with engine.begin() as connection:
            return work(connection)
    finally:
        engine.dispose()


async def test_sqlite_at_0001_is_upgraded_at_open_and_reopens_as_is(tmp_path: Path) -> None:
    path, cid = tmp_path / "old.db", new_id()
    _sqlite(path, lambda c: _at_0001_with_a_conversation(c, cid))
    revision, tables, _ = _sqlite(path, _state)
    assert revision == "0001" and not tables & PEOPLE_TABLES

    store = await SQLiteStore.open(path)
    try:
        assert _sqlite(path, _state) == (HEAD, tables | PEOPLE_TABLES, [])
        await _use_the_new_tables(store, cid)
        queued = await store.list_queued()
    finally:
        await store.close()

    reopened = await SQLiteStore.open(path)
    try:
        assert _sqlite(path, _state)[0] == HEAD
        assert await reopened.list_queued() == queued
        assert len(await reopened.list_approvals(cid)) == 1
    finally:
        await reopened.close()


async def test_sqlite_stores_opening_an_empty_file_at_once(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    # (the journal-mode switch answered "database is locked" at once while another
    # opener held a lock: one run in about twenty failed before switch_to_wal)
    stores = await asyncio.gather(*(SQLiteStore.open(path) for _ in range(8)))
    for store in stores:
        await store.close()
    revision, tables, differences = _sqlite(path, _state)
    assert (revision, differences) == (HEAD, [])
    assert tables >= PEOPLE_TABLES


def test_the_head_revision_named_in_code_is_alembics_head() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    assert ScriptDirectory.from_config(config).get_current_head() == HEAD_REVISION == HEAD


async def _open_and_close(path: Path) -> None:
    await (await SQLiteStore.open(path)).close()


def test_a_sqlite_file_at_head_opens_without_alembic_or_the_postgres_store(
    tmp_path: Path,
) -> None:
    path = tmp_path / "at-head.db"
    asyncio.run(_open_and_close(path))
    code = (
        "import asyncio, json, sys\n"
        "from ostinato.store import SQLiteStore\n"
        "async def main():\n"
        f"    store = await SQLiteStore.open({str(path)!r})\n"
        "    await store.close()\n"
        "asyncio.run(main())\n"
        "print(json.dumps([m in sys.modules for m in ('alembic', 'ostinato.store.sql.postgres')]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [False, False]
    assert _sqlite(path, _state)[0] == HEAD
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)


@pytest.mark.parametrize("root", ["INFO", "DEBUG"])
def test_migrating_logs_alembic_s_steps_only_at_debug(tmp_path: Path, root: str) -> None:
    """A first start logs at INFO (``ostinato serve``): no screen of Alembic lines before
    its banner; at DEBUG they are all there."""
    code = (
        "import asyncio, logging\n"
        f"logging.basicConfig(level=logging.{root})\n"
        "from ostinato.store import SQLiteStore\n"
        "async def main():\n"
        f"    store = await SQLiteStore.open({str(tmp_path / 'new.db')!r})\n"
        "    await store.close()\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    steps = [line for line in done.stderr.splitlines() if "alembic" in line]
    if root == "INFO":
        assert steps == []
    else:
        assert any("Running upgrade" in line and f"-> {HEAD}," in line for line in steps)


async def test_is_postgres_tells_the_engines_apart(store: Store) -> None:
    assert is_postgres(store) == isinstance(store, PostgresStore)
    assert is_postgres(store) == (type(store).__name__ == "PostgresStore")


def test_the_switch_to_wal_waits_out_another_connections_lock(tmp_path: Path) -> None:
    # SQLite refuses a journal-mode change at once ("database is locked", no busy wait)
    # while another connection holds a lock; switch_to_wal tries again until the
    # lock goes or the busy timeout ends.
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE t (x INTEGER)")
    holder.execute("INSERT INTO t VALUES (1)")
    holder.execute("BEGIN")
    holder.execute("SELECT * FROM t").fetchall()  # a shared lock until COMMIT
    switcher = sqlite3.connect(path, isolation_level=None)
    switcher.execute("PRAGMA busy_timeout = 5000")
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            switcher.execute("PRAGMA journal_mode = WAL")
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            switch_to_wal(switcher, 50)  # the lock outlasts a short timeout
        release = threading.Timer(0.2, lambda: holder.execute("COMMIT"))
        release.start()
        assert switch_to_wal(switcher, 5000) == "wal"
        release.join()
        assert switch_to_wal(switcher, 5000) == "wal"  # already so: nothing to do
    finally:
        switcher.close()
        holder.close()


async def test_postgres_at_0001_is_upgraded_at_open_and_reopens_as_is(
    empty_postgres_url: sa.URL,
) -> None:
    cid = new_id()
    engine = create_async_engine(empty_postgres_url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_at_0001_with_a_conversation, cid)
            revision, tables, _ = await connection.run_sync(_state)
        assert revision == "0001" and not tables & PEOPLE_TABLES
    finally:
        await engine.dispose()

    store = await PostgresStore.open(empty_postgres_url)
    try:
        async with store.engine.begin() as connection:
            assert await connection.run_sync(_state) == (HEAD, tables | PEOPLE_TABLES, [])
        await _use_the_new_tables(store, cid)
        queued = await store.list_queued()
    finally:
        await store.close()

    reopened = await PostgresStore.open(empty_postgres_url)
    try:
        async with reopened.engine.begin() as connection:
            assert (await connection.run_sync(_state))[0] == HEAD
        assert await reopened.list_queued() == queued
        assert len(await reopened.list_approvals(cid)) == 1
    finally:
        await reopened.close()


async def test_postgres_stores_opening_an_empty_database_at_once(
    empty_postgres_url: sa.URL,
) -> None:
    stores = await asyncio.gather(*(PostgresStore.open(empty_postgres_url) for _ in range(3)))
    try:
        async with stores[0].engine.begin() as connection:
            revision, tables, differences = await connection.run_sync(_state)
        assert (revision, differences) == (HEAD, [])
        assert tables >= PEOPLE_TABLES
    finally:
        for store in stores:
            await store.close()


# --- 0019: one result per tool call -------------------------------------------------------

_ROWS_AT_0018 = [  # (seq, role, turn, blocks): two races' leftovers, as 0018 let them be
    (1, "user", "t1", [{"type": "text", "text": "go"}]),
    (2, "assistant", "t1", [{"type": "tool_use", "id": "a", "name": "x", "input": {}}]),
    (3, "tool", "t1", [{"type": "tool_result", "tool_use_id": "a", "content": "real"}]),
    (4, "tool", "t1", [{"type": "tool_result", "tool_use_id": "a", "content": "cancelled"}]),
    (5, "user", "t2", [{"type": "text", "text": "again"}]),
    (6, "assistant", "t2", [{"type": "tool_use", "id": "a", "name": "x", "input": {}}]),
    (
        7,
        "tool",
        "t2",
        [
            {"type": "tool_result", "tool_use_id": "a", "content": "own"},
            {"type": "tool_result", "tool_use_id": "a", "content": "again"},
            {"type": "text", "text": "note"},
        ],
    ),
    (8, "tool", "t3", [{"type": "tool_result", "tool_use_id": "a", "content": "repair"}]),
]


def _at_0018_with_repeated_results(connection: sa.Connection, cid: str) -> None:
    upgrade(connection, "0018")
    now = utcnow()
    connection.execute(
        sa.text(
            "INSERT INTO conversations (id, owner, state, metadata, created_at, updated_at)"
            " VALUES (:id, 'ann', 'idle', '{}', :now, :now)"
        ),
        {"id": cid, "now": now},
    )
    for seq, role, turn, blocks in _ROWS_AT_0018:
        connection.execute(
            sa.text(
                "INSERT INTO messages (id, conversation_id, turn_id, seq, role, blocks, hidden,"
                " metadata, created_at) VALUES (:id, :c, :t, :s, :r, :b, false, '{}', :now)"
            ),
            {"id": f"m{seq}", "c": cid, "t": turn, "s": seq, "r": role, "now": now}
            | {"b": json.dumps(blocks)},
        )


async def _check_first_results_kept(store: Store, cid: str) -> None:
    rows = await store.list_messages(cid)
    assert [m.seq for m in rows] == [1, 2, 3, 5, 6, 7]  # seq 4 and 8 held only repeats
    answers = [(m.seq, r.tool_use_id, r.text) for m in rows for r in m.tool_results]
    assert answers == [(3, "a", "real"), (7, "a", "own")]
    assert rows[-1].text == "note"
    with pytest.raises(AlreadyAnswered):  # and from now on the store refuses them
        await store.write(AppendMessage(cid, Message("tool", (ToolResultBlock("a", "x"),)), "t2"))
    (fresh,) = await store.write(AppendMessage(cid, user_text("after"), "t4"))
    assert fresh.seq == 8


async def test_sqlite_at_0018_keeps_the_first_result_of_each_call(tmp_path: Path) -> None:
    path, cid = tmp_path / "races.db", new_id()
    _sqlite(path, lambda c: _at_0018_with_repeated_results(c, cid))
    store = await SQLiteStore.open(path)
    try:
        assert _sqlite(path, _state)[0] == HEAD
        await _check_first_results_kept(store, cid)
    finally:
        await store.close()


async def test_postgres_at_0018_keeps_the_first_result_of_each_call(
    empty_postgres_url: sa.URL,
) -> None:
    cid = new_id()
    engine = create_async_engine(empty_postgres_url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_at_0018_with_repeated_results, cid)
    finally:
        await engine.dispose()
    store = await PostgresStore.open(empty_postgres_url)
    try:
        await _check_first_results_kept(store, cid)
    finally:
        await store.close()
