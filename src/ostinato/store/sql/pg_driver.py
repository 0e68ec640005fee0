"""A pooled PostgreSQL connection's asyncpg connection, for the statements the store sends
to the driver itself (``pg_writer``'s grouped writes, ``pg_reads``' reads, ``pg_tx``'s
transactions).

Taken from the pool as a raw connection (``AsyncEngine.raw_connection``), not through a
SQLAlchemy ``Connection``: the pool's checkout and return are all these statements need,
and a ``Connection`` made and closed around them cost 60 µs of CPU each time against
about 25 (a turn takes a pooled connection some twenty times).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import greenlet_spawn


@contextlib.asynccontextmanager
async def driver_of(engine: AsyncEngine) -> AsyncIterator[Any]:
    """The asyncpg connection of a connection taken from ``engine``'s pool, given back
    after. An error PostgreSQL answered with leaves it usable; anything else (a lost
    connection, a cancel in flight) leaves it in an unknown state: it is invalidated,
    never reused. So is one given back inside a transaction block (none should be)."""
    import asyncpg

    pooled = await engine.raw_connection()
    driver = pooled.driver_connection
    assert driver is not None
    try:
        yield driver
    except asyncpg.PostgresError:
        if driver.is_in_transaction():
            await greenlet_spawn(pooled.invalidate)
        raise
    except BaseException:
        await greenlet_spawn(pooled.invalidate)
        raise
    else:
        if driver.is_in_transaction():
            await greenlet_spawn(pooled.invalidate)
    finally:
        await greenlet_spawn(pooled.close)  # back to the pool (an invalidated one: gone)
