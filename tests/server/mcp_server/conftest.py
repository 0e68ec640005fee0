"""A live server on SQLite and on PostgreSQL for the MCP server tests (``live_protocols``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.live_protocols import Live, serve


@pytest.fixture(params=["sqlite", "postgres"])
def live(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Live]:
    postgres = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    yield from serve(request.param, tmp_path, postgres)
