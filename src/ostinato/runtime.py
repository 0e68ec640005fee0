"""The runtime: store, bus, model, tools and agent put together; what the server and the
CLI drive. It starts turns, streams their frames, and recovers after a crash."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from ostinato.agents import AgentConfig
from ostinato.bus import LocalBus
from ostinato.errors import InvalidRequest, NotFound
from ostinato.frames import Frame, MessageCommitted, TurnFinished, TurnStarted
from ostinato.ids import new_id
from ostinato.loop.driver import TurnDriver, TurnResult
from ostinato.messages import JSON, Message, TextBlock, ToolResultBlock
from ostinato.models.base import Model
from ostinato.store.base import (
    AppendMessage,
    Conversation,
    CreateConversation,
    FinishToolCall,
    FinishTurn,
    SetConversationState,
    StartTurn,
    Store,
    Turn,
    WriteOp,
    utcnow,
)
from ostinato.tools.base import ToolRegistry
from ostinato.tools.builtins import default_registry
from ostinato.turns import ConversationLocks, TurnHandle

RECOVERED = "interrupted: the server stopped before this tool call finished"

ModelChoice = Model | Callable[[Conversation], Model]


class Runtime:
    def __init__(
        self,
        store: Store,
        *,
        model: ModelChoice,
        tools: ToolRegistry | None = None,
        agent: AgentConfig | None = None,
        bus: LocalBus | None = None,
    ) -> None:
        self.store = store
        self.bus = bus or LocalBus()
        self.tools = tools if tools is not None else default_registry()
        self.agent = agent or AgentConfig()
        self._model = model
        self._locks = ConversationLocks()
        self._tasks: set[asyncio.Task[TurnResult]] = set()

    def model_for(self, conversation: Conversation) -> Model:
        if callable(self._model) and not hasattr(self._model, "stream"):
            return self._model(conversation)
        return self._model  # type: ignore[return-value]

    # --- conversations ---------------------------------------------------------------

    async def create_conversation(
        self, *, owner: str | None = None, title: str | None = None, metadata: JSON | None = None
    ) -> Conversation:
        now = utcnow()
        conversation = Conversation(
            id=new_id(),
            state="idle",
            created_at=now,
            updated_at=now,
            owner=owner,
            title=title,
            metadata=metadata or {},
        )
        await self.store.write(CreateConversation(conversation))
        return conversation

    async def conversation(self, conversation_id: str) -> Conversation:
        found = await self.store.get_conversation(conversation_id)
        if found is None:
            raise NotFound(f"no conversation with id {conversation_id!r}")
        return found

    # --- turns -----------------------------------------------------------------------

    async def start_turn(
        self,
        conversation_id: str,
        message: Message | str,
        *,
        client_message_id: str | None = None,
        model: Model | None = None,
    ) -> TurnHandle:
        """Store the message and start the turn it causes; returns once it is running.

        Waits (queues) while another turn of the conversation runs.
        """
        if isinstance(message, str):
            message = Message(role="user", blocks=(TextBlock(message),))
        if message.role != "user" or not message.blocks:
            raise InvalidRequest("a turn starts with a non-empty user message")
        conversation = await self.conversation(conversation_id)
        await self._locks.acquire(conversation_id)
        try:
            model = model or self.model_for(conversation)
            history = await self.store.list_messages(conversation_id)
            turn = Turn(
                id=new_id(),
                conversation_id=conversation_id,
                run_id=new_id(),
                status="running",
                started_at=utcnow(),
            )
            if client_message_id:
                message = Message(
                    message.role,
                    message.blocks,
                    message.hidden,
                    {**message.metadata, "client_message_id": client_message_id},
                )
            stored, *_ = await self.store.write(
                AppendMessage(conversation_id, message, turn.id),
                StartTurn(turn),
                SetConversationState(conversation_id, "running"),
            )
            self.bus.publish(
                conversation_id,
                TurnStarted(run_id=turn.run_id, seq=stored.seq, turn_id=turn.id),
            )
            self.bus.publish(
                conversation_id,
                MessageCommitted(
                    run_id=turn.run_id,
                    seq=stored.seq,
                    message=stored,
                    client_message_id=client_message_id,
                ),
            )
            driver = TurnDriver(
                store=self.store,
                bus=self.bus,
                model=model,
                catalog=self.tools.catalog(self.agent.tools),
                settings=self.agent,
                turn=turn,
                history=[*history, stored],
            )
            task = asyncio.create_task(self._drive(driver), name=f"turn-{turn.id}")
        except BaseException:
            self._locks.release(conversation_id)
            raise
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return TurnHandle(turn, stored, task)

    async def _drive(self, driver: TurnDriver) -> TurnResult:
        try:
            return await driver.run()
        finally:
            self._locks.release(driver.turn.conversation_id)

    async def run_turn(self, conversation_id: str, message: Message | str, **kw: Any) -> TurnResult:
        """Run a turn to its end and return its result."""
        handle = await self.start_turn(conversation_id, message, **kw)
        return await handle.result()

    async def stream_turn(
        self, conversation_id: str, message: Message | str, **kw: Any
    ) -> AsyncIterator[Frame]:
        """Run a turn and yield its frames, from ``turn.started`` to ``turn.finished``."""
        subscription = self.bus.subscribe(conversation_id)
        try:
            handle = await self.start_turn(conversation_id, message, **kw)
            async for frame in subscription:
                if frame.run_id != handle.run_id:
                    continue
                yield frame
                if isinstance(frame, TurnFinished):
                    return
        finally:
            subscription.close()

    def active_turns(self) -> int:
        return len(self._tasks)

    # --- lifecycle -------------------------------------------------------------------

    async def recover(self) -> list[str]:
        """Close turns a crash left running (invariant 8); returns their ids.

        Every open tool call gets a synthetic result, tool-call records still marked
        running are closed, and the turn ends ``interrupted``.
        """
        recovered = []
        for turn in await self.store.running_turns():
            messages = await self.store.list_messages(turn.conversation_id)
            answered = {r.tool_use_id for m in messages for r in m.tool_results}
            open_uses = [u for m in messages for u in m.tool_uses if u.id not in answered]
            now = utcnow()
            ops: list[WriteOp] = []
            if open_uses:
                blocks = tuple(ToolResultBlock(u.id, RECOVERED, is_error=True) for u in open_uses)
                ops.append(AppendMessage(turn.conversation_id, Message("tool", blocks), turn.id))
            for record in await self.store.list_tool_calls(turn.conversation_id, turn_id=turn.id):
                if record.status == "running":
                    ops.append(
                        FinishToolCall(turn.id, record.id, "interrupted", RECOVERED, True, now, 0.0)
                    )
            ops.append(FinishTurn(turn.id, turn.conversation_id, "interrupted", now))
            await self.store.write(*ops)
            recovered.append(turn.id)
        return recovered

    async def close(self) -> None:
        """Cancel running turns (each records ``cancelled``) and close the store."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.store.close()
