"""Fold a stream of model events into one assistant message. Pure, no I/O.

Token counts: the ``Usage`` events of a stream are added up. A stream that sends none (as
llama.cpp's servers do) leaves the counts unknown; given the request, ``finish`` then
estimates them (``ostinato.context.tokens.estimate_usage``) and marks them
``source="estimate"``, so nobody takes zero for a count.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import aclosing
from dataclasses import dataclass, field

from ostinato import observe

# a module reference: context.tokens imports models.base, so this import may meet it half-made
from ostinato.context import tokens as context_tokens
from ostinato.errors import ModelTimeout, StreamIncomplete
from ostinato.messages import JSON, Block, Message, TextBlock, ThinkingBlock, ToolUseBlock
from ostinato.models.base import (
    UNKNOWN_USAGE,
    Model,
    ModelEvent,
    ModelRequest,
    Retrying,
    Stop,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from ostinato.models.reply import ModelReply as ModelReply  # re-exported
from ostinato.spend.seam import GATE


@dataclass(slots=True)
class _Part:
    kind: str  # "text" | "thinking" | "tool"
    text: list[str] = field(default_factory=list)
    signature: str | None = None
    provider_data: JSON | None = None
    tool_id: str = ""
    tool_name: str = ""
    tool_input: JSON | None = None
    complete: bool = False
    malformed: str | None = None

    def end(self, tool_input: JSON | None) -> None:
        """The tool call's arguments are complete: given whole, or parsed from deltas."""
        self.complete = True
        if tool_input is not None:
            self.tool_input = tool_input
        else:
            self.tool_input, self.malformed = _parse_arguments("".join(self.text))


class MessageBuilder:
    """Accumulates events; ``finish()`` returns the ``ModelReply``. ``request`` (the call's
    request) lets it estimate the token counts a provider did not send."""

    __slots__ = ("_order", "_parts", "_request", "stop_reason", "usage")

    def __init__(self, request: ModelRequest | None = None) -> None:
        self._request = request
        self._reset()

    def _reset(self) -> None:
        self._parts: dict[tuple[str, int], _Part] = {}
        self._order: list[_Part] = []
        self.stop_reason: StopReason | None = None
        self.usage = UNKNOWN_USAGE

    def _part(self, kind: str, index: int) -> _Part:
        key = (kind, index)
        part = self._parts.get(key)
        if part is None:
            part = _Part(kind)
            self._parts[key] = part
            self._order.append(part)
        return part

    def feed(self, event: ModelEvent) -> None:
        match event:
            case TextDelta(text=text, index=index, provider_data=pd):
                part = self._part("text", index)
                part.text.append(text)
                if pd is not None:
                    part.provider_data = pd
            case ThinkingDelta(text=text, signature=sig, index=index, provider_data=pd):
                part = self._part("thinking", index)
                part.text.append(text)
                if sig is not None:
                    part.signature = sig
                if pd is not None:
                    part.provider_data = pd
            case ToolCallStart(index=index, id=id_, name=name, provider_data=pd):
                part = self._part("tool", index)
                part.tool_id, part.tool_name, part.provider_data = id_, name, pd
            case ToolCallDelta(index=index, arguments=args):
                self._part("tool", index).text.append(args)
            case ToolCallEnd(index=index, input=tool_input):
                self._part("tool", index).end(tool_input)
            case Usage():
                seen = self.usage
                self.usage = event if seen.source == "unknown" else _add(seen, event)
            case Stop(reason=reason):
                self.stop_reason = reason
            case Retrying():
                self._reset()  # a retried attempt starts the reply afresh

    def finish(self) -> ModelReply:
        """The reply; call only after a ``Stop`` event."""
        assert self.stop_reason is not None, "finish() before the Stop event"
        blocks: list[Block] = []
        broken: dict[str, str] = {}
        for part in self._order:
            if part.kind == "text":
                text = "".join(part.text)
                if text:
                    blocks.append(TextBlock(text, provider_data=part.provider_data))
            elif part.kind == "thinking":
                blocks.append(
                    ThinkingBlock(
                        "".join(part.text),
                        signature=part.signature,
                        provider_data=part.provider_data,
                    )
                )
            else:
                if not part.complete:
                    broken[part.tool_id] = (
                        "this call was cut off by the output limit before its arguments "
                        "were complete, so it was not run"
                    )
                elif part.malformed is not None:
                    broken[part.tool_id] = part.malformed
                blocks.append(
                    ToolUseBlock(
                        part.tool_id,
                        part.tool_name,
                        part.tool_input or {},
                        provider_data=part.provider_data,
                    )
                )
        stop: StopReason = self.stop_reason
        if stop == "end_turn" and any(isinstance(b, ToolUseBlock) for b in blocks):
            stop = "tool_use"
        message = Message(role="assistant", blocks=tuple(blocks))
        usage = self.usage
        if usage.source == "unknown" and self._request is not None:
            usage = context_tokens.estimate_usage(self._request, message)
        return ModelReply(message, stop, usage, broken)


# the events that carry content: the first one is a call's first token
CONTENT_EVENTS = frozenset({TextDelta, ThinkingDelta, ToolCallStart})


def _add(a: Usage, b: Usage) -> Usage:
    return Usage(
        a.input_tokens + b.input_tokens,
        a.output_tokens + b.output_tokens,
        a.cache_read_tokens + b.cache_read_tokens,
        a.cache_write_tokens + b.cache_write_tokens,
        a.source if a.source == b.source else "estimate",
    )


def _parse_arguments(raw: str) -> tuple[JSON, str | None]:
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"the arguments were not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(value, dict):
        return {}, "the arguments must be a JSON object"
    return value, None


async def complete(
    model: Model, request: ModelRequest, *, deadline: float, what: str
) -> ModelReply:
    """Run one model call to its end and fold it into a reply, under a deadline: for the
    side calls that need no streaming (routing, summaries, fact extraction). Raises
    ``ModelTimeout`` past the deadline and ``StreamIncomplete`` when the stream ends
    without its final event; ``what`` names the call in those errors and is the call's
    purpose where it is observed (``ostinato.observe``)."""
    builder = MessageBuilder(request)
    gate = GATE.get()  # the budgets: SpendLimitReached past a limit
    settle = await gate.side_call(model.name, request) if gate is not None else None
    reply: ModelReply | None = None
    try:
        with observe.model_call(model.name, request, what) as call:
            try:
                async with asyncio.timeout(deadline), aclosing(model.stream(request)) as events:
                    async for event in events:
                        builder.feed(event)
                        if call.first is None and type(event) in CONTENT_EVENTS:
                            call.first_token()
                        elif type(event) is Retrying:
                            call.retried(event.error)
            except TimeoutError:
                raise ModelTimeout(f"the {what} call passed its {deadline:g} s deadline") from None
            if builder.stop_reason is None:
                raise StreamIncomplete(f"the {what} call's stream ended without its final event")
            reply = builder.finish()
            call.replied(reply)
    finally:
        if settle is not None:  # charged whatever happened: the call was made
            await asyncio.shield(settle(spent(builder, reply)))
    return reply


def spent(builder: MessageBuilder, reply: ModelReply | None) -> Usage | None:
    """What a call used, as far as is known: its reply's counts, else what the provider
    had counted when it was cut short (None: nothing known)."""
    if reply is not None:
        return reply.usage
    return builder.usage if builder.usage.source != "unknown" else None
