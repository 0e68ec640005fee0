"""A SQL store times its writes for a backend that hears (``observe.store_write``: the
commit latency metric), and only then: with the no-op backend nothing is timed."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from ostinato import observe
from ostinato.observe import Backend
from ostinato.store import open_store
from ostinato.store.base import Conversation, CreateConversation


class Writes(Backend):
    def __init__(self) -> None:
        self.seconds: list[float] = []

    def store_write(self, seconds: float) -> None:
        self.seconds.append(seconds)


async def test_a_sqlite_write_is_timed_while_a_backend_hears(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path}/s.db")
    heard = Writes()
    now = datetime.now(UTC)
    previous = observe.install(heard)
    try:
        await store.write(CreateConversation(Conversation("c1", "idle", now, now)))
        assert len(heard.seconds) == 1 and heard.seconds[0] >= 0
    finally:
        observe.install(previous)
    await store.write(CreateConversation(Conversation("c2", "idle", now, now)))
    assert len(heard.seconds) == 1  # not heard: not timed
    await store.close()
