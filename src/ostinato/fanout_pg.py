"""The fan-out over PostgreSQL ``LISTEN/NOTIFY`` (the default with a PostgreSQL store).

One connection of its own per process (asyncpg, outside the store's pool): it listens on
one channel and sends each batch of payloads with one statement, so a batch is one
transaction and its notifications reach every listener together and in order
(PostgreSQL delivers a transaction's notifications in the order they were sent, and
drops a duplicate of one already sent in the same transaction: each payload carries its
sender's counter, so none is a duplicate). PostgreSQL hands a listening connection the
notifications it sent itself as well; those are left out where they arrive, before the
relay's queue and its task's wake-up (seven batches a turn). A payload must be shorter
than 8000 bytes;
``ostinato.fanout`` cuts longer bodies into parts of at most ``LIMIT`` bytes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import asyncpg
import sqlalchemy as sa

CHANNEL = "ostinato_frames"
LIMIT = 7900
_SEND = "SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS t(payload)"


def dsn_of(url: str | sa.URL) -> str:
    """The libpq-style URL asyncpg connects with, from the store's SQLAlchemy URL."""
    parsed = sa.make_url(url) if isinstance(url, str) else url
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


class PostgresTransport:
    limit: int | None = LIMIT

    def __init__(self, url: str | sa.URL, *, channel: str = CHANNEL) -> None:
        self.dsn = dsn_of(url)
        self.channel = channel
        self._connection: Any = None

    async def connect(
        self, received: Callable[[str], None], lost: Callable[[BaseException | None], None]
    ) -> None:
        await self.close()
        connection = await asyncpg.connect(self.dsn)
        own = connection.get_server_pid()  # what this connection sent comes back to it

        def on_notify(_c: object, pid: int, _channel: str, payload: str) -> None:
            if pid != own:  # one's own payloads: the relay would only skip them
                received(payload)

        def on_terminate(_c: object) -> None:
            if self._connection is connection:  # not one this transport closed itself
                lost(None)

        await connection.add_listener(self.channel, on_notify)
        connection.add_termination_listener(on_terminate)
        self._connection = connection

    async def send(self, payloads: list[str]) -> None:
        if self._connection is None:
            raise ConnectionError("the fan-out connection is not open")
        await self._connection.execute(_SEND, self.channel, payloads)

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None and not connection.is_closed():
            with contextlib.suppress(Exception):
                await connection.close(timeout=2.0)
