"""A scripted fake model provider: a small Starlette app served by uvicorn in a thread.

Each protocol subclasses ``FakeProvider`` with its path, its history rules (``check``) and
builders for the replies its tests script. A test queues replies with ``script(...)``;
every request is recorded, checked against the provider's rules, and answered with the
next reply (a reply may also be a function of the request's body and headers, e.g. an
error that echoes the key it was sent). A request that breaks a rule is answered with a
400 (as the provider would) and recorded in ``violations``; ``assert_clean()`` fails the
test on any violation or any reply left unconsumed. ``disconnects`` counts streams the
client closed before the end.

The server runs in its own thread and event loop, so code under test may block on it.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Self

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

JSON = dict[str, Any]
Event = tuple[str | None, Any]  # (SSE event name or None, data)


@dataclass
class Stream:
    """An SSE reply. ``events`` are ``(event name or None, data)``; data that is not a
    string is sent as JSON; the name ``":"`` sends ``data`` as a comment line (a
    keep-alive, which SSE clients skip)."""

    events: list[Event]
    delay: float = 0.0  # pause before each event
    hang: bool = False  # after the events, stay open until the client goes away
    reset: bool = False  # after the events, drop the connection mid-body


@dataclass
class Failure:
    """An HTTP error reply with the provider's real status, body and headers."""

    status: int
    body: JSON
    headers: dict[str, str] = field(default_factory=dict)


Reply = Stream | Failure
Respond = Callable[[JSON, dict[str, str]], Reply]  # (body, headers) -> the reply


class FakeProvider:
    """Base of the per-protocol fakes. Use as a context manager."""

    path = "/"
    models: tuple[str, ...] = ("fake-model",)
    listed: JSON = {}  # more fields of each model listed (a window a server reports)

    def __init__(self) -> None:
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.reset()

    def reset(self) -> None:
        """Forget the script and what was seen (a server is shared by many tests)."""
        self._replies: deque[Reply | Respond] = deque()
        self.requests: list[JSON] = []
        self.headers: list[dict[str, str]] = []
        self.violations: list[str] = []
        self.disconnects = 0

    # --- to override ---------------------------------------------------------------------

    def check(self, body: JSON) -> list[str]:
        """The provider's rules for a request body: one message per broken rule."""
        return []

    def violation_reply(self, problems: list[str]) -> Failure:
        return Failure(400, {"error": {"type": "invalid_request_error", "message": problems[0]}})

    # --- scripting -----------------------------------------------------------------------

    def script(self, *replies: Reply | Respond) -> None:
        self._replies.extend(replies)

    def assert_clean(self) -> None:
        assert not self.violations, f"requests broke the provider's rules: {self.violations}"
        assert not self._replies, f"{len(self._replies)} scripted replies were never requested"

    def wait_for_disconnect(self, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.disconnects:
                return True
            time.sleep(0.01)
        return False

    # --- serving -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        app = Starlette(
            routes=[
                Route(self.path, self._handle, methods=["POST"]),
                Route("/v1/models", self._list_models, methods=["GET"]),
            ]
        )
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="critical", log_config=None, lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        while not self._server.started:
            time.sleep(0.005)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.should_exit = True
        self._server.force_exit = True
        self._thread.join(timeout=5)

    async def _list_models(self, request: Request) -> Response:
        data = [
            {"id": m, "object": "model", "owned_by": "fake", **self.listed} for m in self.models
        ]
        return JSONResponse({"object": "list", "data": data})

    async def _handle(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        problems = self.check(body)
        if problems:
            self.violations += problems
            reply: Reply = self.violation_reply(problems)
        elif self._replies:
            scripted = self._replies.popleft()
            reply = (
                scripted
                if isinstance(scripted, Stream | Failure)
                else scripted(body, dict(request.headers))
            )
        else:
            self.violations.append("a request arrived with no reply scripted")
            reply = Failure(500, {"error": {"type": "test_error", "message": "nothing scripted"}})
        if isinstance(reply, Failure):
            return JSONResponse(reply.body, status_code=reply.status, headers=reply.headers)
        return StreamingResponse(self._sse(reply, request), media_type="text/event-stream")

    async def _sse(self, reply: Stream, request: Request) -> AsyncIterator[bytes]:
        finished = False
        try:
            for name, data in reply.events:
                if reply.delay:
                    await asyncio.sleep(reply.delay)
                yield _frame(name, data)
            if reply.reset:
                raise ConnectionResetError("the fake drops the connection mid-stream")
            # polling: a disconnect is only observable by asking (ASGI has no callback)
            while reply.hang and not await request.is_disconnected():  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            finished = not reply.hang
        finally:
            # reached early when the client goes away: Starlette cancels this generator,
            # or (ASGI 2.4) ``is_disconnected`` turns true
            if not finished and not reply.reset:
                self.disconnects += 1


def _frame(name: str | None, data: Any) -> bytes:
    if name == ":":
        return f": {data}\n\n".encode()
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {text}\n\n".encode()
