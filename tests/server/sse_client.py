"""Test helpers: a Server-Sent Events parser, and an in-memory ASGI client that streams.

httpx's ``ASGITransport`` returns a response only once the app has finished it, which a
live ``/events`` stream never does; ``open_stream`` drives the app directly instead,
hands over body chunks as they are sent, and disconnects like a browser closing a tab.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Message

# How long a test waits for the next frame: generous, for a loaded machine (a steered
# turn on PostgreSQL once took over 5 s for one in CI); a test that expects no frame
# passes its own, short ``within``.
WITHIN = 30.0


@dataclass
class Event:
    event: str | None = None
    data: Any = None
    id: str | None = None
    comments: list[str] = field(default_factory=list)
    raw: str = ""


class SSEParser:
    """Feed text; take complete events (the spec's line rules, ``data`` parsed as JSON)."""

    def __init__(self) -> None:
        self._buffer = ""

    def feed(self, text: str) -> list[Event]:
        self._buffer += text
        events: list[Event] = []
        while "\n\n" in self._buffer:
            block, self._buffer = self._buffer.split("\n\n", 1)
            events.append(parse_block(block))
        return events


def parse_block(block: str) -> Event:
    event = Event(raw=block)
    data: list[str] = []
    for line in block.split("\n"):
        if line.startswith(":"):
            event.comments.append(line[1:].strip())
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event.event = value
        elif name == "data":
            data.append(value)
        elif name == "id":
            event.id = value
        else:
            raise AssertionError(f"unexpected SSE line {line!r}")
    if data:
        assert len(data) == 1, f"a frame must be one data line: {block!r}"
        event.data = json.loads(data[0])
    return event


def parse_stream(body: str) -> list[Event]:
    parser = SSEParser()
    events = parser.feed(body)
    assert parser._buffer == "", f"the stream ended inside an event: {parser._buffer!r}"
    return events


def frames(events: list[Event]) -> list[Event]:
    """The events that carry a frame (not pings)."""
    return [e for e in events if e.event is not None]


@dataclass
class Stream:
    status: int
    headers: dict[str, str]
    _chunks: asyncio.Queue[bytes | None]
    _parser: SSEParser = field(default_factory=SSEParser)
    _pending: list[Event] = field(default_factory=list)
    ended: bool = False

    async def next_event(self, within: float = WITHIN) -> Event:
        while not self._pending:
            chunk = await asyncio.wait_for(self._chunks.get(), within)
            if chunk is None:
                self.ended = True
                raise EOFError("the stream ended")
            self._pending.extend(self._parser.feed(chunk.decode()))
        return self._pending.pop(0)

    async def next_frame(self, within: float = WITHIN) -> Event:
        while True:
            event = await self.next_event(within)
            if event.event is not None:
                return event

    async def frames_until(self, frame_type: str, within: float = WITHIN) -> list[Event]:
        out: list[Event] = []
        while not out or out[-1].event != frame_type:
            out.append(await self.next_frame(within))
        return out


@asynccontextmanager
async def open_stream(
    app: ASGIApp,
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
) -> AsyncIterator[Stream]:
    """Send one request to ``app``; yields once the response has started."""
    path, _, query = path.partition("?")
    sent: asyncio.Queue[Message] = asyncio.Queue()
    disconnect = asyncio.Event()
    request_sent = False
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
        "client": ("127.0.0.1", 1234),
        "server": ("test", 80),
    }

    async def receive() -> Message:
        nonlocal request_sent
        if not request_sent:
            request_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        await sent.put(message)

    task = asyncio.create_task(app(scope, receive, send))
    chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
    try:
        start = await asyncio.wait_for(sent.get(), 5)
        assert start["type"] == "http.response.start", start
        response_headers = {k.decode(): v.decode() for k, v in start["headers"]}

        async def pump() -> None:
            while True:
                message = await sent.get()
                chunks.put_nowait(message.get("body", b""))
                if not message.get("more_body", False):
                    chunks.put_nowait(None)
                    return

        pumping = asyncio.create_task(pump())
        try:
            yield Stream(start["status"], response_headers, chunks)
        finally:
            pumping.cancel()
    finally:
        disconnect.set()
        await asyncio.wait_for(task, 5)
