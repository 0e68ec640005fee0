"""One model call: its stream read under a deadline into a ``MessageBuilder``, its
deltas announced as they come (text, thinking, retries)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import aclosing

from ostinato.errors import ModelTimeout, StreamIncomplete
from ostinato.frames import Frame, ModelRetrying, TextDeltaFrame, ThinkingDeltaFrame
from ostinato.models.assembly import CONTENT_EVENTS, MessageBuilder
from ostinato.models.base import Model, ModelRequest, Retrying, TextDelta, ThinkingDelta
from ostinato.observe import CallScope


async def stream_reply(
    model: Model,
    request: ModelRequest,
    builder: MessageBuilder,
    *,
    deadline: float,
    emit: Callable[[Frame], None],
    run_id: str,
    seq: int,
    call: CallScope | None = None,
) -> None:
    """Feed the model's stream for ``request`` into ``builder``; ``ModelTimeout`` past the
    deadline, ``StreamIncomplete`` when the stream ends without its final event. The
    caller keeps the builder, so what streamed is known even if the call is cut. ``call``
    (``ostinato.observe``) hears of the first content and of each retry."""
    try:
        async with asyncio.timeout(deadline), aclosing(model.stream(request)) as events:
            async for event in events:
                builder.feed(event)
                if call is not None and call.first is None and type(event) in CONTENT_EVENTS:
                    call.first_token()
                if type(event) is TextDelta:
                    emit(TextDeltaFrame(run_id=run_id, seq=seq, text=event.text))
                elif type(event) is ThinkingDelta and event.text:
                    emit(ThinkingDeltaFrame(run_id=run_id, seq=seq, text=event.text))
                elif type(event) is Retrying:
                    if call is not None:
                        call.retried(event.error)
                    emit(
                        ModelRetrying(
                            run_id=run_id,
                            seq=seq,
                            attempt=event.attempt,
                            delay_s=event.delay,
                            error=event.error,
                        )
                    )
    except TimeoutError:
        raise ModelTimeout(f"the model call passed its {deadline:g} s deadline") from None
    if builder.stop_reason is None:
        raise StreamIncomplete("the model's stream ended without its final event")
