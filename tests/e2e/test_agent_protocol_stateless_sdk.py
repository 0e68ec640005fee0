"""Stateless runs (no thread) with the official ``langgraph-sdk`` Python client against a
real ``ostinato serve`` (the offline model) on SQLite and PostgreSQL: ``runs.stream(None,
...)`` streams the answer and its thread is gone once it ends; ``runs.wait(None, ...)``
answers the final values, its thread kept with ``on_completion="keep"`` and gone by
default; ``runs.create(None, ...)`` names its thread and is joined there; an interrupt
ends a stateless run, its thread deleted with it, or kept and resumed there."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import NotFoundError
from langgraph_sdk.schema import RunCreateMetadata

from tests.e2e.hostile import serving

pytestmark = pytest.mark.parametrize("engine", ["sqlite", "postgres"])


def ask(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def tool(name: str, arguments: dict[str, str]) -> str:
    return f"/tool {name} {json.dumps(arguments)}"


async def gone(client: LangGraphClient, tid: str) -> None:
    """Wait (up to a minute: the machine may be loaded) until the thread is deleted."""
    for _ in range(300):
        try:
            await client.threads.get(tid)
        except NotFoundError:
            listed = [t["thread_id"] for t in await client.threads.search(limit=100)]
            assert tid not in listed
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"thread {tid} was never deleted")


async def streamed_and_waited(client: LangGraphClient) -> None:
    made: list[RunCreateMetadata] = []
    parts = [
        p
        async for p in client.runs.stream(
            None,
            "ostinato",
            input=ask(tool("calculator", {"expression": "6*7"})),
            stream_mode=["messages-tuple", "values"],
            on_run_created=made.append,
        )
    ]
    assert parts[0].event == "metadata" and parts[0].data["run_id"] == made[0]["run_id"]
    last = [p.data for p in parts if p.event == "values"][-1]["messages"]
    assert [m["type"] for m in last] == ["human", "ai", "tool", "ai"] and "42" in last[-1][
        "content"
    ]
    chunks = [p for p in parts if p.event == "messages" and p.data[0]["type"] == "AIMessageChunk"]
    assert "".join(p.data[0]["content"] for p in chunks if p.data[0]["id"] == last[-1]["id"])
    assert made[0]["thread_id"] is not None
    await gone(client, made[0]["thread_id"])

    kept: list[RunCreateMetadata] = []
    values = await client.runs.wait(
        None, "ostinato", input=ask("hello"), on_completion="keep", on_run_created=kept.append
    )
    assert isinstance(values, dict) and values["messages"][-1]["type"] == "ai"
    tid = kept[0]["thread_id"]
    assert tid is not None
    assert [t["thread_id"] for t in await client.threads.search(limit=100)] == [tid]
    state = await client.threads.get_state(tid)
    held = state["values"]
    assert isinstance(held, dict) and held["messages"] == values["messages"]

    dropped: list[RunCreateMetadata] = []
    once = await client.runs.wait(
        None, "ostinato", input=ask("once"), on_run_created=dropped.append
    )
    assert isinstance(once, dict) and once["messages"][-1]["type"] == "ai"
    assert dropped[0]["thread_id"] is not None
    await gone(client, dropped[0]["thread_id"])


async def created_and_interrupted(client: LangGraphClient) -> None:
    run = await client.runs.create(None, "ostinato", input=ask("later"), on_completion="keep")
    joined = await client.runs.join(run["thread_id"], run["run_id"])
    assert isinstance(joined, dict) and joined["messages"][-1]["type"] == "ai"
    assert (await client.runs.get(run["thread_id"], run["run_id"]))["status"] == "success"
    background = await client.runs.create(None, "ostinato", input=ask("and go"))
    await gone(client, background["thread_id"])

    made: list[RunCreateMetadata] = []
    asked = [
        p
        async for p in client.runs.stream(
            None,
            "ostinato",
            input=ask(tool("shell", {"command": "echo stateless"})),
            stream_mode="updates",
            on_run_created=made.append,
        )
    ]
    assert any(isinstance(p.data, dict) and "__interrupt__" in p.data for p in asked)
    assert asked[-1].event == "end"
    assert made[0]["thread_id"] is not None
    await gone(client, made[0]["thread_id"])  # with what waited in it

    kept: list[RunCreateMetadata] = []
    waited = await client.runs.wait(
        None,
        "ostinato",
        input=ask(tool("shell", {"command": "echo kept"})),
        on_completion="keep",
        on_run_created=kept.append,
    )
    assert isinstance(waited, dict)
    (interrupt,) = waited["__interrupt__"]
    assert interrupt["value"]["tool"] == "shell"
    tid = kept[0]["thread_id"]
    assert tid is not None
    resumed = await client.runs.wait(tid, "ostinato", command={"resume": True})
    assert isinstance(resumed, dict) and "kept" in resumed["messages"][-2]["content"]


def test_stateless_runs_with_the_langgraph_python_client(engine: str, tmp_path: Path) -> None:
    with serving(engine, tmp_path) as server:
        client = get_client(url=f"{server.url}/langgraph")
        asyncio.run(streamed_and_waited(client))
        client = get_client(url=f"{server.url}/langgraph")
        asyncio.run(created_and_interrupted(client))
