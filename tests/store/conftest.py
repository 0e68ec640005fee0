"""Stores to test against: memory, SQLite (a file in tmp_path) and PostgreSQL.

PostgreSQL runs when ``OSTINATO_TEST_POSTGRES_URL`` names a server we may create
databases on (e.g. ``postgresql://postgres@127.0.0.1:5432/test``). The session gets a
database of its own, dropped at the end; each test starts from empty tables.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from ostinato.store import MemoryStore, PostgresStore, SQLiteStore, Store

POSTGRES_ENV = "OSTINATO_TEST_POSTGRES_URL"
NO_POSTGRES = f"PostgreSQL tests need {POSTGRES_ENV}=postgresql://user@host:port/db"


def _admin(url: sa.URL, sql: str) -> None:
    """Run one statement on the admin database (in a thread: a loop may be running)."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, _admin_async(url, sql)).result()


async def _admin_async(url: sa.URL, sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(
        user=url.username,
        password=url.password,
        host=url.host,
        port=url.port,
        database=url.database,
    )
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@contextlib.contextmanager
def _scratch_database() -> Iterator[sa.URL]:
    """A database created for the caller, dropped when it is done."""
    raw = os.environ.get(POSTGRES_ENV)
    if not raw:
        pytest.skip(NO_POSTGRES)
    admin = sa.make_url(raw)
    name = f"ostinato_test_{uuid.uuid4().hex[:12]}"
    _admin(admin, f'CREATE DATABASE "{name}"')
    try:
        yield admin.set(drivername="postgresql+asyncpg", database=name)
    finally:
        _admin(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[sa.URL]:
    """A fresh database for this session, dropped afterwards."""
    with _scratch_database() as url:
        yield url


@pytest.fixture
def empty_postgres_url() -> Iterator[sa.URL]:
    """A database of its own for one test (no tables yet), dropped afterwards."""
    with _scratch_database() as url:
        yield url


async def open_postgres(url: sa.URL) -> PostgresStore:
    """Open the session database with every table emptied."""
    store = await PostgresStore.open(url)
    async with store.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "TRUNCATE conversations, turns, messages, tool_calls, approvals, grants,"
                " queued_inputs, summaries, memories, memory_relations, tool_switches, api_keys,"
                " limit_slots, limit_events, forged_tools, servers, request_keys, schedules,"
                " conversation_holds, job_states, job_runs, memory_uses, spend_days, spend_holds,"
                " usage_days, protocol_records, agent_versions, conversation_agents,"
                " message_search, tool_results"
            )
        )
    return store


def raw_statements(store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements the store sends on its raw connections (``_fetch_raw``) from now
    on, in order."""
    sent: list[str] = []
    fetch_raw = store._fetch_raw

    async def counted(text: str, args: list[Any]) -> list[Any]:
        sent.append(text)
        return await fetch_raw(text, args)

    monkeypatch.setattr(store, "_fetch_raw", counted)
    return sent


async def _open(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return await SQLiteStore.open(tmp_path / "store.db")
    return await open_postgres(request.getfixturevalue("postgres_url"))


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Each engine in turn."""
    opened = await _open(request.param, tmp_path, request)
    yield opened
    await opened.close()


@pytest.fixture(params=["sqlite", "postgres"])
async def sql_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[SQLiteStore | PostgresStore]:
    """Each SQL engine in turn."""
    opened = await _open(request.param, tmp_path, request)
    assert isinstance(opened, SQLiteStore | PostgresStore)
    yield opened
    await opened.close()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    opened = await SQLiteStore.open(tmp_path / "store.db")
    yield opened
    await opened.close()


@pytest.fixture
async def postgres_store(postgres_url: sa.URL) -> AsyncIterator[PostgresStore]:
    opened = await open_postgres(postgres_url)
    yield opened
    await opened.close()
