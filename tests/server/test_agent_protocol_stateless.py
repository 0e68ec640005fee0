"""Stateless runs of the Agent Protocol (``/langgraph/runs/...`` without a thread) against
the app in memory, on every store engine: each runs in a new thread of the caller's,
deleted once the run has ended (``on_completion: "delete"``, the default) or kept
(``"keep"``); what a thread's run refuses is refused before a thread is made; a resume
is refused (a new thread has nothing waiting); another owner never sees a kept thread;
the owner's limits refuse one as they refuse a run in a thread, leaving no thread."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ostinato.identity.keys import create_key
from ostinato.identity.settings import AuthSettings, LimitSettings
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from tests.server.conftest import Callers
from tests.server.people import client_for, eventually

BASE = "/langgraph"


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app) as client:
        yield client


def run(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {
        "assistant_id": "ostinato",
        "input": {"messages": [{"role": "user", "content": text}]},
        **extra,
    }


async def threads(client: httpx.AsyncClient) -> list[str]:
    found = (await client.post(f"{BASE}/threads/search", json={"limit": 100})).json()
    return [t["thread_id"] for t in found]


def events(body: str) -> list[str]:
    return [line[7:] for line in body.splitlines() if line.startswith("event: ")]


async def test_a_streamed_run_has_a_thread_of_its_own_until_it_ends(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(text_step("hello there"))
    answer = await client.post(
        f"{BASE}/runs/stream", json=run(stream_mode=["values", "messages-tuple"])
    )
    assert answer.status_code == 200, answer.text
    assert events(answer.text)[0] == "metadata" and events(answer.text)[-1] == "end"
    assert '"content":"hello there"' in answer.text
    tid = answer.headers["content-location"].split("/")[2]

    async def gone() -> bool:
        return (await client.get(f"{BASE}/threads/{tid}")).status_code == 404

    await eventually(gone)
    assert await threads(client) == []


async def test_a_waited_run_kept_is_a_thread_like_any_other(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(text_step("kept"), text_step("again"))
    answer = await client.post(f"{BASE}/runs/wait", json=run(on_completion="keep"))
    assert answer.status_code == 200, answer.text
    assert [m["type"] for m in answer.json()["messages"]] == ["human", "ai"]
    tid = answer.headers["content-location"].split("/")[2]
    assert await threads(client) == [tid]
    more = await client.post(f"{BASE}/threads/{tid}/runs/wait", json=run("more"))
    assert more.json()["messages"][-1]["content"] == "again"


async def test_a_waited_run_deletes_its_thread_by_default(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(text_step("once"))
    answer = await client.post(f"{BASE}/runs/wait", json=run(on_completion=None))
    assert answer.json()["messages"][-1]["content"] == "once"

    async def none_left() -> bool:
        return await threads(client) == []

    await eventually(none_left)


async def test_a_background_run_names_its_thread_and_is_joined(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(text_step("later"), text_step("deleted"))
    made = await client.post(f"{BASE}/runs", json=run(on_completion="keep"))
    assert made.status_code == 200, made.text
    tid, rid = made.json()["thread_id"], made.json()["run_id"]
    assert made.headers["content-location"] == f"/threads/{tid}/runs/{rid}"
    joined = await client.get(f"{BASE}/threads/{tid}/runs/{rid}/join")
    assert joined.json()["messages"][-1]["content"] == "later"
    assert (await client.get(f"{BASE}/threads/{tid}/runs/{rid}")).json()["status"] == "success"

    other = (await client.post(f"{BASE}/runs", json=run())).json()["thread_id"]

    async def gone() -> bool:
        return (await client.get(f"{BASE}/threads/{other}")).status_code == 404

    await eventually(gone)
    assert await threads(client) == [tid]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({"command": {"resume": True}, "input": None}, "nothing waits"),
        ({"on_completion": "later"}, "on_completion"),
        ({"if_not_exists": "maybe"}, "if_not_exists"),
        ({"stream_mode": "events"}, "LangChain callback events"),
        ({"multitask_strategy": "rollback"}, "rollback"),
        ({"checkpoint_id": "99"}, "branch"),
        ({"assistant_id": "nobody"}, "no assistant"),
    ],
)
async def test_what_a_threads_run_refuses_is_refused_and_leaves_no_thread(
    client: httpx.AsyncClient, extra: dict[str, Any], said: str
) -> None:
    for route in ("runs", "runs/wait", "runs/stream"):
        refused = await client.post(f"{BASE}/{route}", json=run(**extra))
        assert refused.status_code in (404, 422), refused.text
        assert said in refused.json()["error"]["message"]

    batch = await client.post(f"{BASE}/runs/batch", json=[run()])
    assert batch.status_code == 404  # not served

    async def none_left() -> bool:  # a thread made before the refusal goes at once
        return await threads(client) == []

    await eventually(none_left)


async def test_another_owner_never_sees_a_kept_thread(
    callers: Callers, model: ScriptedModel
) -> None:
    model.add(text_step("mine"))
    made = await callers.ann.post(f"{BASE}/runs/wait", json=run(on_completion="keep"))
    tid = made.headers["content-location"].split("/")[2]
    assert (await callers.ann.get(f"{BASE}/threads/{tid}")).status_code == 200
    assert (await callers.bob.get(f"{BASE}/threads/{tid}")).status_code == 404
    assert await threads(callers.bob) == []
    assert (await callers.nobody.post(f"{BASE}/runs/wait", json=run())).status_code == 401


async def test_the_owners_limits_refuse_a_stateless_run_and_leave_no_thread(
    runtime: Runtime, model: ScriptedModel
) -> None:
    limits = LimitSettings(turns_per_minute=1)
    app = create_app(runtime, auth=AuthSettings(mode="keys", limits=limits))
    key = (await create_key(runtime.store, "ann", "t"))[1]
    async with client_for(app) as ann:
        ann.headers["authorization"] = f"Bearer {key}"
        model.add(text_step("one"))
        first = await ann.post(f"{BASE}/runs/wait", json=run(on_completion="keep"))
        assert first.status_code == 200, first.text
        kept = first.headers["content-location"].split("/")[2]
        for route in ("runs", "runs/wait", "runs/stream"):
            refused = await ann.post(f"{BASE}/{route}", json=run(on_completion="keep"))
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["code"] == "limit_exceeded"

        async def only_the_first() -> bool:
            return await threads(ann) == [kept]

        await eventually(only_the_first)
    await app.state.ostinato.aclose()
