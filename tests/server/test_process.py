"""The server's listening socket, and the work it runs once listening (server/process.py)."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from ostinato.server.process import listen, run_reported


async def test_connections_accepted_on_the_listening_socket_send_without_delay() -> None:
    """Each answer goes out as soon as it is written (TCP_NODELAY): without it, a response
    written in two parts (uvicorn writes the head, then the body) on a kept-alive
    connection waits for the client's delayed ACK, about 40 ms per request on Linux."""
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def on_connection(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection: socket.socket = writer.get_extra_info("socket")
        accepted.set_result(connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    sock = listen("127.0.0.1", 0)
    server = await asyncio.start_server(on_connection, sock=sock)  # as uvicorn serves it
    async with server:
        _, writer = await asyncio.open_connection(*sock.getsockname())
        assert await asyncio.wait_for(accepted, 5) != 0
        writer.close()


async def test_work_run_once_started_is_logged_when_it_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fails() -> None:
        raise RuntimeError("could not prepare")

    async def works() -> str:
        return "ready"

    with caplog.at_level(logging.ERROR, logger="ostinato.server"):
        failed, done = run_reported(fails), run_reported(works)
        await asyncio.wait([failed, done])
        await asyncio.sleep(0)  # the done callbacks run
    (record,) = [r for r in caplog.records if r.name == "ostinato.server"]
    assert "once the server listens failed" in record.getMessage()
    assert record.exc_info is not None and "could not prepare" in str(record.exc_info[1])
    assert done.result() == "ready"
