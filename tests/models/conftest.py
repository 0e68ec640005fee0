"""Adapter tests run against a fake server per protocol; see ``fakes.harness``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # makes `fakes` importable

from fakes.harness import FAKES, Harness


@pytest.fixture(params=sorted(FAKES))
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """One protocol's fake server; the test fails if a request broke its rules."""
    with FAKES[request.param]() as fake:
        yield Harness(request.param, fake)
        fake.assert_clean()
