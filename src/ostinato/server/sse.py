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

The frames of nearly every event, ``text.delta`` and ``thinking.delta``, are written by
``_delta_event`` instead: the same bytes (the same JSON string encoder, the fields in
their order; ``tests/server/test_sse_encode.py`` holds them equal) without building the
frame's dict, encoding it whole and splitting it into lines (about a tenth of the CPU;
docs/performance.md, "Streaming cost per token").
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import fields
from json.encoder import encode_basestring  # json.dumps's own, with ensure_ascii=False
from typing import Any

from fastapi.sse import KEEPALIVE_COMMENT, EventSourceResponse, format_sse_event
from starlette.types import Message, Receive, Scope, Send

from ostinato.frames import Frame, TextDeltaFrame, ThinkingDeltaFrame

PING = KEEPALIVE_COMMENT
PING_INTERVAL = 15.0


def encode_frame(frame: Frame) -> bytes:
    """One frame as one SSE event."""
    kind = _DELTA_FRAMES.get(type(frame))
    if kind is not None and frame.type == kind:
        return _delta_event(frame, kind)  # type: ignore[arg-type]
    return _any_event(frame)


def encode_event(frame: Frame) -> bytes:
    """One frame as one SSE event, any frame (the general way)."""
    data = json.dumps(frame.to_json(), ensure_ascii=False, separators=(",", ":"), default=str)
    return format_sse_event(
        data_str=data,
        event=frame.type,
        id=str(frame.seq) if frame.durable else None,
    )


# ``json.dumps``'s encoder for ``encode_event``'s options, made once (``dumps`` makes one
# per call when given options)
_FRAME_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


def _any_event(frame: Frame) -> bytes:
    """``encode_event(frame)``'s bytes for any frame whose type is one line: JSON writes
    no line break (it escapes every control character), so the data is one ``data:``
    line, which ``format_sse_event`` would split the data into lines to find."""
    kind: object = frame.type  # a frame made with an odd type or seq goes the general way
    if type(kind) is not str or "\n" in kind or "\r" in kind or not _plain_int(frame.seq):
        return encode_event(frame)
    data = _FRAME_JSON.encode(frame.to_json())
    end = f"id: {frame.seq}\n\n" if frame.durable else "\n"
    return f"event: {kind}\ndata: {data}\n{end}".encode()


def _plain_int(value: object) -> bool:
    return type(value) is int


def _delta_event(frame: TextDeltaFrame | ThinkingDeltaFrame, kind: str) -> bytes:
    """``encode_event(frame)``'s bytes for a text or thinking delta of plain types."""
    run_id, seq, text = frame.run_id, frame.seq, frame.text
    if type(run_id) is not str or type(seq) is not int or type(text) is not str:
        return encode_event(frame)  # what json.dumps would write differently
    return (
        f'event: {kind}\ndata: {{"run_id":{encode_basestring(run_id)},"seq":{seq},'
        f'"text":{encode_basestring(text)},"type":"{kind}"}}\n\n'
    ).encode()


def _delta_frames() -> dict[type[Frame], str]:
    """The delta frame classes ``_delta_event`` writes as ``encode_event`` would, each with
    its type: their fields in this order, no SSE id, a type JSON writes as it is. Any other
    (a field added, say) is written the general way."""
    out: dict[type[Frame], str] = {}
    for cls in (TextDeltaFrame, ThinkingDeltaFrame):
        names = [f.name for f in fields(cls)]
        kind = fields(cls)[-1].default
        plain = isinstance(kind, str) and encode_basestring(kind) == f'"{kind}"'
        if names == ["run_id", "seq", "text", "type"] and not cls.durable and plain:
            out[cls] = str(kind)
    return out


_DELTA_FRAMES = _delta_frames()


async def frame_events(frames: AsyncGenerator[Frame | None, None]) -> AsyncIterator[bytes]:
    """A stream of frames (``None``: nothing happened for a while) as SSE bytes."""
    async with aclosing(frames):
        async for frame in frames:
            yield PING if frame is None else encode_frame(frame)


class FrameStream(EventSourceResponse):
    """An ``text/event-stream`` response over an async iterator of encoded events.

    ``on_close`` runs however the stream ends (finished, client gone, server stopping),
    so the subscription behind it never outlives the response. ``on_abandon`` runs
    before it when the stream did not reach its own end (the client went away).
    """

    def __init__(
        self,
        events: AsyncIterator[bytes],
        *,
        on_close: Callable[[], None] | None = None,
        on_abandon: Callable[[], None] | None = None,
    ) -> None:
        self._wrapper = self._tracked(events)
        super().__init__(
            self._wrapper,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._events = events
        self._on_close = on_close
        self._on_abandon = on_abandon
        self._completed = False

    def then(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` too when the stream closes, after ``on_close``."""
        first = self._on_close

        def both() -> None:
            if first is not None:
                first()
            callback()

        self._on_close = both

    async def _tracked(self, events: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
        async for event in events:
            yield event
        self._completed = True

    async def stream_response(self, send: Send) -> None:
        """Starlette's, except that the events ready together go out in one write."""
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        writes = Coalesced(send)
        try:
            async for chunk in self.body_iterator:
                await writes.body(chunk.encode() if isinstance(chunk, str) else bytes(chunk))
            await writes.flush()
        finally:
            writes.cancel()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            if scope["type"] == "http" and _spec_version(scope) < (2, 4):
                await self._until_gone(receive, send)
            else:  # a server that reports a failed write (ASGI 2.4): Starlette's own way
                await super().__call__(scope, receive, send)
        finally:
            await self._wrapper.aclose()
            aclose = getattr(self._events, "aclose", None)
            if aclose is not None:
                await aclose()
            if not self._completed and self._on_abandon is not None:
                self._on_abandon()
            if self._on_close is not None:
                self._on_close()

    async def _until_gone(self, receive: Receive, send: Send) -> None:
        """``stream_response`` while another task reads ``receive``: the client's
        disconnect cancels the stream, which ends the response (as Starlette does for a
        server that does not report a failed write, without its anyio task group: the
        group, its cancel scope and their tasks cost about 65 microseconds a stream)."""
        streaming = asyncio.current_task()
        assert streaming is not None
        gone = _Gone(receive, streaming)
        try:
            # from the loop's next pass, as Starlette's task did: the turn's own task
            # (ready since the turn began) reaches its model call first
            await asyncio.sleep(0)
            await self.stream_response(send)
        except asyncio.CancelledError:
            if not gone.ended():
                raise
        finally:
            gone.cancel()


def _spec_version(scope: Scope) -> tuple[int, ...]:
    return tuple(map(int, scope.get("asgi", {}).get("spec_version", "2.0").split(".")))


class _Gone:
    """Reads ``receive`` until the client disconnects (or the read fails), then cancels
    ``streaming``; ``ended`` says whether a cancellation that reached ``streaming`` was
    its own (the response ends quietly) rather than another's (it goes on up)."""

    def __init__(self, receive: Receive, streaming: asyncio.Task[Any]) -> None:
        self._streaming = streaming
        self._done = False
        self._cancelled_it = False
        self._task = asyncio.get_running_loop().create_task(self._read(receive))
        self._task.add_done_callback(self._went)

    @staticmethod
    async def _read(receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    def _went(self, task: asyncio.Task[None]) -> None:
        if not self._done and not task.cancelled():
            self._cancelled_it = True
            self._streaming.cancel()

    def ended(self) -> bool:
        """The response ends here: ``streaming`` was cancelled by this (and by nothing
        else); a failed read raises its error."""
        if not self._cancelled_it or self._streaming.uncancel() > 0:
            return False
        error = self._task.exception()
        if error is not None:
            raise error
        return True

    def cancel(self) -> None:
        self._done = True
        if not self._task.done():
            self._task.cancel()
        elif not self._task.cancelled():
            self._task.exception()  # retrieved: ``ended`` raised it, or it was not needed


class Coalesced:
    """A response body's pieces, each ready piece joined with those that come in the same
    turn of the event loop and sent as one ``http.response.body`` message (one socket
    write), at the end of that turn: a piece waits for no other piece, only for the loop
    to finish what it is running. A send that blocks (a slow reader: the transport's
    buffer is full) holds back the next piece's producer, as a direct send would."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._pieces: list[bytes] = []
        self._writer: asyncio.Task[None] | None = None
        self._sending = False

    async def body(self, piece: bytes) -> None:
        """``piece`` queued for this turn's write."""
        writer = self._writer
        if writer is not None and (self._sending or writer.done()):
            await writer  # the last write blocked, or failed: wait for it (or raise)
            writer = None
        self._pieces.append(piece)
        if writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        while self._pieces:
            message: Message = {
                "type": "http.response.body",
                "body": b"".join(self._pieces),
                "more_body": True,
            }
            self._pieces.clear()
            self._sending = True
            try:
                await self._send(message)
            finally:
                self._sending = False

    async def flush(self) -> None:
        """Until every queued piece is sent (raises what a send raised)."""
        writer, self._writer = self._writer, None
        if writer is not None:
            await writer
        if self._pieces:
            await self._write()

    def cancel(self) -> None:
        """A write still running is abandoned (the response ended another way)."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        if not writer.done():
            writer.cancel()
        elif not writer.cancelled():
            writer.exception()  # retrieved: the response's own error is the one raised
