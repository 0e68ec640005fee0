"""Frames between the worker processes of one ``ostinato serve --workers N`` on one
machine: a hub on a Unix socket, and the ``fanout.Transport`` that talks to it.

Several servers share frames through PostgreSQL ``LISTEN/NOTIFY`` or Redis (``fanout_pg``,
``fanout_redis``). Workers of one ``serve`` on a SQLite file have neither, so their
supervisor (``cli.workers``) runs a ``Hub``: each worker connects to it, and every line a
worker sends reaches every worker (the sender too, as the relay expects), in the order the
hub read it. The relay (``fanout.Relay``) does the rest as over any transport: positions
for committed rows, a gap in a sender's counter ends the local subscriptions, which replay
from the store.

A line is one payload: the relay's wire format is ASCII without line breaks. Payloads are
kept under ``LIMIT`` bytes (the relay cuts bigger bodies into parts). A worker that reads
so slowly that ``BACKLOG`` bytes wait for it is cut off; its relay reconnects, sees the
gap, and its streams catch up from the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

log = logging.getLogger("ostinato.fanout")

LIMIT = 60_000  # bytes in one payload at most
BACKLOG = 64 * 1024 * 1024  # bytes waiting for one worker before it is cut off


class Hub:
    """Every line one client sends, to every client, in the order it was read."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._clients: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, self.path, limit=2 * LIMIT)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._clients.add(writer)
        try:
            while line := await reader.readline():
                if not line.endswith(b"\n"):
                    break  # cut off mid-line: the client is going
                self._broadcast(line)
        except (ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            self._drop(writer)

    def _broadcast(self, line: bytes) -> None:
        for client in list(self._clients):
            if client.transport.get_write_buffer_size() > BACKLOG:
                log.warning("a worker reads its frames too slowly: cut off (it catches up)")
                self._drop(client)
                continue
            client.write(line)

    def _drop(self, writer: asyncio.StreamWriter) -> None:
        if writer in self._clients:
            self._clients.discard(writer)
            writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._clients):
            self._drop(writer)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()


class HubTransport:
    """``fanout.Transport`` over the supervisor's ``Hub``."""

    limit: int | None = LIMIT

    def __init__(self, path: str) -> None:
        self.path = path
        self._writer: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task[None] | None = None

    async def connect(
        self, received: Callable[[str], None], lost: Callable[[BaseException | None], None]
    ) -> None:
        await self.close()  # a reconnect after a loss
        reader, self._writer = await asyncio.open_unix_connection(self.path, limit=2 * LIMIT)
        self._reading = asyncio.create_task(self._read(reader, received, lost))

    async def _read(
        self,
        reader: asyncio.StreamReader,
        received: Callable[[str], None],
        lost: Callable[[BaseException | None], None],
    ) -> None:
        try:
            while line := await reader.readline():
                if not line.endswith(b"\n"):
                    break
                received(line[:-1].decode("ascii"))
        except (ConnectionError, asyncio.LimitOverrunError, ValueError) as exc:
            lost(exc)
            return
        lost(None)

    async def send(self, payloads: list[str]) -> None:
        if self._writer is None or self._writer.is_closing():
            raise ConnectionError("not connected to the workers' hub")
        self._writer.write("".join(f"{p}\n" for p in payloads).encode("ascii"))
        await self._writer.drain()

    async def close(self) -> None:
        reading, self._reading = self._reading, None
        if reading is not None:
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reading
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
