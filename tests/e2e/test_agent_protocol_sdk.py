"""The official ``langgraph-sdk`` Python client against a real ``ostinato serve`` (the
offline model, which calls the tool a ``/tool NAME {json}`` message names) on SQLite and
PostgreSQL, its URL naming ``/langgraph``: a thread with a tool call (streamed as
values, message chunks and updates), an interrupt (an approval) answered by a resume
command, a run waited on, a background run joined, a cancelled run, a stream joined
again with ``Last-Event-ID``, and a copied thread."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client

from tests.e2e.hostile import serving

pytestmark = pytest.mark.parametrize("engine", ["sqlite", "postgres"])


def ask(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def tool(name: str, arguments: dict[str, str]) -> str:
    return f"/tool {name} {json.dumps(arguments)}"


async def conversation(url: str) -> None:
    client = get_client(url=f"{url}/langgraph")
    assistants = await client.assistants.search()
    assert assistants[0]["assistant_id"] == "ostinato"
    thread = await client.threads.create(metadata={"project": "e2e"})
    tid = thread["thread_id"]
    parts = [
        part
        async for part in client.runs.stream(
            tid,
            "ostinato",
            input=ask(tool("calculator", {"expression": "6*7"})),
            stream_mode=["values", "messages-tuple", "updates"],
        )
    ]
    events = [p.event for p in parts]
    assert events[0] == "metadata" and "messages" in events and "updates" in events
    last = [p.data for p in parts if p.event == "values"][-1]["messages"]
    assert [m["type"] for m in last] == ["human", "ai", "tool", "ai"]
    assert "42" in last[-1]["content"] and last[1]["tool_calls"][0]["name"] == "calculator"
    chunks = "".join(
        p.data[0]["content"]
        for p in parts
        if p.event == "messages"
        and p.data[0]["type"] == "AIMessageChunk"
        and p.data[0]["id"] == last[-1]["id"]
    )
    assert chunks == last[-1]["content"]  # the chunks add up to the message they became

    asked = [
        p
        async for p in client.runs.stream(
            tid,
            "ostinato",
            input=ask(tool("shell", {"command": "echo via-langgraph"})),
            stream_mode="updates",
        )
    ]
    (interrupt,) = next(
        p.data["__interrupt__"]
        for p in asked
        if isinstance(p.data, dict) and "__interrupt__" in p.data
    )
    assert interrupt["value"]["type"] == "approval" and interrupt["value"]["tool"] == "shell"
    state = await client.threads.get_state(tid)
    assert state["interrupts"][0]["id"] == interrupt["id"] and state["next"] == ["agent"]
    resumed = await client.runs.wait(tid, "ostinato", command={"resume": True})
    assert "via-langgraph" in resumed["messages"][-2]["content"]

    waited = await client.runs.wait(tid, "ostinato", input=ask("hello"))
    assert waited["messages"][-1]["type"] == "ai"
    background = await client.runs.create(tid, "ostinato", input=ask(tool("clock", {})))
    joined = await client.runs.join(tid, background["run_id"])
    assert joined["messages"][-1]["type"] == "ai"
    assert (await client.runs.get(tid, background["run_id"]))["status"] == "success"

    held = [
        p
        async for p in client.runs.stream(
            tid,
            "ostinato",
            input=ask(tool("shell", {"command": "echo held"})),
            stream_mode="updates",
        )
    ]
    held_id = held[0].data["run_id"]
    assert (await client.runs.get(tid, held_id))["status"] == "interrupted"  # it waits
    await client.runs.cancel(tid, held_id)
    assert (await client.runs.get(tid, held_id))["status"] == "interrupted"
    assert (await client.threads.get(tid))["status"] == "idle"  # nothing waits any more

    streamed = [
        p
        async for p in client.runs.stream(
            tid,
            "ostinato",
            input=ask(tool("calculator", {"expression": "2+2"})),
            stream_mode="values",
        )
    ]
    run_id = streamed[0].data["run_id"]
    first_id = next(p.id for p in streamed if p.event == "values" and p.id)
    again = [
        p
        async for p in client.runs.join_stream(
            tid, run_id, last_event_id=first_id, stream_mode="values"
        )
    ]
    values = [p for p in again if p.event == "values"]
    later = [p for p in streamed if p.event == "values" and p.id and int(p.id) > int(first_id)]
    assert [p.id for p in values] == [p.id for p in later]
    assert values[-1].data == later[-1].data
    found = await client.threads.search(metadata={"project": "e2e"})
    assert [t["thread_id"] for t in found] == [tid]
    await client.threads.copy(tid)  # the SDK returns nothing; the copy is found by search
    copies = [t for t in await client.threads.search(metadata={"project": "e2e"})]
    (copy,) = [t for t in copies if t["thread_id"] != tid]
    copied = (await client.threads.get_state(copy["thread_id"]))["values"]["messages"]
    original = (await client.threads.get_state(tid))["values"]["messages"]
    assert [m["content"] for m in copied] == [m["content"] for m in original]
    await client.store.put_item(["prefs", "ann"], "colour", {"likes": "blue", "n": 1})
    await client.store.put_item(["prefs", "ann", "food"], "tea", {"likes": "tea", "n": 2})
    item = await client.store.get_item(["prefs", "ann"], "colour")
    assert item is not None and item["value"] == {"likes": "blue", "n": 1}
    under = await client.store.search_items(["prefs"], filter={"n": 2})
    assert [i["key"] for i in under["items"]] == ["tea"]
    spaces = await client.store.list_namespaces(prefix=["prefs"])
    assert spaces["namespaces"] == [["prefs", "ann"], ["prefs", "ann", "food"]]
    await client.store.delete_item(["prefs", "ann"], "colour")
    assert [i["key"] for i in (await client.store.search_items(["prefs"]))["items"]] == ["tea"]


def test_the_langgraph_python_client_runs_a_conversation(engine: str, tmp_path: Path) -> None:
    with serving(engine, tmp_path) as server:
        asyncio.run(conversation(server.url))
