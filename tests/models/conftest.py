"""Adapter tests run against a fake server per protocol; see ``fakes.harness``."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # makes `fakes` importable

from fakes.harness import FAKES, Harness
from fakes.server import FakeProvider
from ostinato.store.base import Store
from tests.store.conftest import _open, postgres_url

__all__ = ["postgres_url"]  # the session's PostgreSQL database (skips without one)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Each store engine, for the whole-turn tests."""
    opened = await _open(request.param, tmp_path, request)
    yield opened
    await opened.close()  # PostgreSQL's kept connections back to the pool


@pytest.fixture(scope="session")
def fake_servers() -> Iterator[dict[str, FakeProvider]]:
    """One running fake per protocol, shared by the session (each test resets it)."""
    with ExitStack() as stack:
        yield {name: stack.enter_context(fake()) for name, fake in FAKES.items()}


@pytest.fixture(params=sorted(FAKES))
def harness(
    request: pytest.FixtureRequest, fake_servers: dict[str, FakeProvider]
) -> Iterator[Harness]:
    """One protocol's fake server; the test fails if a request broke its rules."""
    fake = fake_servers[request.param]
    fake.reset()
    yield Harness(request.param, fake)
    fake.assert_clean()
