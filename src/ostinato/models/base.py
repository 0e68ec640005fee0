"""The model interface: a request in, a stream of model events out.

A ``Model`` is anything with a ``name`` and an async-generator method ``stream``. The loop
drives it; closing the generator (``aclose``, which cancellation does) must close the
underlying HTTP stream so the provider stops generating.

Events are small frozen dataclasses. Content events carry an ``index`` that names the
block they belong to (a provider's content index, a tool call's index); the
``MessageBuilder`` in ``ostinato.models.assembly`` folds them into canonical blocks.
A stream must end with exactly one ``Stop``; a stream that ends without one is an error.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from ostinato.messages import JSON, Message

StopReason: TypeAlias = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence"]
# Who counted a call's tokens: the provider; ostinato's estimate, because the provider
# sent no counts (llama.cpp's servers send none in streams); or nobody yet.
UsageSource: TypeAlias = Literal["provider", "estimate", "unknown"]


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """What a model is told about one tool."""

    name: str
    description: str
    parameters: JSON


@dataclass(slots=True)  # not frozen: made every step (docs/performance.md)
class ModelRequest:
    """Everything one model call needs; built by the loop from the store."""

    system: str
    messages: Sequence[Message]
    tools: Sequence[ToolDefinition] = ()
    tool_choice: Literal["auto", "none"] = "auto"
    max_tokens: int | None = None
    temperature: float | None = None
    metadata: JSON = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str
    index: int = 0
    provider_data: JSON | None = None


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    text: str = ""
    signature: str | None = None
    index: int = 0
    provider_data: JSON | None = None


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    index: int
    id: str
    name: str
    provider_data: JSON | None = None


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    index: int
    arguments: str


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    """The call's arguments are complete. ``input`` may be given instead of deltas."""

    index: int
    input: JSON | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    source: UsageSource = "provider"


UNKNOWN_USAGE = Usage(source="unknown")  # no counts from the provider (yet)


@dataclass(frozen=True, slots=True)
class Stop:
    reason: StopReason


@dataclass(frozen=True, slots=True)
class Retrying:
    """The adapter is about to retry a failed attempt (shown to surfaces as a frame)."""

    attempt: int
    delay: float
    error: str


ModelEvent: TypeAlias = (
    TextDelta
    | ThinkingDelta
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | Usage
    | Stop
    | Retrying
)


@runtime_checkable
class Model(Protocol):
    """A streaming chat model. ``name`` is its ``provider:model`` id."""

    name: str

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]: ...
