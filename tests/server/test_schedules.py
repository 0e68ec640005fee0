"""``/v1/schedules`` in keys mode: each owner sees and deletes only their own, creates
only in their own conversations, is refused clearly over the limit and for a ``when``
that is no time; the ``schedule`` tool makes the same schedules."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest

from ostinato.approvals import ApprovalPolicy
from ostinato.background.firer import Firer
from ostinato.background.schedules import Schedules
from ostinato.background.tool import schedule_tool
from ostinato.config.background import BackgroundSection
from ostinato.identity.keys import create_key
from ostinato.identity.settings import AuthSettings
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.memory import MemoryStore
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.mounting import Mount, Source
from tests.server.people import eventually

People = tuple[Runtime, ScriptedModel, httpx.AsyncClient, httpx.AsyncClient]


@pytest.fixture
async def clients() -> AsyncIterator[
    tuple[Runtime, ScriptedModel, httpx.AsyncClient, httpx.AsyncClient]
]:
    store = MemoryStore()
    schedules = Schedules(store, BackgroundSection(schedules_per_owner=2))
    model = ScriptedModel()
    tools = [*builtin_tools(), schedule_tool(schedules)]
    runtime = Runtime(
        store,
        model=model,
        mount=Mount([Source("builtins", tools, builtin=True)]),
        approvals=ApprovalPolicy(timeout=60),
    )
    app = create_app(runtime, auth=AuthSettings(mode="keys", key_cache_s=0))
    app.state.schedules = schedules
    keys = {who: (await create_key(store, who, "test"))[1] for who in ("ann", "bob")}
    transport = httpx.ASGITransport(app=app)
    async with contextlib.AsyncExitStack() as stack:
        ann, bob = [
            await stack.enter_async_context(
                httpx.AsyncClient(
                    transport=transport,
                    base_url="http://test",
                    headers={"authorization": f"Bearer {keys[who]}"},
                )
            )
            for who in ("ann", "bob")
        ]
        yield runtime, model, ann, bob
    await app.state.ostinato.aclose()
    await runtime.close()


async def test_create_list_delete_per_owner_and_the_limit(clients: People) -> None:
    _, _, ann, bob = clients
    cid = (await ann.post("/v1/conversations")).json()["id"]
    body = {
        "conversation_id": cid,
        "when": "daily at 09:00",
        "text": "plan the day",
        "zone": "Europe/Paris",
    }
    made = await ann.post("/v1/schedules", json=body)
    assert made.status_code == 201, made.text
    one = made.json()
    assert (one["kind"], one["spec"], one["zone"], one["state"]) == (
        "daily",
        "09:00",
        "Europe/Paris",
        "due",
    )
    assert one["next_fire"].endswith(("T08:00:00Z", "T07:00:00Z"))  # 09:00 Paris, in UTC
    reminder = {**body, "when": "in 5 minutes", "mode": "reminder"}
    assert (await ann.post("/v1/schedules", json=reminder)).status_code == 201
    over = await ann.post("/v1/schedules", json=reminder)
    assert over.status_code == 409 and over.json()["error"]["code"] == "too_many_schedules"
    assert "limit is 2" in over.json()["error"]["message"]
    assert len((await ann.get("/v1/schedules")).json()["schedules"]) == 2
    assert (await bob.get("/v1/schedules")).json()["schedules"] == []
    assert (await bob.post("/v1/schedules", json=body)).status_code == 404  # ann's conversation
    assert (await bob.delete(f"/v1/schedules/{one['id']}")).status_code == 404
    assert (await ann.delete(f"/v1/schedules/{one['id']}")).json()["id"] == one["id"]
    assert (await ann.delete(f"/v1/schedules/{one['id']}")).status_code == 404
    assert len((await ann.get("/v1/schedules")).json()["schedules"]) == 1


@pytest.mark.parametrize(
    ("when", "zone", "says"),
    [("someday", None, "is not a time"), ("daily at 09:00", "Mars/Base", "not a time zone")],
)
async def test_a_bad_when_is_a_clear_422(
    clients: tuple, when: str, zone: str | None, says: str
) -> None:  # type: ignore[type-arg]
    _, _, ann, _ = clients
    cid = (await ann.post("/v1/conversations")).json()["id"]
    body = {"conversation_id": cid, "when": when, "text": "x", "zone": zone}
    refused = await ann.post("/v1/schedules", json=body)
    assert refused.status_code == 422 and says in refused.json()["error"]["message"]


async def test_the_tool_schedules_for_the_conversations_owner(clients: People) -> None:
    runtime, model, ann, bob = clients
    tool = schedule_tool(Schedules(runtime.store))
    assert tool.changes is not None and not tool.changes({"action": "list"})  # never asks
    assert tool.changes({"action": "create"}) and tool.risk == "write"
    cid = (await ann.post("/v1/conversations")).json()["id"]
    args = {"action": "create", "when": "in 1 minute", "text": "call the bank", "reminder": True}
    model.add(tool_step(("schedule", args)), text_step("Scheduled."))
    watching = runtime.bus.subscribe(cid)  # someone is there to be asked
    turn = await runtime.start_turn(cid, "remind me in a minute to call the bank")

    async def asked() -> bool:  # the default policy asks before a write
        return bool(await runtime.store.list_approvals(cid, pending_only=True))

    await eventually(asked)
    (approval,) = await runtime.store.list_approvals(cid, pending_only=True)
    assert approval.tool == "schedule"
    await runtime.decide(cid, approval.id, approve=True)
    await turn.result()
    watching.close()
    (listed,) = (await ann.get("/v1/schedules")).json()["schedules"]
    assert (listed["mode"], listed["text"], listed["conversation_id"]) == (
        "reminder",
        "call the bank",
        cid,
    )
    assert (await bob.get("/v1/schedules")).json()["schedules"] == []


async def test_a_trigger_is_answered_once_and_a_retry_makes_no_second(clients: People) -> None:
    runtime, model, ann, bob = clients
    cid = (await ann.post("/v1/conversations")).json()["id"]
    url = f"/v1/conversations/{cid}/triggers"
    body = {"text": "The nightly build failed", "source": "ci"}
    headers = {"Idempotency-Key": "build-1234"}
    first = await ann.post(url, json=body, headers=headers)
    assert first.status_code == 202, first.text
    again = await ann.post(url, json=body, headers=headers)
    assert again.status_code == 202 and again.json()["id"] == first.json()["id"]
    reused = await ann.post(url, json={**body, "text": "other"}, headers=headers)
    assert reused.status_code == 422
    assert (await bob.post(url, json=body)).status_code == 404
    model.add(text_step("The nightly build failed; want me to look?"))
    schedules = Schedules(runtime.store)
    (fired,) = await Firer(runtime, schedules).tick()
    assert fired.id == first.json()["id"] and fired.mode == "trigger"
    await runtime.settle(10)
    shown = await runtime.store.list_messages(cid, include_hidden=False)
    assert [(r.role, r.text) for r in shown] == [
        ("assistant", "The nightly build failed; want me to look?")
    ]
    (asked,) = model.requests
    assert "outside system (ci)" in asked.messages[-1].text
    assert "The nightly build failed" in asked.messages[-1].text
    assert await Firer(runtime, schedules).tick() == []
