"""Migrations during a rolling update (issue 33 item 4, docs/deploy.md "Migrations during
a rolling update"): old and new servers run side by side on one database, so

- the previous release's ``ostinato serve`` (its source at ``PREVIOUS_RELEASE``) starts
  and runs a turn on a PostgreSQL database migrated by this version;
- this version starts and runs on a database a later release migrated (a revision it
  does not know): it does not migrate it, and does not refuse it.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.store import PostgresStore, SQLiteStore, Store
from ostinato.store.sql.migrate import HEAD_REVISION
from tests.e2e.server import Server
from tests.store.conftest import _admin

ROOT = Path(__file__).resolve().parents[2]
# The previous release: the final commit of the last stop (its closing note). Move it to
# the new one at each stop, so a migration is always checked against the release before.
PREVIOUS_RELEASE = "73d0aa4"
LATER = "9999_later"  # a revision only a later release would know


@pytest.fixture
def scratch() -> Iterator[str]:
    raw = os.environ.get("OSTINATO_TEST_POSTGRES_URL")
    if not raw:
        pytest.skip("needs OSTINATO_TEST_POSTGRES_URL")
    admin = sa.make_url(raw)
    name = f"ostinato_rollout_{uuid.uuid4().hex[:12]}"
    _admin(admin, f'CREATE DATABASE "{name}"')
    try:
        url = admin.set(drivername="postgresql+asyncpg", database=name)
        yield url.render_as_string(hide_password=False)
    finally:
        _admin(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def previous_source(into: Path) -> Path:
    """The previous release's ``src`` folder, from git (skipped without the history)."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", PREVIOUS_RELEASE, "src"],
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
    except (subprocess.CalledProcessError, FileNotFoundError):
        pytest.skip(f"the previous release {PREVIOUS_RELEASE} is not in this clone's history")
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def test_the_previous_release_serves_on_a_database_migrated_by_this_one(
    scratch: str, tmp_path: Path
) -> None:
    asyncio.run(_migrate(scratch))  # by this version (in process: one start fewer)
    old = previous_source(tmp_path / "previous")
    env = {"PYTHONPATH": str(old), "OSTINATO_DATA__TITLES": "off"}
    server = Server(scratch, tmp_path / "data", tmp_path / "serve.log", env)
    server.start()
    try:
        version = httpx.get(f"{server.url}/healthz", timeout=10).json()
        cid = server.post("/v1/conversations", {}).json()["id"]
        turn = server.post(f"/v1/conversations/{cid}/turns", {"text": "hello"})
        assert turn.status_code == 200, server.tail()
        assert turn.json()["stop_reason"] == "end_turn"
    finally:
        server.kill()
    versions = old / "ostinato" / "store" / "migrations" / "versions"
    if list(versions.glob(f"v{HEAD_REVISION}_*.py")):  # same head: nothing to skip
        assert "later release" not in server.tail()
    else:  # this version added a migration: the old server runs on it as it is
        assert f"at revision {HEAD_REVISION}, written by a later release" in server.tail()
    assert version["status"] == "ok"
    assert str(old) in _imported_from(old)


async def _migrate(url: str) -> None:
    await (await PostgresStore.open(sa.make_url(url))).close()


def _imported_from(src: Path) -> str:
    """Where ``ostinato`` is imported from with ``src`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    code = "import ostinato; print(ostinato.__file__)"
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return run.stdout


async def test_this_version_runs_on_a_database_a_later_release_migrated(
    scratch: str, tmp_path: Path
) -> None:
    store = await PostgresStore.open(sa.make_url(scratch))
    async with store.engine.begin() as connection:
        await connection.execute(sa.text(f"UPDATE alembic_version SET version_num = '{LATER}'"))
    await store.close()
    again = await PostgresStore.open(sa.make_url(scratch))  # to head: skipped, not refused
    try:
        await _runs(again)
        async with again.engine.begin() as connection:
            found = await connection.execute(sa.text("SELECT version_num FROM alembic_version"))
            assert found.scalar_one() == LATER
    finally:
        await again.close()

    path = tmp_path / "later.db"
    await (await SQLiteStore.open(path)).close()
    with sqlite3.connect(path) as connection:
        connection.execute(f"UPDATE alembic_version SET version_num = '{LATER}'")
    reopened = await SQLiteStore.open(path)
    try:
        await _runs(reopened)
    finally:
        await reopened.close()


async def _runs(store: Store) -> None:
    runtime = Runtime(store, model=ScriptedModel([text_step("hi")]))
    conversation = await runtime.create_conversation()
    result = await runtime.run_turn(conversation.id, "hello")
    assert result.stop_reason == "end_turn"
