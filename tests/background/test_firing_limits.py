"""Turns that triggers and schedules start count in their owner's turns a minute (issue
25, item 6): before, 30 triggers ran 30 turns in 5 s while the owner's own messages were
refused with 429. Past the limit a firing waits, held, until a turn is free."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ostinato.background.firer import Firer
from ostinato.background.schedules import Schedules
from ostinato.config.background import BackgroundSection
from ostinato.identity.limits import Limiter, LimitExceeded
from ostinato.identity.settings import LimitSettings
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.store.base import Store

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


async def test_triggers_count_in_the_owners_turns_a_minute(store: Store) -> None:
    model = ScriptedModel()
    runtime = Runtime(store, model=model)
    schedules = Schedules(store, BackgroundSection(lease_seconds=30), lambda: T0)
    cid = (await runtime.create_conversation(owner="ann")).id
    limiter = Limiter(store, LimitSettings(turns_per_minute=3))
    made = [await schedules.trigger("ann", cid, f"alert {i}", "monitor") for i in range(5)]
    model.add(*(text_step(f"reply {i}") for i in range(3)))
    await Firer(runtime, schedules, "h1", clock=lambda: T0, turns=limiter).tick()
    handle = runtime.running(cid)
    if handle is not None:
        await handle.result()
    replies = [m.text for m in await store.list_messages(cid) if m.role == "assistant"]
    assert replies == ["reply 0", "reply 1", "reply 2"]
    states = [(await store.schedule(s.id)) for s in made]
    assert sorted(s.state for s in states if s is not None) == ["delivered"] * 3 + ["ran"] * 2
    held = [s for s in states if s is not None and s.state == "ran"]  # waiting, held
    assert all(s.lease_until is not None and s.lease_until > T0 for s in held)
    with pytest.raises(LimitExceeded, match="a minute"):  # the owner's own message, too
        await limiter.begin_turn("ann")
    assert await limiter.count_turn("bob") is None  # another owner is not affected
    await runtime.close()
