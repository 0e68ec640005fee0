"""A schedule's background conversation cannot be taken (issue 25, item 9): before,
stage one ran in ``<schedule id>-bg`` if it existed, whoever owned it, and the AI SDK
route let a caller create a conversation with any id, that one included."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from ostinato.background.firer import Firer
from ostinato.background.schedules import Schedules
from ostinato.background.stage_one import conversation_id, ensure_conversation
from ostinato.config.background import BackgroundSection
from ostinato.errors import NotFound
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.base import Conversation, CreateConversation, Store
from ostinato.store.memory import MemoryStore

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


async def test_stage_one_never_runs_in_a_conversation_it_did_not_make(store: Store) -> None:
    model = ScriptedModel()
    runtime = Runtime(store, model=model)
    schedules = Schedules(store, BackgroundSection(lease_seconds=30), lambda: T0)
    served = await runtime.create_conversation(owner="ann")
    made = await schedules.create("ann", served.id, "in 1 minute", "Read my mail")
    taken = Conversation(conversation_id(made), "idle", T0, T0, owner="mallory")
    await store.write(CreateConversation(taken))
    with pytest.raises(NotFound, match="is not this schedule's"):
        await ensure_conversation(store, made)
    model.add(text_step("mail read"), text_step("here it is"))
    later = datetime(2026, 12, 1, 9, 2, tzinfo=UTC)
    await Firer(runtime, schedules, "h1", clock=lambda: later).tick()
    assert await store.list_messages(taken.id, include_hidden=True) == []  # nothing of ann's
    assert model.requests == []
    await runtime.close()


async def test_the_ai_sdk_route_cannot_take_a_reserved_id() -> None:
    runtime = Runtime(MemoryStore(), model=ScriptedModel())
    app = create_app(runtime)
    body = {
        "id": "sch_0123-bg",
        "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
    }
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as client:
        answer = await client.post("/v1/ai-sdk/chat", json=body)
    assert answer.status_code == 422, answer.text
    assert "reserved" in answer.json()["error"]["message"]
    assert await runtime.store.get_conversation("sch_0123-bg") is None
    await runtime.close()
