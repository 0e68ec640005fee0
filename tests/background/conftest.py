"""The store each background test runs on: the memory store, SQLite, and PostgreSQL when
``OSTINATO_TEST_POSTGRES_URL`` is set (tests that take ``store``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ostinato.store import open_store
from ostinato.store.base import Store
from ostinato.store.memory import MemoryStore
from tests.store.conftest import open_postgres, postgres_url

__all__ = ["postgres_url"]  # the session's PostgreSQL database (skips without one)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "sqlite":
        yield await open_store(f"sqlite:///{tmp_path}/s.db")
    else:
        opened = await open_postgres(request.getfixturevalue("postgres_url"))
        yield opened
        await opened.close()  # the connections it keeps back to the pool (closing twice: fine)
