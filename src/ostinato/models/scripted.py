"""``ScriptedModel``: a model that plays a script, for tests and benchmarks.

It records every request it receives, raises ``ScriptError`` when called more often than
scripted, and ``assert_consumed()`` fails when steps were left unplayed (the idea follows
the OpenAI Agents SDK's scripted test model)::

    model = ScriptedModel([
        tool_step(("calculator", {"expression": "1+1"})),
        text_step("It is 2."),
    ])
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field

from ostinato.messages import JSON
from ostinato.models.base import (
    ModelEvent,
    ModelRequest,
    Stop,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)


class ScriptError(AssertionError):
    """The model was used in a way its script did not foresee."""


@dataclass(frozen=True, slots=True)
class Step:
    """One scripted model call: the events to stream, or an exception to raise."""

    events: tuple[ModelEvent, ...] = ()
    error: BaseException | None = None
    delay: float = 0.0  # seconds to wait before each event (for cancellation tests)
    expect: Callable[[ModelRequest], None] | None = field(default=None, compare=False)


def text_step(text: str, *, chunks: int = 1, usage: Usage | None = None) -> Step:
    """A reply in plain text, streamed in ``chunks`` pieces."""
    size = max(1, -(-len(text) // max(1, chunks)))
    pieces = [text[i : i + size] for i in range(0, len(text), size)] or [""]
    return Step(
        (
            *(TextDelta(p) for p in pieces),
            usage or Usage(10, max(1, len(text) // 4)),
            Stop("end_turn"),
        )
    )


def tool_step(
    *calls: tuple[str, JSON] | tuple[str, JSON, str],
    text: str = "",
    usage: Usage | None = None,
) -> Step:
    """A reply that calls tools: each call is ``(name, input)`` or ``(name, input, id)``."""
    events: list[ModelEvent] = [TextDelta(text)] if text else []
    for index, call in enumerate(calls):
        name, arguments = call[0], call[1]
        call_id = call[2] if len(call) == 3 else ""
        events += [
            ToolCallStart(index, call_id, name),
            ToolCallDelta(index, json.dumps(arguments)),
            ToolCallEnd(index),
        ]
    events += [usage or Usage(10, 5), Stop("tool_use")]
    return Step(tuple(events))


def error_step(error: BaseException) -> Step:
    return Step(error=error)


class ScriptedModel:
    """Plays ``steps`` in order, one per model call."""

    def __init__(self, steps: Sequence[Step] = (), *, name: str = "scripted:model") -> None:
        self.name = name
        self._steps = list(steps)
        self._played = 0
        self._ids = 0
        self.requests: list[ModelRequest] = []

    def add(self, *steps: Step) -> None:
        self._steps.extend(steps)

    @property
    def remaining(self) -> int:
        return len(self._steps) - self._played

    def assert_consumed(self) -> None:
        if self.remaining:
            raise ScriptError(f"{self.remaining} scripted step(s) were never played")

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        self.requests.append(request)
        if self._played >= len(self._steps):
            raise ScriptError(
                f"unexpected model call #{self._played + 1}: the script has "
                f"{len(self._steps)} step(s)"
            )
        step = self._steps[self._played]
        self._played += 1
        if step.expect is not None:
            step.expect(request)
        if step.error is not None:
            raise step.error
        for event in step.events:
            if step.delay:
                await asyncio.sleep(step.delay)
            if isinstance(event, ToolCallStart) and not event.id:
                self._ids += 1
                event = ToolCallStart(event.index, f"call_{self._ids}", event.name)
            yield event
