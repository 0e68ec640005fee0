"""The memory tests run on every store engine (memory, SQLite, and PostgreSQL when
``OSTINATO_TEST_POSTGRES_URL`` is set): the store suite's fixtures."""

from __future__ import annotations

from tests.store.conftest import postgres_url, store

__all__ = ["postgres_url", "store"]
