"""Arbitration: one active turn per conversation, and what waits behind it.

Each busy conversation has one ``Worker``: a task that begins the turns of its pending
``Submission``s one after another, in arrival order. A submission to an idle
conversation starts a worker and runs at once; to a busy one it is stored first (the
store's queue, so nothing accepted is lost in a crash) and then, by policy:

- ``queue`` (default): runs after the turns before it;
- ``supersede``: the running turn is cancelled (its teardown awaited), then it runs;
- ``reject``: refused with ``Conflict`` (nothing stored).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from ostinato.approvals import Approval
from ostinato.errors import InvalidRequest
from ostinato.loop.driver import TurnResult
from ostinato.messages import JSON, Message, TextBlock
from ostinato.models.base import Model
from ostinato.store.base import QueuedInput, Turn

Policy: TypeAlias = Literal["queue", "supersede", "reject"]
POLICIES: tuple[str, ...] = ("queue", "supersede", "reject")


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
class ApprovalOutcome:
    """An approval decided after the turn that asked for it had stopped (a restart)."""

    approval: Approval


Input: TypeAlias = NewMessage | CardAnswer | ApprovalOutcome


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


class Worker:
    """Runs the turns of one conversation, one at a time."""

    def __init__(self, conversation_id: str, begin: Begin) -> None:
        self.conversation_id = conversation_id
        self.pending: deque[Submission] = deque()
        self.current: TurnHandle | None = None
        self.starting = False  # a turn is being begun (its rows written, its task made)
        self._begun = asyncio.Event()  # set whenever no turn is being begun
        self._begin = begin
        self.task: asyncio.Task[None] | None = None

    @property
    def idle(self) -> bool:
        """Nothing runs and nothing waits: the worker is winding down."""
        return (
            not self.pending
            and not self.starting
            and (self.current is None or self.current.task.done())
        )

    async def run(self) -> None:
        try:
            while self.pending:
                submission = self.pending.popleft()
                self.starting = True
                self._begun.clear()
                try:
                    handle = await self._begin(self.conversation_id, submission)
                except Exception as exc:  # the input could not start a turn: tell its sender
                    if not submission.started.done():
                        submission.started.set_exception(exc)
                    continue
                finally:
                    self.starting = False
                    self._begun.set()
                submission.started.set_result(handle)
                self.current = handle
                try:
                    await asyncio.wait([handle.task])
                finally:
                    self.current = None
        except asyncio.CancelledError:
            if self.current is not None:
                self.current.task.cancel()
                await asyncio.wait([self.current.task])
            for submission in self.pending:
                submission.started.cancel()
            raise

    async def cancel_current(self) -> Turn | None:
        """Cancel the running turn and wait for its teardown; the turn, if there was one.
        A turn being begun is waited for, then cancelled."""
        if self.starting:
            await self._begun.wait()
        current = self.current
        if current is None or current.task.done():
            return None
        current.task.cancel()
        await asyncio.wait([current.task])
        return current.turn


class Workers:
    """The workers of every busy conversation in this process."""

    def __init__(self, begin: Begin) -> None:
        self._begin = begin
        self._workers: dict[str, Worker] = {}

    def get(self, conversation_id: str) -> Worker | None:
        return self._workers.get(conversation_id)

    def busy(self, conversation_id: str) -> bool:
        """A turn runs or waits to (a worker winding down does not count)."""
        worker = self._workers.get(conversation_id)
        return worker is not None and not worker.idle

    def add(self, conversation_id: str, submission: Submission) -> Worker:
        """Queue a submission, starting the conversation's worker if it is idle."""
        worker = self._workers.get(conversation_id)
        if worker is None:
            worker = Worker(conversation_id, self._begin)
            self._workers[conversation_id] = worker
            worker.pending.append(submission)
            worker.task = asyncio.create_task(self._run(worker), name=f"worker-{conversation_id}")
        else:
            worker.pending.append(submission)
        return worker

    async def _run(self, worker: Worker) -> None:
        try:
            await worker.run()
        finally:
            if self._workers.get(worker.conversation_id) is worker:
                del self._workers[worker.conversation_id]

    def __len__(self) -> int:
        return len(self._workers)

    async def close(self) -> None:
        tasks = [w.task for w in self._workers.values() if w.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
