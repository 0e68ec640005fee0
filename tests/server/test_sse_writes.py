"""SSE writes (issue 32 item 2): the events a stream has ready together go out as one
``http.response.body`` message (one socket write), an event never waits for a later one,
a reader that does not read holds the stream back, and a failed write ends the response."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.requests import ClientDisconnect

from ostinato.server.sse import FrameStream

SCOPE: dict[str, Any] = {"type": "http", "asgi": {"spec_version": "2.4"}}


async def nothing() -> dict[str, Any]:
    await asyncio.Event().wait()
    return {}


class Recorder:
    """An ASGI ``send`` that keeps the bodies written."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.wrote = asyncio.Event()

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message["body"]:
            self.bodies.append(message["body"])
            self.wrote.set()


async def test_events_ready_together_go_out_in_one_write() -> None:
    async def events() -> AsyncIterator[bytes]:
        for i in range(3):
            yield b"event: e\ndata: %d\n\n" % i  # no await between them: ready together

    sent = Recorder()
    await FrameStream(events())(SCOPE, nothing, sent)  # type: ignore[arg-type]
    assert sent.bodies == [b"event: e\ndata: 0\n\nevent: e\ndata: 1\n\nevent: e\ndata: 2\n\n"]


async def test_an_event_does_not_wait_for_the_next() -> None:
    sent = Recorder()

    async def events() -> AsyncIterator[bytes]:
        yield b"first\n\n"
        await sent.wrote.wait()  # the next comes only once the first was written
        yield b"second\n\n"

    await FrameStream(events())(SCOPE, nothing, sent)  # type: ignore[arg-type]
    assert sent.bodies == [b"first\n\n", b"second\n\n"]


async def test_a_blocked_write_holds_the_stream_back() -> None:
    gate = asyncio.Event()
    produced: list[int] = []
    sent = Recorder()

    async def blocked(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message["body"]:
            await gate.wait()  # a reader that does not read: the transport's buffer full
        await sent(message)

    async def events() -> AsyncIterator[bytes]:
        for i in range(10):
            produced.append(i)
            yield b"%d\n\n" % i
            await asyncio.sleep(0)  # each event in a turn of the loop of its own

    task = asyncio.create_task(FrameStream(events())(SCOPE, nothing, blocked))  # type: ignore[arg-type]
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(produced) <= 3  # the one being written, one queued, one waiting to queue
    gate.set()
    await task
    assert b"".join(sent.bodies) == b"".join(b"%d\n\n" % i for i in range(10))


async def test_a_failed_write_ends_the_response() -> None:
    closed: list[bool] = []

    async def broken(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            raise OSError("the client went away")

    async def events() -> AsyncIterator[bytes]:
        while True:
            yield b"x\n\n"
            await asyncio.sleep(0)

    stream = FrameStream(events(), on_close=lambda: closed.append(True))
    with pytest.raises(ClientDisconnect):
        await stream(SCOPE, nothing, broken)  # type: ignore[arg-type]
    assert closed == [True]
