"""An SSE response and its client's disconnect, on a server that does not report a failed
write (ASGI before 2.4, as uvicorn): a second task reads ``receive``, and the client's
disconnect ends the stream at once (``on_abandon``, then ``on_close``); a cancellation
from elsewhere goes on up; a stream that ended by itself is not cancelled afterwards."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ostinato.server.sse import FrameStream

SCOPE: dict[str, Any] = {"type": "http", "asgi": {"version": "3.0"}}  # spec 2.0


class Client:
    """``receive`` and ``send`` of one request: it leaves when ``leave`` is set."""

    def __init__(self) -> None:
        self.leave = asyncio.Event()
        self.bodies: list[bytes] = []
        self.ended = False
        self.wrote = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.leave.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            self.bodies.append(message["body"])
            self.ended = not message.get("more_body", False)
            self.wrote.set()


async def endless() -> AsyncIterator[bytes]:
    while True:
        yield b"event: e\ndata: 1\n\n"
        await asyncio.sleep(0.01)


def stream(events: AsyncIterator[bytes], calls: list[str]) -> FrameStream:
    return FrameStream(
        events, on_close=lambda: calls.append("close"), on_abandon=lambda: calls.append("abandon")
    )


async def test_a_client_that_leaves_ends_its_stream_at_once() -> None:
    client, calls = Client(), list[str]()
    response = asyncio.ensure_future(
        stream(endless(), calls)(SCOPE, client.receive, client.send)  # type: ignore[arg-type]
    )
    await client.wrote.wait()
    client.leave.set()
    await asyncio.wait({response}, timeout=5)  # a bound on a hang: nothing cancels it
    assert response.done()
    await response  # returns: the disconnect is no error
    assert calls == ["abandon", "close"]
    assert not client.ended  # nothing more was written for a client that is gone


async def test_a_cancellation_from_elsewhere_goes_on_up() -> None:
    client, calls = Client(), list[str]()
    response = asyncio.ensure_future(
        stream(endless(), calls)(SCOPE, client.receive, client.send)  # type: ignore[arg-type]
    )
    await client.wrote.wait()
    response.cancel()  # e.g. the server stopping
    with pytest.raises(asyncio.CancelledError):
        await response
    assert calls == ["abandon", "close"]


async def test_a_stream_that_ends_as_its_client_leaves_is_not_cancelled_after() -> None:
    client, calls = Client(), list[str]()

    async def two() -> AsyncIterator[bytes]:
        yield b"event: e\ndata: 1\n\n"
        yield b"event: e\ndata: 2\n\n"

    async def leave_as_it_ends(message: dict[str, Any]) -> None:
        await client.send(message)
        if client.ended:
            client.leave.set()  # the reader wakes while the response returns

    async def respond_then_go_on() -> str:
        await stream(two(), calls)(SCOPE, client.receive, leave_as_it_ends)  # type: ignore[arg-type]
        for _ in range(5):
            await asyncio.sleep(0)  # a cancellation left behind would land here
        return "went on"

    assert await asyncio.wait_for(respond_then_go_on(), 5) == "went on"
    assert calls == ["close"] and client.ended


async def test_a_failed_read_of_the_request_is_the_response_error() -> None:
    client, calls = Client(), list[str]()

    async def broken() -> dict[str, Any]:
        await client.wrote.wait()
        raise RuntimeError("the connection broke")

    with pytest.raises(RuntimeError, match="the connection broke"):
        await asyncio.wait_for(
            stream(endless(), calls)(SCOPE, broken, client.send),  # type: ignore[arg-type]
            5,
        )
    assert calls == ["abandon", "close"]
