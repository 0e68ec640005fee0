"""Helpers for loop tests: a runtime on the in-memory store with a scripted model."""

from __future__ import annotations

from typing import Any

from ostinato.agents import AgentConfig
from ostinato.bus import LocalBus
from ostinato.frames import Frame, MessageCommitted
from ostinato.messages import Message
from ostinato.models.scripted import ScriptedModel, Step
from ostinato.runtime import Runtime
from ostinato.store.memory import MemoryStore
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.registry import ToolRegistry


class CheckingBus(LocalBus):
    """Records every frame, and fails if a row's frame is published before it commits."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__()
        self.store = store
        self.frames: list[Frame] = []

    def publish(self, conversation_id: str, frame: Frame) -> None:
        if isinstance(frame, MessageCommitted):
            stored = {m.seq for m in self.store._messages[conversation_id]}
            assert frame.message.seq in stored, "a row's frame was published before its commit"
        if self.frames:
            assert frame.seq >= self.frames[-1].seq, "frame seq went backwards"
        self.frames.append(frame)
        super().publish(conversation_id, frame)

    def types(self) -> list[str]:
        return [f.type for f in self.frames]


def assert_history_valid(messages: list[Message]) -> None:
    """Invariant 3: every tool_use is answered exactly once, in the tool rows right after
    it (adapters merge consecutive tool rows into the one message a provider expects)."""
    for index, message in enumerate(messages):
        uses = [u.id for u in message.tool_uses]
        if not uses:
            continue
        answered = []
        for following in messages[index + 1 :]:
            if following.role != "tool":
                break
            answered += [r.tool_use_id for r in following.tool_results]
        assert sorted(answered) == sorted(uses), (message.seq, uses, answered)
    results = [r.tool_use_id for m in messages for r in m.tool_results]
    assert len(results) == len(set(results)), "a tool_use was answered twice"


class Harness:
    def __init__(self, *steps: Step, tools: ToolRegistry | None = None, **agent: Any) -> None:
        self.store = MemoryStore()
        self.bus = CheckingBus(self.store)
        self.model = ScriptedModel(list(steps))
        registry = tools if tools is not None else ToolRegistry(builtin_tools())
        self.runtime = Runtime(
            self.store, model=self.model, tools=registry, agent=AgentConfig(**agent), bus=self.bus
        )

    async def conversation(self) -> str:
        return (await self.runtime.create_conversation()).id

    async def messages(self, cid: str) -> list[Message]:
        rows = await self.store.list_messages(cid)
        assert_history_valid(rows)
        return rows
