"""Server-Sent Events: how a frame goes on the wire, and the response that carries them.

One frame is one event::

    event: message
    data: {"type":"message","run_id":"...","seq":7,"message":{...}}
    id: 7

``event:`` is the frame type and ``data:`` the frame as one JSON object (it never holds a
newline, so it is one line). Only a ``message`` frame (a committed row) has an ``id:``,
its seq, so a reconnecting ``EventSource`` sends ``Last-Event-ID`` with the last row it
has. ``: ping`` comments keep idle connections open through proxies. The byte formatting
is FastAPI's (``fastapi.sse``); the stream is ours because a stream has to be set up (a
subscription opened, a turn started) before the response starts, so that a 404 is still
a 404.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

from fastapi.sse import KEEPALIVE_COMMENT, EventSourceResponse, format_sse_event
from starlette.types import Receive, Scope, Send

from ostinato.frames import Frame

PING = KEEPALIVE_COMMENT
PING_INTERVAL = 15.0


def encode_frame(frame: Frame) -> bytes:
    """One frame as one SSE event."""
    data = json.dumps(frame.to_json(), ensure_ascii=False, separators=(",", ":"), default=str)
    return format_sse_event(
        data_str=data,
        event=frame.type,
        id=str(frame.seq) if frame.durable else None,
    )


class FrameStream(EventSourceResponse):
    """An ``text/event-stream`` response over an async iterator of encoded events.

    ``on_close`` runs however the stream ends (finished, client gone, server stopping),
    so the subscription behind it never outlives the response.
    """

    def __init__(
        self,
        events: AsyncIterator[bytes],
        *,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(
            events,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._events = events
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            aclose = getattr(self._events, "aclose", None)
            if aclose is not None:
                await aclose()
            if self._on_close is not None:
                self._on_close()
