"""Test helper: an in-memory WebSocket client that drives the ASGI app directly.

It runs in the test's event loop (Starlette's ``TestClient`` runs the app on a loop of
its own, which the runtime's tasks and futures do not belong to). The scope offers the
denial-response extension, as uvicorn does, so a refused handshake is an HTTP answer.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message


class Refused(Exception):
    """The handshake was refused: an HTTP answer (``status``) or a close (``code``)."""

    def __init__(self, status: int | None, code: int | None, body: Any = None) -> None:
        super().__init__(f"refused: status={status} code={code} body={body}")
        self.status, self.code, self.body = status, code, body


class Closed(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(f"closed with {code}")
        self.code = code


@dataclass
class Socket:
    _to_app: asyncio.Queue[Message]
    _from_app: asyncio.Queue[Message]

    async def receive_json(self, within: float = 5.0) -> Any:
        message = await asyncio.wait_for(self._from_app.get(), within)
        if message["type"] == "websocket.close":
            raise Closed(message.get("code", 1000))
        assert message["type"] == "websocket.send", message
        assert "text" in message and message["text"] is not None, "frames are text messages"
        return json.loads(message["text"])

    async def until(self, frame_type: str, within: float = 5.0) -> list[Any]:
        """Messages up to and including the first of ``frame_type``."""
        out: list[Any] = []
        while not out or out[-1]["type"] != frame_type:
            out.append(await self.receive_json(within))
        return out

    async def send_json(self, data: Any) -> None:
        await self.send_text(json.dumps(data))

    async def send_text(self, text: str) -> None:
        await self._to_app.put({"type": "websocket.receive", "text": text})

    async def send_bytes(self, data: bytes) -> None:
        await self._to_app.put({"type": "websocket.receive", "bytes": data})

    def pending(self) -> int:
        return self._from_app.qsize()


@asynccontextmanager
async def open_websocket(
    app: ASGIApp,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    server: tuple[str, int] = ("127.0.0.1", 8000),
) -> AsyncIterator[Socket]:
    path, _, query = path.partition("?")
    scope: dict[str, Any] = {
        "type": "websocket",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "scheme": "ws",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
        "client": ("127.0.0.1", 1234),
        "server": server,
        "subprotocols": [],
        "extensions": {"websocket.http.response": {}},
    }
    to_app: asyncio.Queue[Message] = asyncio.Queue()
    from_app: asyncio.Queue[Message] = asyncio.Queue()
    await to_app.put({"type": "websocket.connect"})
    task: asyncio.Future[None] = asyncio.ensure_future(app(scope, to_app.get, from_app.put))
    try:
        first = await asyncio.wait_for(from_app.get(), 5)
        if first["type"] == "websocket.close":
            raise Refused(None, first.get("code", 1000))
        if first["type"] == "websocket.http.response.start":
            body = b""
            while True:
                part = await asyncio.wait_for(from_app.get(), 5)
                body += part.get("body", b"")
                if not part.get("more_body", False):
                    break
            raise Refused(first["status"], None, json.loads(body) if body else None)
        assert first["type"] == "websocket.accept", first
        yield Socket(to_app, from_app)
    finally:
        await to_app.put({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(task, 5)
