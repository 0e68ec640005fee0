"""The Agent Protocol under ``/langgraph`` against the app in memory, on every store
engine: what it refuses, each with a clear error (stream modes it has no counterpart
for, ``rollback``, a checkpoint that is not the thread's newest, writing its state,
choosing a thread's id, a resume when nothing waits); a run that names the thread's
newest checkpoint, as ``useStream`` does; and a copied thread."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ostinato.models.scripted import ScriptedModel, text_step
from tests.server.people import client_for

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


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({"stream_mode": "events"}, "LangChain callback events"),
        ({"stream_mode": ["values", "debug"]}, "debug"),
        ({"multitask_strategy": "rollback"}, "rollback"),
        ({"interrupt_before": ["agent"]}, "interrupt_before"),
        ({"checkpoint_id": "99"}, "branch"),
        ({"command": {"resume": True}}, "not both"),
    ],
)
async def test_what_has_no_counterpart_is_refused_clearly(
    client: httpx.AsyncClient, extra: dict[str, Any], said: str
) -> None:
    tid = (await client.post(f"{BASE}/threads", json={})).json()["thread_id"]
    refused = await client.post(f"{BASE}/threads/{tid}/runs/wait", json=run(**extra))
    assert refused.status_code == 422, refused.text
    assert said in refused.json()["error"]["message"]


async def test_a_thread_cannot_be_written_or_named(client: httpx.AsyncClient) -> None:
    tid = (await client.post(f"{BASE}/threads", json={})).json()["thread_id"]
    refused = await client.post(f"{BASE}/threads/{tid}/state", json={"values": {}})
    assert refused.status_code == 422
    named = await client.post(f"{BASE}/threads", json={"thread_id": "mine"})
    assert named.status_code == 422 and "thread_id" in named.json()["error"]["message"]
    resume = {"assistant_id": "ostinato", "command": {"resume": True}}
    nothing = await client.post(f"{BASE}/threads/{tid}/runs/wait", json=resume)
    assert nothing.status_code == 409
    unknown = await client.post(
        f"{BASE}/threads/{tid}/runs/wait", json={**run(), "assistant_id": "x"}
    )
    assert unknown.status_code == 404


async def test_a_run_from_the_newest_checkpoint_continues_the_thread(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(text_step("one"), text_step("two"))
    tid = (await client.post(f"{BASE}/threads", json={})).json()["thread_id"]
    first = await client.post(f"{BASE}/threads/{tid}/runs/wait", json=run("a"))
    assert first.json()["messages"][-1]["content"] == "one"
    (state,) = (await client.post(f"{BASE}/threads/{tid}/history", json={"limit": 10})).json()
    checkpoint = {k: v for k, v in state["checkpoint"].items() if k != "thread_id"}
    second = await client.post(
        f"{BASE}/threads/{tid}/runs/wait", json=run("b", checkpoint=checkpoint)
    )
    assert [m["content"] for m in second.json()["messages"]] == ["a", "one", "b", "two"]
    stale = await client.post(
        f"{BASE}/threads/{tid}/runs/wait", json=run("c", checkpoint=checkpoint)
    )
    assert stale.status_code == 422


async def test_a_copy_holds_the_thread_and_goes_its_own_way(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(text_step("one"), text_step("two"), text_step("three"))
    made = await client.post(f"{BASE}/threads", json={"metadata": {"project": "p"}})
    tid = made.json()["thread_id"]
    await client.post(f"{BASE}/threads/{tid}/runs/wait", json=run("a"))
    copied = await client.post(f"{BASE}/threads/{tid}/copy")
    assert copied.status_code == 200
    copy = copied.json()
    assert copy["thread_id"] != tid and copy["metadata"]["project"] == "p"
    assert [m["content"] for m in copy["values"]["messages"]] == ["a", "one"]
    await client.post(f"{BASE}/threads/{copy['thread_id']}/runs/wait", json=run("b"))
    await client.post(f"{BASE}/threads/{tid}/runs/wait", json=run("c"))
    mine = (await client.get(f"{BASE}/threads/{tid}/state")).json()["values"]["messages"]
    theirs = (await client.get(f"{BASE}/threads/{copy['thread_id']}/state")).json()
    assert [m["content"] for m in mine] == ["a", "one", "c", "three"]
    assert [m["content"] for m in theirs["values"]["messages"]] == ["a", "one", "b", "two"]
    missing = await client.post(f"{BASE}/threads/nope/copy")
    assert missing.status_code == 404
