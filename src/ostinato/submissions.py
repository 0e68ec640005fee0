"""What starts a turn: the inputs a conversation's worker (``ostinato.turns``) takes, in
a ``Submission`` each, and the ``TurnHandle`` of a turn once it has begun."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeAlias

from ostinato.approvals import Approval
from ostinato.errors import InvalidRequest
from ostinato.loop.driver import TurnResult
from ostinato.messages import JSON, Message, TextBlock
from ostinato.models.base import Model
from ostinato.store.base import QueuedInput, Turn


@dataclass(frozen=True, slots=True)
class TurnHandle:
    """A started turn: its row, the rows that started it, and its running task."""

    turn: Turn
    rows: tuple[Message, ...]  # the rows committed as the turn began (user message, ...)
    task: asyncio.Task[TurnResult]
    position: Callable[[], int] = lambda: 0  # the seq of the turn's last committed row

    @property
    def run_id(self) -> str:
        return self.turn.run_id

    async def result(self) -> TurnResult:
        return await asyncio.shield(self.task)


@dataclass(frozen=True, slots=True)
class NewMessage:
    message: Message
    client_message_id: str | None = None
    queued: QueuedInput | None = None  # set when it waited in the store's queue
    skill: str | None = None  # the agent the request named (instead of the router's pick)
    instructions: str | None = None  # the request's addition to the system prompt


def user_message(message: Message | str, client_message_id: str | None) -> Message:
    """A user message as a turn starts with it (``client_message_id`` in its metadata)."""
    if isinstance(message, str):
        message = Message(role="user", blocks=(TextBlock(message),))
    if message.role != "user" or not message.blocks:
        raise InvalidRequest("a turn starts with a non-empty user message")
    if not client_message_id:
        return message
    metadata = {**message.metadata, "client_message_id": client_message_id}
    return Message("user", message.blocks, message.hidden, metadata)


@dataclass(frozen=True, slots=True)
class CardAnswer:
    """The answer to a question card (a paused ``ui`` tool call)."""

    tool_use_id: str
    result: JSON | str | list[object] | int | float | bool | None


@dataclass(frozen=True, slots=True)
class CancelOutcome:
    """What a cancel did: the running turn it cancelled, and the tool_use ids of the
    cards and approvals it resolved."""

    cancelled_turn: str | None
    dismissed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ApprovalOutcome:
    """An approval decided after the turn that asked for it had stopped (a restart)."""

    approval: Approval


@dataclass(frozen=True, slots=True)
class Continued:
    """A running turn another server handed over at a step boundary as it shut down
    (``ostinato.handover``), claimed here: it goes on from its stored rows."""

    turn: Turn


Input: TypeAlias = NewMessage | CardAnswer | ApprovalOutcome | Continued


@dataclass(slots=True)
class Submission:
    input: Input
    model: Model | None = None
    started: asyncio.Future[TurnHandle] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    @property
    def queued(self) -> QueuedInput | None:
        return self.input.queued if isinstance(self.input, NewMessage) else None

    async def handle(self) -> TurnHandle:
        """The turn once it has started (raises what stopped it from starting)."""
        return await asyncio.shield(self.started)


Begin: TypeAlias = Callable[[str, Submission], Awaitable[TurnHandle]]
