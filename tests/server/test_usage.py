"""``GET /v1/usage`` and ``GET /v1/admin/usage``: each owner sees their own calls by day,
model and agent and their budget; unknown prices are unknown, never zero; only an admin
sees every owner."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from ostinato.identity.keys import create_key
from ostinato.identity.settings import AuthSettings
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.observe import prices
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.spend.gate import SpendGate
from ostinato.spend.limits import Budgets
from ostinato.spend.rule import Limit
from ostinato.store.base import utcnow
from ostinato.store.memory import MemoryStore

Clients = tuple[Runtime, dict[str, httpx.AsyncClient]]
PRICED, FREE = "scripted:priced", "scripted:free"


@pytest.fixture(autouse=True)
def priced() -> Iterator[None]:
    prices.configure({PRICED: prices.Price(input=10.0, output=10.0)})
    yield
    prices.configure({})


@pytest.fixture
async def clients() -> AsyncIterator[Clients]:
    store = MemoryStore()
    runtime = Runtime(store, model=ScriptedModel([], name=PRICED))
    runtime.spend = SpendGate(store, Budgets(owners={"ann": Limit(soft=1.0, hard=2.0)}))
    auth = AuthSettings(mode="keys", key_cache_s=0, admins=["root"])
    app = create_app(runtime, auth=auth)
    transport = httpx.ASGITransport(app=app)
    async with contextlib.AsyncExitStack() as stack:
        found = {}
        for who in ("ann", "bob", "root"):
            key = (await create_key(store, who, "test"))[1]
            found[who] = await stack.enter_async_context(
                httpx.AsyncClient(
                    transport=transport,
                    base_url="http://test",
                    headers={"authorization": f"Bearer {key}"},
                )
            )
        yield runtime, found
    await app.state.ostinato.aclose()
    await runtime.close()


async def turn(runtime: Runtime, client: httpx.AsyncClient, model: str, text: str) -> None:
    cid = (await client.post("/v1/conversations")).json()["id"]
    scripted = ScriptedModel([text_step(text)], name=model)
    assert (await runtime.run_turn(cid, "hello", model=scripted)).stop_reason == "end_turn"


async def test_each_owner_sees_their_own_calls_and_budget(clients: Clients) -> None:
    runtime, c = clients
    await turn(runtime, c["ann"], PRICED, "one")
    await turn(runtime, c["ann"], PRICED, "two")
    await turn(runtime, c["bob"], FREE, "three")
    ann = (await c["ann"].get("/v1/usage")).json()
    today = utcnow().date().isoformat()
    assert ann["owner"] == "ann" and ann["currency"] == "USD" and ann["until"] == today
    assert ann["total"]["calls"] == 2 and ann["total"]["unpriced_calls"] == 0
    assert ann["total"]["cost_usd"] > 0
    assert [d["day"] for d in ann["days"]] == [today]
    assert [(m["model"], m["calls"]) for m in ann["models"]] == [(PRICED, 2)]
    assert [(a["agent"], a["calls"]) for a in ann["agents"]] == [("default", 2)]
    (budget,) = ann["budgets"]
    assert (budget["applies_to"], budget["period"], budget["soft_usd"], budget["hard_usd"]) == (
        "owner",
        "day",
        1.0,
        2.0,
    )
    assert budget["spent_usd"] == pytest.approx(ann["total"]["cost_usd"])
    assert budget["since"] == today and budget["resets_at"] > today
    bob = (await c["bob"].get("/v1/usage")).json()
    assert bob["total"]["calls"] == 1 and bob["budgets"] == []  # no limit for bob
    # a model with no price: its cost is unknown, never zero
    assert bob["total"]["cost_usd"] is None and bob["total"]["unpriced_calls"] == 1
    assert bob["total"]["priced_cost_usd"] == 0.0
    assert bob["models"][0]["cost_usd"] is None


async def test_a_span_of_days_is_checked(clients: Clients) -> None:
    _, c = clients
    reversed_days = await c["ann"].get(
        "/v1/usage", params={"since": "2026-12-05", "until": "2026-12-01"}
    )
    assert reversed_days.status_code == 422
    assert "after" in reversed_days.json()["error"]["message"]
    too_long = await c["ann"].get(
        "/v1/usage", params={"since": "2025-01-01", "until": "2026-12-01"}
    )
    assert too_long.status_code == 422
    not_a_day = await c["ann"].get("/v1/usage", params={"since": "yesterday"})
    assert not_a_day.status_code == 422
    for number in ("0", "1700000000"):  # not taken as a Unix time
        assert (await c["ann"].get("/v1/usage", params={"until": number})).status_code == 422
    empty = (
        await c["ann"].get("/v1/usage", params={"since": "2020-01-01", "until": "2020-01-31"})
    ).json()
    assert empty["total"]["calls"] == 0 and empty["total"]["cost_usd"] == 0.0


async def test_only_an_admin_sees_every_owner(clients: Clients) -> None:
    runtime, c = clients
    await turn(runtime, c["ann"], PRICED, "one")
    await turn(runtime, c["bob"], FREE, "two")
    refused = await c["bob"].get("/v1/admin/usage")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    seen = (await c["root"].get("/v1/admin/usage")).json()
    owners = {o["owner"]: o for o in seen["owners"]}
    assert set(owners) == {"ann", "bob"}
    assert owners["ann"]["budget"]["hard_usd"] == 2.0 and owners["bob"]["budget"] is None
    assert owners["bob"]["cost_usd"] is None
    assert seen["total"]["calls"] == 2 and seen["total"]["cost_usd"] is None
    assert seen["pools"] == []  # no shared limit set


async def test_in_mode_none_the_local_owner_is_the_admin() -> None:
    runtime = Runtime(MemoryStore(), model=ScriptedModel([]))
    app = create_app(runtime)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        assert (await c.get("/v1/admin/usage")).status_code == 200
        assert (await c.get("/v1/usage")).json()["total"]["calls"] == 0
    await app.state.ostinato.aclose()
    await runtime.close()
