"""One model call: its stream read under a deadline into a ``MessageBuilder``, its
deltas announced as they come (text, thinking, retries), and what was shown kept in a
``Shown`` so a call that is cut (cancelled, failed) knows what people saw."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ostinato.errors import ModelTimeout, StreamIncomplete
from ostinato.frames import (
    Frame,
    ModelRetrying,
    TextDeltaFrame,
    TextDiscarded,
    ThinkingDeltaFrame,
)
from ostinato.messages import Message, TextBlock
from ostinato.models.assembly import CONTENT_EVENTS, MessageBuilder
from ostinato.models.base import (
    Model,
    ModelRequest,
    Retrying,
    TextDelta,
    ThinkingDelta,
    ToolCallStart,
)
from ostinato.observe import CallScope


@dataclass(slots=True)
class Shown:
    """What one model call's delta frames have shown since its attempt began."""

    text: list[str] = field(default_factory=list)
    deltas: int = 0  # text and thinking delta frames sent
    tool_call: bool = False  # a tool call had begun: the text may stop short of it

    def discard(self) -> None:
        self.text.clear()
        self.deltas = 0
        self.tool_call = False

    def partial_row(self) -> Message | None:
        """What a call cancelled mid-reply had shown, as an assistant row marked
        ``partial`` (no thinking, and no tool call: one cut short is never a call); None
        when it showed no text."""
        text = "".join(self.text)
        if not text.strip():
            return None
        metadata: dict[str, Any] = {"stop_reason": "cancelled", "partial": True}
        if self.tool_call:
            metadata["cut_tool_call"] = True
        return Message("assistant", (TextBlock(text),), metadata=metadata)


async def stream_reply(
    model: Model,
    request: ModelRequest,
    builder: MessageBuilder,
    shown: Shown,
    *,
    deadline: float,
    emit: Callable[[Frame], None],
    run_id: str,
    seq: int,
    call: CallScope | None = None,
) -> None:
    """Feed the model's stream for ``request`` into ``builder``; ``ModelTimeout`` past the
    deadline, ``StreamIncomplete`` when the stream ends without its final event. A retry
    starts the reply afresh: what was shown of the failed attempt is discarded, and a
    ``text.discarded`` frame says so. ``call`` (``ostinato.observe``) hears of the first
    content and of each retry."""
    try:
        async with asyncio.timeout(deadline):
            events = model.stream(request)
            try:  # closed whatever happens (``contextlib.aclosing``, written out: per step)
                async for event in events:
                    builder.feed(event)
                    if call is not None and call.first is None and type(event) in CONTENT_EVENTS:
                        call.first_token()
                    if type(event) is TextDelta:
                        shown.text.append(event.text)
                        shown.deltas += 1
                        emit(TextDeltaFrame(run_id=run_id, seq=seq, text=event.text))
                    elif type(event) is ThinkingDelta and event.text:
                        shown.deltas += 1
                        emit(ThinkingDeltaFrame(run_id=run_id, seq=seq, text=event.text))
                    elif type(event) is ToolCallStart:
                        shown.tool_call = True
                    elif type(event) is Retrying:
                        _retrying(event, shown, emit, run_id, seq, call)
            finally:
                await events.aclose()
    except TimeoutError:
        raise ModelTimeout(f"the model call passed its {deadline:g} s deadline") from None
    if builder.stop_reason is None:
        raise StreamIncomplete("the model's stream ended without its final event")


def _retrying(
    event: Retrying,
    shown: Shown,
    emit: Callable[[Frame], None],
    run_id: str,
    seq: int,
    call: CallScope | None,
) -> None:
    if call is not None:
        call.retried(event.error)
    if shown.deltas:
        emit(TextDiscarded(run_id=run_id, seq=seq, reason="retry"))
    shown.discard()
    emit(
        ModelRetrying(
            run_id=run_id,
            seq=seq,
            attempt=event.attempt,
            delay_s=event.delay,
            error=event.error,
        )
    )
