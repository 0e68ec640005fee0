"""Opening stores by URL, migrations, persistence, SQLite settings."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from ostinato.ids import new_id
from ostinato.messages import user_text
from ostinato.store import (
    MemoryStore,
    PostgresStore,
    SQLiteStore,
    describe_url,
    open_store,
)
from ostinato.store.base import Conversation, CreateConversation, append, utcnow
from ostinato.store.sql.migrate import upgrade
from ostinato.store.sql.tables import include_object, metadata

HEAD = "0022"


async def test_memory_url() -> None:
    assert isinstance(await open_store("memory://"), MemoryStore)


async def test_default_is_ostinato_db_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = await open_store()
    try:
        assert isinstance(store, SQLiteStore)
        assert Path(store.path) == tmp_path / "ostinato.db"
    finally:
        await store.close()
    assert (tmp_path / "ostinato.db").exists()
    assert describe_url(None) == f"sqlite:///{tmp_path / 'ostinato.db'}"


@pytest.mark.parametrize("scheme", ["sqlite", "sqlite+aiosqlite"])
async def test_sqlite_urls(tmp_path: Path, scheme: str) -> None:
    store = await open_store(f"{scheme}:///{tmp_path}/sub/dir/x.db")
    try:
        assert isinstance(store, SQLiteStore)
        assert store.path == str(tmp_path / "sub" / "dir" / "x.db")
    finally:
        await store.close()


@pytest.mark.parametrize(
    "url",
    ["mysql://u:secret@h/db", "sqlite://", "sqlite:///:memory:", "redis://h", "nonsense"],
)
async def test_unsupported_urls_are_a_clear_value_error(url: str) -> None:
    with pytest.raises(ValueError) as caught:
        await open_store(url)
    assert "secret" not in str(caught.value)


def test_describe_url_masks_passwords() -> None:
    for url in ["postgresql://ann:secret@db:5432/o", "postgres://ann:secret@db/o"]:
        described = describe_url(url)
        assert "secret" not in described and "ann:***@db" in described
    assert describe_url("mysql://ann:secret@db/o") == "mysql://ann:***@db/o"
    assert describe_url("memory://").startswith("memory://")
    assert describe_url("sqlite:////data/o.db") == "sqlite:////data/o.db"


async def test_postgres_urls_open(postgres_url: sa.URL) -> None:
    password = postgres_url.password
    for scheme in ["postgresql", "postgres", "postgresql+asyncpg"]:
        url = postgres_url.set(drivername=scheme).render_as_string(hide_password=False)
        store = await open_store(url)
        try:
            assert isinstance(store, PostgresStore)
            assert password is None or str(password) not in repr(store)
        finally:
            await store.close()


async def test_a_sqlite_file_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "keep.db"
    store = await SQLiteStore.open(path)
    now = utcnow()
    conv = Conversation(new_id(), "idle", now, now, owner="ann", metadata={"k": 1})
    await store.write(CreateConversation(conv))
    stored = [await append(store, conv.id, user_text(str(i))) for i in range(3)]
    await store.close()

    reopened = await SQLiteStore.open(path)
    try:
        got = await reopened.get_conversation(conv.id)
        assert got is not None and (got.id, got.owner, got.metadata) == (conv.id, "ann", {"k": 1})
        assert await reopened.list_messages(conv.id) == stored
        assert (await append(reopened, conv.id, user_text("more"))).seq == 4
    finally:
        await reopened.close()


async def test_sqlite_runs_in_wal_with_foreign_keys(sqlite_store: SQLiteStore) -> None:
    with sqlite3.connect(sqlite_store.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    reader = sqlite_store._reader()
    assert reader.execute("PRAGMA foreign_keys").fetchone() == (1,)
    assert reader.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
    assert reader.execute("PRAGMA busy_timeout").fetchone()[0] >= 10_000


def _schema_differences(connection: sa.Connection) -> list[object]:
    opts = {"compare_type": True, "include_object": include_object}
    context = MigrationContext.configure(connection, opts=opts)
    return list(compare_metadata(context, metadata))


def _revision(connection: sa.Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def test_sqlite_migrations_build_the_tables_and_rerun_as_no_ops(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    for _ in range(2):
        store = await SQLiteStore.open(path)
        await store.close()
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        assert _revision(conn) == HEAD
        assert _schema_differences(conn) == []
        upgrade(conn)  # at head already: nothing to do
        assert _revision(conn) == HEAD
    engine.dispose()


async def test_postgres_migrations_match_the_tables(postgres_store: PostgresStore) -> None:
    async with postgres_store.engine.begin() as conn:
        assert await conn.run_sync(_revision) == HEAD
        assert await conn.run_sync(_schema_differences) == []
        await conn.run_sync(upgrade)
