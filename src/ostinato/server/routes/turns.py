"""``POST /v1/conversations/{id}/turns``: send a user message, which starts a turn.

With ``Accept: text/event-stream`` the answer is that turn's frames as Server-Sent Events,
from ``turn.started`` to ``turn.finished``; otherwise the turn runs to its end and the
answer is its result as JSON. Either way the turn is a runtime task: a client that goes
away stops receiving, it does not stop the turn.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from ostinato.server.context import Context
from ostinato.server.schemas import ERROR_RESPONSES, SSE_RESPONSE, MessageOut, TurnOut, TurnRequest
from ostinato.server.sse import FrameStream
from ostinato.server.streams import turn_events

router = APIRouter(prefix="/v1/conversations", tags=["turns"])


def wants_events(request: Request) -> bool:
    """Whether the Accept header asks for ``text/event-stream``."""
    accept = request.headers.get("accept", "")
    return any(
        part.split(";", 1)[0].strip().lower() == "text/event-stream" for part in accept.split(",")
    )


@router.post(
    "/{conversation_id}/turns",
    response_model=TurnOut,
    responses={
        200: {
            "description": "The turn's result, or its frames with Accept: text/event-stream.",
            "content": SSE_RESPONSE,
        },
        **ERROR_RESPONSES,
    },
)
async def post_turn(
    context: Context, request: Request, conversation_id: str, body: TurnRequest
) -> TurnOut | Response:
    """Send a user message, which starts a turn. With `Accept: text/event-stream`: the
    turn's frames; otherwise: its result once it ends."""
    runtime = context.runtime
    model = context.model_for(request)
    if not wants_events(request):
        handle = await runtime.start_turn(
            conversation_id, body.text, client_message_id=body.client_message_id, model=model
        )
        result = await handle.result()
        return TurnOut(
            turn_id=result.turn_id,
            run_id=result.run_id,
            stop_reason=result.stop_reason,
            messages=[MessageOut.of(m) for m in (*handle.rows, *result.messages)],
            metrics=result.metrics,
            error=result.error,
        )
    subscription = runtime.bus.subscribe(conversation_id)
    try:
        handle = await runtime.start_turn(
            conversation_id, body.text, client_message_id=body.client_message_id, model=model
        )
    except BaseException:
        subscription.close()
        raise
    return FrameStream(
        turn_events(
            subscription,
            handle.run_id,
            ping_interval=context.ping_interval,
            closing=context.closing,
        ),
        on_close=subscription.close,
    )
