"""A pooled PostgreSQL connection's asyncpg connection, for the statements the store sends
to the driver itself (``pg_writer``'s grouped writes, ``pg_reads``' reads)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine


@contextlib.asynccontextmanager
async def driver_of(engine: AsyncEngine) -> AsyncIterator[Any]:
    """The asyncpg connection of a connection taken from ``engine``'s pool, given back
    after. An error PostgreSQL answered with leaves it usable; anything else (a lost
    connection, a cancel in flight) leaves it in an unknown state: it is invalidated,
    never reused."""
    import asyncpg

    async with engine.connect() as connection:
        driver = (await connection.get_raw_connection()).driver_connection
        assert driver is not None
        try:
            yield driver
        except asyncpg.PostgresError:
            raise
        except BaseException:
            await connection.invalidate()
            raise
