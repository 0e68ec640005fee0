"""``VersionStore`` on every engine: a version per distinct content, numbered in order,
and each conversation's pins (set once, or moved)."""

from __future__ import annotations

from ostinato.store import Store
from ostinato.store.base import utcnow
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
