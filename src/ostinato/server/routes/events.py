"""``GET /v1/conversations/{id}/events``: the conversation's live stream.

It first replays the committed rows after ``after_seq`` (or after the ``Last-Event-ID``
header, which wins, as a reconnecting ``EventSource`` sends it) as ``message`` frames,
then streams every live frame, with no gap and no duplicate between the two. With
``deltas=false`` the progress frames (``text.delta``, ``thinking.delta``,
``tool.progress``) are left out: a surface that shows only rows.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Response

from ostinato.errors import InvalidRequest
from ostinato.server.auth import CurrentCaller, owned
from ostinato.server.context import Context
from ostinato.server.schemas import ERROR_RESPONSES, SSE_RESPONSE
from ostinato.server.sse import FrameStream, frame_events
from ostinato.server.streams import conversation_frames

router = APIRouter(prefix="/v1/conversations", tags=["events"])

AfterSeq = Annotated[int, Query(ge=0, description="Replay rows after this seq.")]
Deltas = Annotated[
    bool,
    Query(
        description="Include `text.delta`, `thinking.delta` and `tool.progress` frames; "
        "false: committed rows and turn events only."
    ),
]


def _position(after_seq: int, last_event_id: str | None) -> int:
    if last_event_id is None or not last_event_id.strip():
        return after_seq
    try:
        position = int(last_event_id)
    except ValueError:
        raise InvalidRequest(
            f"header Last-Event-ID must be a row's seq (an integer), got {last_event_id!r}"
        ) from None
    if position < 0:
        raise InvalidRequest("header Last-Event-ID must not be negative")
    return position


@router.get(
    "/{conversation_id}/events",
    response_class=Response,
    responses={
        200: {"description": "Frames as Server-Sent Events.", "content": SSE_RESPONSE},
        **ERROR_RESPONSES,
    },
)
async def watch_conversation(
    context: Context,
    caller: CurrentCaller,
    conversation_id: str,
    after_seq: AfterSeq = 0,
    deltas: Deltas = True,
    last_event_id: Annotated[str | None, Header(max_length=40)] = None,
) -> Response:
    """Replay the committed rows after a seq as `message` frames, then stream every live
    frame of the conversation, with no gap and no duplicate in between. `Last-Event-ID`
    wins over `after_seq`."""
    runtime = context.runtime
    position = _position(after_seq, last_event_id)
    await owned(runtime, caller, conversation_id)
    ticket = await context.streams.open(caller)
    subscription = runtime.bus.subscribe(conversation_id)
    frames = conversation_frames(
        subscription,
        runtime.store,
        conversation_id,
        context.live_for(ticket),
        after_seq=position,
        deltas=deltas,
    )

    def close() -> None:
        subscription.close()
        context.streams.close(ticket)

    return FrameStream(frame_events(frames), on_close=close)
