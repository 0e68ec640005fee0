"""``/v1/jobs`` in keys mode: the owner sees each job's settings and state, and the runs a
job made for them (what changed, the calls and tokens); another owner sees none of it
and gets a 404 for one of the first owner's runs."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest

from ostinato.background.jobs import JobRunner
from ostinato.background.registry import default_jobs
from ostinato.config.background import EpisodesSection, JobSection, JobsSection, LapseSection
from ostinato.identity.keys import create_key
from ostinato.identity.settings import AuthSettings
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.base import utcnow
from ostinato.store.memory import MemoryStore

Clients = tuple[Runtime, httpx.AsyncClient, httpx.AsyncClient]
SETTINGS = JobsSection(
    consolidate=JobSection(enabled=False),
    lapse=LapseSection(enabled=False),
    episodes=EpisodesSection(calls_per_day=3),
)


@pytest.fixture
async def clients() -> AsyncIterator[Clients]:
    store = MemoryStore()
    model = ScriptedModel([text_step("Noted.")])
    runtime = Runtime(store, model=model)
    app = create_app(runtime, auth=AuthSettings(mode="keys", key_cache_s=0))
    app.state.jobs_settings = SETTINGS
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
        yield runtime, ann, bob
    await app.state.ostinato.aclose()
    await runtime.close()


async def test_the_owner_sees_the_runs_and_another_owner_nothing(clients: Clients) -> None:
    runtime, ann, bob = clients
    cid = (await ann.post("/v1/conversations")).json()["id"]
    await runtime.run_turn(cid, "I must call the bank on Friday")
    later = utcnow() + timedelta(minutes=16)
    runner = JobRunner(
        runtime.store,
        default_jobs(SETTINGS),
        SETTINGS,
        model=ScriptedModel([text_step("Ann planned to call the bank.")]),
        clock=lambda: later,
    )
    (run,) = await runner.tick()
    page = (await ann.get("/v1/jobs")).json()
    # The run is counted on the runner's day (16 minutes ahead); the page counts today's
    # calls by the real clock, so in the last 16 minutes of a UTC day it shows none yet.
    same_day = later.date() == utcnow().date()
    assert [j["name"] for j in page["jobs"]] == ["consolidate", "lapse", "episodes"]
    episodes = page["jobs"][2]
    assert (episodes["enabled"], episodes["idle_minutes"], episodes["calls_per_day"]) == (
        True,
        15,
        3,
    )
    assert episodes["calls_today"] == (1 if same_day else 0)
    assert episodes["last_run_at"] is not None
    (shown,) = page["runs"]
    assert shown["id"] == run.id and shown["model_calls"] == 1 and shown["tokens"] > 0
    assert shown["changes"][0]["action"] == "episode"
    assert "bank" in shown["changes"][0]["text"]
    assert (await ann.get(f"/v1/jobs/runs/{run.id}")).json() == shown
    assert (await bob.get("/v1/jobs")).json()["runs"] == []
    refused = await bob.get(f"/v1/jobs/runs/{run.id}")
    assert refused.status_code == 404
    missing = await bob.get("/v1/jobs/runs/nope")
    assert (
        missing.json()["error"]["message"].replace("nope", run.id)
        == (refused.json()["error"]["message"])
    )
    rows = await runtime.store.list_messages(cid)
    assert [r.role for r in rows] == ["user", "assistant"]  # the job wrote no chat row
