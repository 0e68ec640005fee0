"""The Agent Protocol's crons under ``/langgraph`` against the app in memory, on every
store engine: a cron on a thread is a schedule whose firing is a turn in the thread
(fired here by the poller with a clock past its slot), searched, counted, changed,
disabled and deleted; what a cron cannot be is refused clearly; another owner's cron is
a 404 and is in none of the caller's searches."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ostinato.background.firer import Firer
from ostinato.background.schedules import Schedules
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from tests.server.conftest import Callers
from tests.server.people import client_for

BASE = "/langgraph"


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app) as client:
        yield client


def cron(schedule: str = "0 9 * * *", text: str = "plan my day", **extra: Any) -> dict[str, Any]:
    return {
        "assistant_id": "ostinato",
        "schedule": schedule,
        "input": {"messages": [{"role": "user", "content": text}]},
        **extra,
    }


async def thread(client: httpx.AsyncClient) -> str:
    made = await client.post(f"{BASE}/threads", json={})
    tid: str = made.json()["thread_id"]
    return tid


async def fire_at(runtime: Runtime, when: datetime) -> list[str]:
    """Fire what is due at ``when`` (each to its end); the ids fired."""
    fired = await Firer(runtime, Schedules(runtime.store, clock=lambda: when)).tick()
    await runtime.settle(10)
    return [s.id for s in fired]


async def test_a_cron_runs_in_its_thread_at_its_slots(
    client: httpx.AsyncClient, runtime: Runtime, model: ScriptedModel
) -> None:
    tid = await thread(client)
    body = cron(timezone="Europe/Paris", metadata={"team": "a"}, config={"tags": ["x"]})
    made = await client.post(f"{BASE}/threads/{tid}/runs/crons", json=body)
    assert made.status_code == 200, made.text
    one = made.json()
    assert (one["thread_id"], one["assistant_id"], one["schedule"]) == (
        tid,
        "ostinato",
        body["schedule"],
    )
    assert (one["timezone"], one["enabled"], one["metadata"]) == (
        "Europe/Paris",
        True,
        {"team": "a"},
    )
    assert one["payload"]["config"] == {"tags": ["x"]} and one["end_time"] is None
    assert one["user_id"] == "local" and one["on_run_completed"] is None
    first = datetime.fromisoformat(one["next_run_date"])
    assert first.astimezone(first.tzinfo).hour in (7, 8)  # 09:00 in Paris, in UTC
    model.add(text_step("Here is your plan."))
    assert await fire_at(runtime, first + timedelta(seconds=1)) == [one["cron_id"]]
    state = (await client.get(f"{BASE}/threads/{tid}/state")).json()
    said = [(m["type"], m["content"]) for m in state["values"]["messages"]]
    assert said == [("human", "plan my day"), ("ai", "Here is your plan.")]
    row = (await runtime.store.list_messages(tid))[0]
    assert row.metadata["trigger"] == "cron" and not row.hidden
    kept = Schedules(runtime.store)
    assert [(s.mode, s.zone) for s in await kept.list("local")] == [("run", "Europe/Paris")]
    assert await kept.zone_of("local") is None  # a cron's zone is not the owner's
    (found,) = (await client.post(f"{BASE}/runs/crons/search", json={"thread_id": tid})).json()
    assert datetime.fromisoformat(found["next_run_date"]) - first == timedelta(days=1)
    assert (await client.post(f"{BASE}/runs/crons/count", json={})).json() == 1
    assert await fire_at(runtime, first + timedelta(hours=1)) == []  # once a slot
    assert (await client.get(f"{BASE}/threads/{tid}/runs")).json() == []  # turns, not runs


async def test_a_cron_is_changed_disabled_searched_and_deleted(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    tid = await thread(client)
    url = f"{BASE}/threads/{tid}/runs/crons"
    one = (await client.post(url, json=cron(metadata={"n": 1}))).json()
    two = (await client.post(url, json=cron("*/5 * * * *", enabled=False))).json()
    assert two["enabled"] is False and two["next_run_date"] is None
    cron_url = f"{BASE}/runs/crons/{one['cron_id']}"
    changed = await client.patch(cron_url, json={"schedule": "30 6 * * 1", "metadata": {"m": 2}})
    assert changed.status_code == 200, changed.text
    assert changed.json()["schedule"] == "30 6 * * 1" and changed.json()["metadata"] == {
        "n": 1,
        "m": 2,
    }
    monday = datetime.fromisoformat(changed.json()["next_run_date"])
    assert (monday.weekday(), monday.hour, monday.minute) == (0, 6, 30)
    off = (await client.patch(cron_url, json={"enabled": False})).json()
    assert off["enabled"] is False and off["next_run_date"] is None
    assert await fire_at(runtime, monday + timedelta(days=400)) == []  # neither fires
    on = (await client.patch(cron_url, json={"enabled": True})).json()
    assert on["next_run_date"] == changed.json()["next_run_date"]
    search = f"{BASE}/runs/crons/search"
    enabled = (await client.post(search, json={"enabled": True})).json()
    assert [c["cron_id"] for c in enabled] == [one["cron_id"]]
    by_meta = await client.post(search, json={"metadata": {"m": 2}, "select": ["cron_id"]})
    assert by_meta.json() == [{"cron_id": one["cron_id"]}]
    oldest = await client.post(
        search, json={"sort_by": "created_at", "sort_order": "asc", "limit": 1}
    )
    assert [c["cron_id"] for c in oldest.json()] == [one["cron_id"]]
    newest = await client.post(search, json={"offset": 1, "limit": 5})  # newest first
    assert [c["cron_id"] for c in newest.json()] == [one["cron_id"]]
    assert (await client.post(f"{BASE}/runs/crons/count", json={"thread_id": tid})).json() == 2
    assert (await client.delete(cron_url)).status_code == 204
    assert (await client.delete(cron_url)).status_code == 404
    assert (await client.patch(cron_url, json={"enabled": True})).status_code == 404
    left = (await client.post(search, json={})).json()
    assert [c["cron_id"] for c in left] == [two["cron_id"]]


@pytest.mark.parametrize(
    ("body", "status", "said"),
    [
        (cron("whenever"), 422, "is not a time"),
        (cron("61 * * * *"), 422, "not a cron expression"),
        (cron(timezone="Mars/Base"), 422, "not a time zone"),
        ({**cron(), "assistant_id": "nobody"}, 404, "no assistant"),
        ({**cron(), "input": None}, 422, "needs input.messages"),
        (cron(input={"messages": ["a", "b"]}), 422, "one human message"),
        (cron(end_time="2030-01-01T00:00:00+00:00"), 422, "end_time"),
        (cron(webhook="https://example.com/hook"), 422, "webhooks"),
        (cron(multitask_strategy="reject"), 422, "enqueue"),
        (cron(on_run_completed="keep"), 422, "stateless"),
        (cron(surprise=1), 422, "'surprise' is not a field"),
    ],
)
async def test_what_a_cron_cannot_be_is_refused_clearly(
    client: httpx.AsyncClient, body: dict[str, Any], status: int, said: str
) -> None:
    tid = await thread(client)
    refused = await client.post(f"{BASE}/threads/{tid}/runs/crons", json=body)
    assert refused.status_code == status, refused.text
    assert said in refused.json()["error"]["message"]
    assert (await client.post(f"{BASE}/runs/crons/count", json={})).json() == 0


async def test_refusals_beside_a_thread(client: httpx.AsyncClient) -> None:
    stateless = await client.post(f"{BASE}/runs/crons", json=cron())
    assert stateless.status_code == 422 and "stateless" in stateless.json()["error"]["message"]
    missing = await client.post(f"{BASE}/threads/nothread/runs/crons", json=cron())
    assert missing.status_code == 404
    for query in ({"sort_by": "colour"}, {"select": ["colour"]}, {"limit": 0}, {"what": 1}):
        bad = await client.post(f"{BASE}/runs/crons/search", json=query)
        assert bad.status_code == 422, (query, bad.text)
    tid = await thread(client)
    one = (await client.post(f"{BASE}/threads/{tid}/runs/crons", json=cron())).json()
    bad_change = await client.patch(
        f"{BASE}/runs/crons/{one['cron_id']}", json={"schedule": "soon"}
    )
    assert bad_change.status_code == 422
    moved = await client.patch(f"{BASE}/runs/crons/{one['cron_id']}", json={"assistant_id": "x"})
    assert moved.status_code == 422  # a cron's assistant stays


async def test_crons_count_in_the_owners_schedules(client: httpx.AsyncClient) -> None:
    tid = await thread(client)
    for _ in range(10):  # background.schedules_per_owner's default
        made = await client.post(f"{BASE}/threads/{tid}/runs/crons", json=cron())
        assert made.status_code == 200
    over = await client.post(f"{BASE}/threads/{tid}/runs/crons", json=cron())
    assert over.status_code == 409 and over.json()["error"]["code"] == "too_many_schedules"
    assert (await client.post(f"{BASE}/runs/crons/count", json={})).json() == 10


async def test_a_cron_is_a_schedule_of_its_owner(client: httpx.AsyncClient) -> None:
    tid = await thread(client)
    one = (await client.post(f"{BASE}/threads/{tid}/runs/crons", json=cron())).json()
    (listed,) = (await client.get("/v1/schedules")).json()["schedules"]
    assert (listed["id"], listed["mode"], listed["text"]) == (one["cron_id"], "run", "plan my day")
    assert (await client.delete(f"/v1/schedules/{one['cron_id']}")).status_code == 200
    gone = await client.patch(f"{BASE}/runs/crons/{one['cron_id']}", json={"enabled": False})
    assert gone.status_code == 404
    assert (await client.post(f"{BASE}/runs/crons/search", json={})).json() == []


async def test_a_cron_firing_now_is_not_changed(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    tid = await thread(client)
    one = (await client.post(f"{BASE}/threads/{tid}/runs/crons", json=cron())).json()
    schedules = Schedules(runtime.store)
    stored = await schedules.store.schedule(one["cron_id"])
    assert stored is not None and stored.next_fire is not None
    await schedules.store.claim_schedules("h1", stored.next_fire, timedelta(seconds=60), 1)
    busy = await client.patch(f"{BASE}/runs/crons/{one['cron_id']}", json={"enabled": False})
    assert busy.status_code == 409 and "firing" in busy.json()["error"]["message"]
    held = await schedules.store.schedule(one["cron_id"])
    assert held is not None and dataclasses.replace(held, holder=None).next_fire == stored.next_fire


async def test_another_owners_cron_is_a_404_and_never_listed(callers: Callers) -> None:
    ann, bob = callers.ann, callers.bob
    tid = await thread(ann)
    one = (await ann.post(f"{BASE}/threads/{tid}/runs/crons", json=cron())).json()
    assert (await bob.post(f"{BASE}/threads/{tid}/runs/crons", json=cron())).status_code == 404
    assert (await bob.patch(f"{BASE}/runs/crons/{one['cron_id']}", json={})).status_code == 404
    assert (await bob.delete(f"{BASE}/runs/crons/{one['cron_id']}")).status_code == 404
    assert (await bob.post(f"{BASE}/runs/crons/search", json={})).json() == []
    assert (await bob.post(f"{BASE}/runs/crons/count", json={})).json() == 0
    assert (await ann.post(f"{BASE}/runs/crons/count", json={})).json() == 1
