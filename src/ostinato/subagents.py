"""Sub-agents: ``delegate`` runs another configured agent as a nested turn and returns its
answer; ``spawn_agents`` runs independent tasks in parallel (at most 8 at once, the rest
wait; sub-agents cannot spawn or delegate).

A nested turn is a whole turn of the same loop on a scratch conversation kept in memory:
its rows never enter the parent's history (the parent sees only the answer, as the tool
result). Its text streams to the parent conversation as ``agent.token`` frames (for a
timeline, not the chat body); its tool calls are recorded in the parent's tool-call
records under the parent call (id ``<parent call id>/<sub call id>``). Cancelling the
parent turn cancels its sub-agents. A sub-agent cannot ask a person for approval: a tool
whose risk needs consent (by default write, exec and network) is refused there, and so is
a memory write (the parent may call them itself).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any

import pydantic

from ostinato.consent import TurnConsent
from ostinato.errors import ToolError
from ostinato.frames import AgentToken, Frame, TextDeltaFrame
from ostinato.ids import new_id
from ostinato.loop.driver import TurnDriver
from ostinato.messages import Message, TextBlock
from ostinato.store.base import (
    AppendMessage,
    Conversation,
    CreateConversation,
    FinishToolCall,
    StartToolCall,
    StartTurn,
    Turn,
    WriteOp,
    utcnow,
)
from ostinato.store.memory import MemoryStore
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.functions import function_tool

if TYPE_CHECKING:
    from ostinato.runtime import Runtime

MAX_PARALLEL = 8
MAX_TASKS = 32
SPAWNING = frozenset({"delegate", "spawn_agents"})


class SubTask(pydantic.BaseModel):
    agent: str = pydantic.Field(description="The id of a configured agent.")
    task: str = pydantic.Field(description="What it should do, self-contained.")


async def delegate(agent: str, task: str, context: ToolContext) -> str:
    """Hand a task to another agent and get its answer. The agent sees only the task, so
    make it self-contained.

    Args:
        agent: The id of a configured agent.
        task: What it should do, with everything it needs to know.
    """
    return await run_subagent(context, agent, task, label=agent)


async def spawn_agents(tasks: list[SubTask], context: ToolContext) -> list[dict[str, str]]:
    """Run independent tasks in parallel, each by an agent, and get every answer. Use it
    for work that splits into parts that do not depend on each other.

    Args:
        tasks: The tasks, each an agent id and a self-contained task.
    """
    if not tasks:
        raise ToolError("give at least one task")
    if len(tasks) > MAX_TASKS:
        raise ToolError(f"at most {MAX_TASKS} tasks at once")
    gate = asyncio.Semaphore(MAX_PARALLEL)

    async def one(index: int, sub: SubTask) -> dict[str, str]:
        async with gate:
            try:
                answer = await run_subagent(context, sub.agent, sub.task, label=f"{index + 1}")
            except ToolError as exc:
                return {"agent": sub.agent, "error": exc.message}
            return {"agent": sub.agent, "answer": answer}

    return list(await asyncio.gather(*(one(i, t) for i, t in enumerate(tasks))))


def subagent_tools() -> list[Tool]:
    return [
        function_tool(delegate, category="agent", timeout=900.0, untrusted=True),
        function_tool(spawn_agents, category="agent", timeout=1800.0, untrusted=True),
    ]


async def run_subagent(context: ToolContext, agent: str, task: str, *, label: str) -> str:
    runtime: Runtime | None = context.extras.get("runtime")
    if runtime is None:
        raise ToolError("sub-agents are not available here")
    skill = runtime.router.get(agent)
    if skill is None:
        known = ", ".join(s.id for s in runtime.router.skills)
        raise ToolError(f"no agent named {agent!r}; the agents are: {known}")
    scratch = MemoryStore()
    now = utcnow()
    conversation = Conversation(new_id(), "idle", now, now, owner=context.owner)
    turn = Turn(new_id(), conversation.id, new_id(), "running", now, "agent")
    request = Message("user", (TextBlock(task),))
    _, stored, _ = await scratch.write(
        CreateConversation(conversation),
        AppendMessage(conversation.id, request, turn.id),
        StartTurn(turn),
    )
    mounted = await runtime.mount.registry(context.owner, context.conversation_id)
    allowed = skill.agent.tools
    catalog = mounted.registry.catalog(
        [n for n in (allowed or [t.name for t in mounted.registry]) if n not in SPAWNING],
        disabled=runtime.disabled_tools,
        protected=runtime.protected_tools,
    )
    driver = TurnDriver(
        store=_Mirror(scratch, runtime, context),
        bus=_Timeline(runtime, context, label or skill.id),
        model=runtime.model_for(conversation, skill),
        catalog=catalog,
        settings=skill.agent,
        turn=turn,
        history=[stored],
        # Nobody can be asked here: what needs consent is refused (UNREACHABLE). The
        # task was written by the parent's model, so the sub-agent starts as having
        # taken in outside content: its memory writes need consent, and are refused.
        consent=TurnConsent(None, skill.approvals, outside=True),
        owner=context.owner,
        workdir=context.workdir,
    )
    result = await driver.run()
    answer = result.messages[-1].text if result.messages else ""
    if result.stop_reason in ("end_turn", "budget_exhausted") and answer:
        return answer
    return f"the agent {agent!r} stopped ({result.stop_reason}){': ' + answer if answer else ''}"


class _Timeline:
    """The sub-agent's bus: its text goes to the parent conversation as agent tokens."""

    def __init__(self, runtime: Runtime, context: ToolContext, label: str) -> None:
        self.runtime, self.context, self.label = runtime, context, label

    def publish(self, conversation_id: str, frame: Frame) -> None:
        if isinstance(frame, TextDeltaFrame):
            parent = self.context.conversation_id
            self.runtime.bus.publish(
                parent,
                AgentToken(
                    run_id=self.context.run_id,
                    seq=self.runtime.bus.last_seq(parent),
                    agent=self.label,
                    tool_use_id=self.context.tool_use_id,
                    text=frame.text,
                ),
            )

    def subscribe(self, conversation_id: str) -> Any:  # pragma: no cover - never watched
        raise NotImplementedError


class _Mirror:
    """The sub-agent's store: everything in its scratch store, and its tool calls also in
    the real store, under the parent call."""

    def __init__(self, scratch: MemoryStore, runtime: Runtime, context: ToolContext) -> None:
        self.scratch, self.runtime, self.context = scratch, runtime, context

    def __getattr__(self, name: str) -> Any:
        return getattr(self.scratch, name)

    async def write(self, *ops: WriteOp) -> list[Any]:
        results = await self.scratch.write(*ops)
        mirrored = [m for m in (self._mirror(op) for op in ops) if m is not None]
        if mirrored:
            await self.runtime.store.write(*mirrored)
        return results

    def _mirror(self, op: WriteOp) -> WriteOp | None:
        prefix = self.context.tool_use_id + "/"
        if isinstance(op, StartToolCall):
            record = dataclasses.replace(
                op.record,
                id=prefix + op.record.id,
                conversation_id=self.context.conversation_id,
                turn_id=self.context.turn_id,
            )
            return StartToolCall(record)
        if isinstance(op, FinishToolCall):
            return dataclasses.replace(
                op, turn_id=self.context.turn_id, tool_call_id=prefix + op.tool_call_id
            )
        return None
