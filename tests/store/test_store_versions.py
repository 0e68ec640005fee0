"""``VersionStore`` on every engine: a version per distinct content, numbered in order,
and each conversation's pins (set once, or moved)."""

from __future__ import annotations

import asyncio

import pytest

from ostinato.errors import StoreError
from ostinato.ids import new_id
from ostinato.store import PostgresStore, Store
from ostinato.store.base import Conversation, CreateConversation, utcnow
from ostinato.store.versions import VersionStore


def versions(store: Store) -> VersionStore:
    assert isinstance(store, VersionStore)
    return store


async def test_a_version_per_distinct_content_numbered_in_order(store: Store) -> None:
    s, now = versions(store), utcnow()
    one = await s.record_agent_version("helper", "h1", {"system_prompt": "A"}, now)
    again = await s.record_agent_version("helper", "h1", {"system_prompt": "A"}, now)
    two = await s.record_agent_version("helper", "h2", {"system_prompt": "B"}, now)
    assert (one.number, again.number, two.number) == (1, 1, 2)
    assert [v.hash for v in await s.agent_versions("helper")] == ["h1", "h2"]
    found = await s.agent_version("helper", 1)
    assert found is not None and found.content == {"system_prompt": "A"}
    assert await s.agent_version("helper", 3) is None
    assert await s.agent_versions("other") == []


async def test_pins_are_set_once_and_moved_on_purpose(store: Store) -> None:
    s = versions(store)
    await s.pin_versions("c1", {"helper": 1, "coder": 2})
    await s.pin_versions("c1", {"helper": 5})  # not a move: the first pin stays
    assert await s.conversation_versions("c1") == {"helper": 1, "coder": 2}
    await s.pin_versions("c1", {"helper": None}, move=True)  # follow the latest
    assert await s.conversation_versions("c1") == {"helper": None, "coder": 2}
    assert await s.conversation_versions("c2") == {}


async def test_a_new_conversation_is_pinned_in_the_write_that_makes_it(store: Store) -> None:
    now = utcnow()
    made = Conversation(new_id(), "idle", now, now, "ann")
    await store.write(CreateConversation(made, (("helper", 3), ("coder", None))))
    assert await versions(store).conversation_versions(made.id) == {"helper": 3, "coder": None}
    with pytest.raises(StoreError, match="exists"):  # nothing of a refused creation stays
        await store.write(CreateConversation(made, (("other", 1),)))
    assert await versions(store).conversation_versions(made.id) == {"helper": 3, "coder": None}


async def test_on_postgresql_a_pinned_conversation_is_one_planned_write(
    postgres_store: PostgresStore,
) -> None:
    store, now = postgres_store, utcnow()
    made = [Conversation(new_id(), "idle", now, now, "ann") for _ in range(5)]
    before = store.stats.round_trips
    pins = (("helper", 1), ("coder", 2))
    await asyncio.gather(*(store.write(CreateConversation(c, pins)) for c in made))
    assert store.stats.round_trips - before == 1 and store.stats.redone == 0
    for each in made:
        assert await store.conversation_versions(each.id) == {"helper": 1, "coder": 2}
