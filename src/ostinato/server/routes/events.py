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

from ostinato.server.auth import CurrentCaller, owned
from ostinato.server.context import Context
from ostinato.server.schemas import ERROR_RESPONSES, SEQ_MAX, SSE_RESPONSE
from ostinato.server.sse import FrameStream, frame_events
from ostinato.server.streams import conversation_frames

router = APIRouter(prefix="/v1/conversations", tags=["events"])

AfterSeq = Annotated[int, Query(ge=0, le=SEQ_MAX, description="Replay rows after this seq.")]
LastEventId = Annotated[
    int | None,
    Header(
        alias="Last-Event-ID",
        ge=0,
        le=SEQ_MAX,
        description="The seq of the last `message` frame the client has (a reconnecting "
        "EventSource sends it); wins over `after_seq`.",
    ),
]
Deltas = Annotated[
    bool,
    Query(
        description="Include `text.delta`, `thinking.delta` and `tool.progress` frames; "
        "false: committed rows and turn events only."
    ),
]


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
    last_event_id: LastEventId = None,
) -> Response:
    """Replay the committed rows after a seq as `message` frames, then stream every live
    frame of the conversation, with no gap and no duplicate in between. `Last-Event-ID`
    wins over `after_seq`."""
    runtime = context.runtime
    position = after_seq if last_event_id is None else last_event_id
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
