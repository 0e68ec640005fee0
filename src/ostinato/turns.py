"""Arbitration: one active turn per conversation.

A turn holds its conversation's lock from the moment its first row is written until its
stop reason is recorded; a message that arrives meanwhile waits for the lock (it queues,
in arrival order: asyncio locks are fair).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ostinato.loop.driver import TurnResult
from ostinato.messages import Message
from ostinato.store.base import Turn


class ConversationLocks:
    """One lock per conversation, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    async def acquire(self, conversation_id: str) -> None:
        lock = self._locks.setdefault(conversation_id, asyncio.Lock())
        self._users[conversation_id] = self._users.get(conversation_id, 0) + 1
        try:
            await lock.acquire()
        except BaseException:
            self._forget(conversation_id)
            raise

    def release(self, conversation_id: str) -> None:
        self._locks[conversation_id].release()
        self._forget(conversation_id)

    def busy(self, conversation_id: str) -> bool:
        lock = self._locks.get(conversation_id)
        return lock is not None and lock.locked()

    def _forget(self, conversation_id: str) -> None:
        users = self._users[conversation_id] - 1
        if users:
            self._users[conversation_id] = users
        else:
            del self._users[conversation_id]
            del self._locks[conversation_id]


@dataclass(frozen=True, slots=True)
class TurnHandle:
    """A started turn: its row, the message that started it, and its running task."""

    turn: Turn
    message: Message
    task: asyncio.Task[TurnResult]

    @property
    def run_id(self) -> str:
        return self.turn.run_id

    async def result(self) -> TurnResult:
        return await asyncio.shield(self.task)
