"""The store each background test runs on: the memory store, SQLite, and PostgreSQL when
``OSTINATO_TEST_POSTGRES_URL`` is set (tests that take ``store``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ostinato.store.base import Store
from tests.store.conftest import _open, postgres_url

__all__ = ["postgres_url"]  # the session's PostgreSQL database (skips without one)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened = await _open(request.param, tmp_path, request)
    yield opened
    await opened.close()  # PostgreSQL's kept connections back to the pool
