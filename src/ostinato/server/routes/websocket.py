"""``GET /v1/conversations/{id}/ws``: the conversation on a WebSocket, both ways.

Out: the same frames as ``/events`` (the committed rows after ``after_seq``, replayed,
then every live frame, with no gap and no duplicate; ``deltas=false`` leaves out the
progress frames), each as one JSON text message, the same JSON as an SSE ``data:``.

In: JSON text messages, each handled in order:

- ``{"type": "message", "text", "client_message_id"?, "policy"?}`` sends a message;
- ``{"type": "tool_response", "tool_use_id", "result"}`` answers a question card;
- ``{"type": "approval", "approval_id", "decision", "remember"?, "expires_in_s"?}``;
- ``{"type": "cancel"}`` cancels the running turn (or what a paused one waits on).

Their effects arrive as frames, like everyone else's. A message that cannot be done gets
a reply ``{"type": "error", "code", "message"}`` (no ``run_id`` or ``seq``: it is not a
frame) and the socket stays open.

A browser page on another site must not drive a conversation: the ``Origin`` header is
checked before the socket is accepted (see ``origin_allowed``). A refused origin gets 403,
an unknown conversation 404 and a bad query 422 (as HTTP responses where the server
supports that, else the socket is closed with 1008, 4404 or 1008).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing, suppress
from typing import Annotated

from fastapi import APIRouter, Query, WebSocket, WebSocketDisconnect
from pydantic import ValidationError

from ostinato.errors import ClientError, NotFound, OstinatoError, Unavailable
from ostinato.frames import ErrorFrame, Frame
from ostinato.identity.limits import LimitExceeded
from ostinato.messages import JSON
from ostinato.redaction import redact
from ostinato.server.auth import Caller, CurrentCaller, owned
from ostinato.server.context import ServerContext
from ostinato.server.errors import describe_validation, log, refuse_websocket
from ostinato.server.routes.turns import release_when_done
from ostinato.server.schemas import SEQ_MAX
from ostinato.server.streams import conversation_frames
from ostinato.server.ws_schemas import (
    CLIENT_MESSAGE,
    WsApproval,
    WsCancel,
    WsMessage,
    WsToolResponse,
)

router = APIRouter(prefix="/v1/conversations", tags=["events"])

# going away; try again later; policy violation (the credential no longer holds)
CLOSE_CODES = {"closing": 1001, "overflow": 1013, "unauthorized": 1008}
INTERNAL = "internal error; see the server log"
NOT_FOUND_CLOSE = 4404
ClientMessage = WsMessage | WsToolResponse | WsApproval | WsCancel
Send = Callable[[JSON], Awaitable[None]]


def origin_allowed(origin: str | None, allowed: frozenset[str], port: int | None) -> bool:
    """No ``Origin`` (a program, not a browser page), a loopback origin on the server's own
    port, or one of ``allowed`` (``*``: any)."""
    if origin is None:
        return True
    origin = origin.strip().rstrip("/").lower()
    if origin in allowed or "*" in allowed:
        return True
    if port is None:
        return False
    suffix = "" if port == 80 else f":{port}"
    return origin in {f"http://{host}{suffix}" for host in ("127.0.0.1", "localhost", "[::1]")}


@router.websocket("/{conversation_id}/ws")
async def conversation_socket(
    websocket: WebSocket,
    caller: CurrentCaller,
    conversation_id: str,
    after_seq: Annotated[int, Query(ge=0, le=SEQ_MAX)] = 0,
    deltas: bool = True,
) -> None:
    context: ServerContext = websocket.app.state.ostinato
    runtime = context.runtime
    server = websocket.scope.get("server")
    port = server[1] if server else None
    if not origin_allowed(websocket.headers.get("origin"), context.allowed_origins, port):
        message = "this Origin may not open the WebSocket"
        await refuse_websocket(websocket, 403, "forbidden", message, close_code=1008)
        return
    try:
        await owned(runtime, caller, conversation_id)
    except NotFound as exc:
        await refuse_websocket(websocket, 404, exc.code, exc.message, close_code=NOT_FOUND_CLOSE)
        return
    try:
        ticket = await context.streams.open(caller)
    except LimitExceeded as exc:
        await refuse_websocket(websocket, 429, exc.code, exc.message, close_code=1013)
        return
    subscription = runtime.bus.subscribe(conversation_id)
    try:
        await websocket.accept()
        lock = asyncio.Lock()

        async def send(data: JSON) -> None:
            text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
            async with lock:
                await websocket.send_text(text)

        frames = conversation_frames(
            subscription,
            runtime.store,
            conversation_id,
            context.live_for(ticket),
            after_seq=after_seq,
            deltas=deltas,
        )
        pump = asyncio.ensure_future(_pump(websocket, frames, send))
        limit = context.limits.message_bytes
        listen = asyncio.ensure_future(
            _listen(websocket, context, caller, conversation_id, send, limit)
        )
        try:
            await asyncio.wait((pump, listen), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (pump, listen):
                task.cancel()
            await asyncio.gather(pump, listen, return_exceptions=True)
    finally:
        subscription.close()
        context.streams.close(ticket)


async def _pump(
    websocket: WebSocket, frames: AsyncGenerator[Frame | None, None], send: Send
) -> None:
    """Send every frame; when the stream ends itself (server closing, overflow), close.
    A stream that breaks (the store failed under it) is logged, told to the client as an
    ``error`` frame, and closed with 1011, never left open and silent."""
    last: ErrorFrame | None = None
    seq = 0
    try:
        async with aclosing(frames):
            async for frame in frames:
                if frame is None:
                    continue  # the server's WebSocket pings keep the connection alive
                await send(frame.to_json())
                seq, last = frame.seq, frame if isinstance(frame, ErrorFrame) else None
    except (WebSocketDisconnect, OSError, RuntimeError):
        return  # the client is gone
    except Exception as exc:
        code = 1011
        with suppress(WebSocketDisconnect, OSError, RuntimeError):
            await send(_broken(exc, seq).to_json())
    else:
        code = CLOSE_CODES.get(last.code, 1000) if last is not None else 1000
    with suppress(WebSocketDisconnect, OSError, RuntimeError):
        await websocket.close(code=code)


def _broken(exc: Exception, seq: int) -> ErrorFrame:
    """The frame that says a conversation's stream broke, and the log line for it."""
    log.error("a WebSocket's frames broke: %s", exc, exc_info=exc)
    if isinstance(exc, OstinatoError):
        return ErrorFrame(run_id="", seq=seq, code=exc.code, message=redact(exc.message))
    return ErrorFrame(run_id="", seq=seq, code="internal_error", message=INTERNAL)


async def _listen(
    websocket: WebSocket,
    context: ServerContext,
    caller: Caller,
    conversation_id: str,
    send: Send,
    limit: int,
) -> None:
    """Handle the client's messages in order, until it leaves. A message over ``limit``
    bytes is refused unread (``too_large``); the ASGI server's own bound (uvicorn's
    ``ws_max_size``) normally closes the socket before such a message is whole."""
    while True:
        try:
            received = await websocket.receive()
        except (WebSocketDisconnect, RuntimeError):
            return
        if received["type"] == "websocket.disconnect":
            return
        text = received.get("text")
        try:
            if text is None:
                raise _Refused("invalid_request", "send JSON objects as text messages")
            if len(text) > limit // 4 and len(text.encode("utf-8", "surrogatepass")) > limit:
                raise _Refused("too_large", f"the message is over the {limit}-byte limit")
            message = _parse(text)
            # shielded: a request the runtime has begun finishes even if the socket goes
            await asyncio.shield(_handle(context, caller, conversation_id, message))
        except _Refused as refused:
            await _reply_error(send, refused.code, refused.message)
        except (ClientError, Unavailable) as exc:
            await _reply_error(send, exc.code, exc.message)
        except Exception:
            log.exception("unexpected error handling a WebSocket message on %s", conversation_id)
            await _reply_error(send, "internal_error", INTERNAL)


class _Refused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


async def _reply_error(send: Send, code: str, message: str) -> None:
    with suppress(WebSocketDisconnect, OSError, RuntimeError):
        await send({"type": "error", "code": code, "message": message})


def _parse(text: str) -> ClientMessage:
    try:
        return CLIENT_MESSAGE.validate_json(text)
    except ValidationError as exc:
        raise _Refused("invalid_request", _describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    errors = exc.errors()
    kinds = {str(e.get("type")) for e in errors}
    if "json_invalid" in kinds:
        return "the message is not valid JSON"
    if "union_tag_invalid" in kinds:
        return "type must be one of message, tool_response, approval, cancel"
    if any(not e.get("loc") for e in errors):
        return "the message must be a JSON object with a type"
    # loc starts with the message's type (the union's tag): name fields as in a body
    named = [{**e, "loc": ("body", *e.get("loc", ())[1:])} for e in errors]
    return describe_validation(named)[0]


async def _handle(
    context: ServerContext, caller: Caller, conversation_id: str, message: ClientMessage
) -> None:
    runtime = context.runtime
    match message:
        case WsMessage():
            permit = await context.owner_limits.begin_turn(caller.owner)
            try:
                submission = await runtime.submit(
                    conversation_id,
                    message.text,
                    client_message_id=message.client_message_id,
                    policy=message.policy,
                )
            except BaseException:
                permit.release()
                raise
            release_when_done(permit, submission.started)
            if submission.queued is None:
                await submission.handle()  # raises what kept it from starting
        case WsToolResponse():
            await runtime.answer_card(conversation_id, message.tool_use_id, message.result)
        case WsApproval():
            await runtime.decide(
                conversation_id,
                message.approval_id,
                approve=message.decision == "approve",
                remember=message.remember,
                expires_in=message.expires_in_s,
            )
        case WsCancel():
            await runtime.cancel(conversation_id)
