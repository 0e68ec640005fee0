"""Which version of a forged tool a conversation mounts (``tools.forge.versions``): the
rule on its own, each step of it, and the store reads around it on every engine."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from ostinato.store import open_store
from ostinato.store.base import Conversation, CreateConversation, StartTurn, Store, Turn
from ostinato.store.forged import ForgedTool, RemoveForgedTool, SaveForgedTool
from ostinato.store.memory import MemoryStore
from ostinato.tools.forge.versions import conversation_versions, mounted_version
from tests.store.conftest import open_postgres, postgres_url

__all__ = ["postgres_url"]  # the session's PostgreSQL database (skips without one)

T0 = datetime(2026, 12, 1, 12, 0)
SCHEMA = {"type": "object", "properties": {}}


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def version(
    n: int, minute: int, conversation: str | None = None, removed: bool = False
) -> ForgedTool:
    return ForgedTool(
        "ann",
        "conv",
        n,
        "Convert.",
        SCHEMA,
        f"() => {n}",
        at(minute),
        removed_at=at(minute) if removed else None,
        conversation_id=conversation,
    )


def mounted(versions: list[ForgedTool], turns: list[int], now: int, cid: str = "A") -> int | None:
    chosen = mounted_version(versions, cid, [at(m) for m in turns], at(now))
    return None if chosen is None else chosen.version


def test_a_conversation_keeps_the_version_it_started_with() -> None:
    versions = [version(1, 0), version(2, 10), version(3, 20)]
    assert mounted(versions, turns=[5, 15], now=25) == 1  # began at 5: version 1 then
    assert mounted(versions, turns=[12], now=25) == 2
    assert mounted(versions, turns=[], now=25) == 3  # a new conversation: the newest


def test_a_tool_made_after_the_conversation_began_is_pinned_at_its_first_turn_with_it() -> None:
    versions = [version(1, 10), version(2, 11), version(3, 30)]
    assert mounted(versions, turns=[0, 5, 20, 40], now=50) == 2  # first turn after: 20


def test_an_edit_made_in_the_conversation_itself_counts_from_its_next_turn() -> None:
    versions = [version(1, 0), version(2, 10, "A"), version(3, 20, "B")]
    assert mounted(versions, turns=[5, 15], now=25, cid="A") == 2  # its own fix
    assert mounted(versions, turns=[5, 15], now=25, cid="B") == 3
    assert mounted(versions, turns=[5, 15], now=25, cid="C") == 1
    older_own = [version(1, 0, "A"), version(2, 10), version(3, 20)]
    assert mounted(older_own, turns=[15], now=25, cid="A") == 1  # its own, before the turn
    assert mounted(older_own, turns=[-5, 15], now=25, cid="A") == 1
    edited_before_its_next_turn = [version(1, 0, "A"), version(2, 1)]
    assert mounted(edited_before_its_next_turn, turns=[-5], now=25, cid="A") == 1
    assert mounted(edited_before_its_next_turn, turns=[-5], now=25, cid="B") == 2


def test_only_the_tool_s_current_life_counts() -> None:
    versions = [version(1, 0), version(2, 10, removed=True), version(3, 30)]
    assert mounted(versions, turns=[5, 20], now=40) == 3  # made again: a new tool
    assert mounted(versions[:2], turns=[5], now=40) is None


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "memory":
        return MemoryStore()
    if request.param == "sqlite":
        return await open_store(f"sqlite:///{tmp_path / 'forged.db'}")
    return await open_postgres(request.getfixturevalue("postgres_url"))


@pytest.mark.asyncio
async def test_the_store_reads_give_each_conversation_its_versions(store: Store) -> None:
    suffix = uuid.uuid4().hex[:8]  # one PostgreSQL database serves every test
    owner = f"ann-{suffix}"

    async def conversation(cid: str, turns: int) -> None:
        now = datetime.now().astimezone()
        await store.write(CreateConversation(Conversation(cid, "idle", now, now, owner=owner)))
        for i in range(turns):
            turn = Turn(f"{cid}-t{i}", cid, f"{cid}-r{i}", "running", datetime.now().astimezone())
            await store.write(StartTurn(turn))

    async def save(code: str, cid: str | None = None) -> None:
        await store.write(SaveForgedTool(owner, "conv", "Convert.", SCHEMA, code, cid))

    early, late = f"early-{suffix}", f"late-{suffix}"
    await conversation(early, 1)
    await save("() => 1", early)  # made in `early`
    await save("() => 2")  # edited elsewhere
    await conversation(late, 1)
    assert [v.version for v in await conversation_versions(store, owner, early)] == [1]
    assert [v.version for v in await conversation_versions(store, owner, late)] == [2]
    await save("() => 3", early)  # the model fixes it in `early`
    assert [v.version for v in await conversation_versions(store, owner, early)] == [3]
    assert [v.version for v in await conversation_versions(store, owner, late)] == [2]
    await store.write(RemoveForgedTool(owner, "conv"))
    assert await conversation_versions(store, owner, early) == []
    await store.close()
