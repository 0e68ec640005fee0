"""MCP tasks on a live server (SQLite and PostgreSQL) with the official ``mcp`` client:
a call from a client that declares the extension is a task; it is polled to its result,
an approval it asks is an ``inputRequests`` elicitation answered by ``tasks/update``, it
can be cancelled, and another owner's task is not found. (Two server processes on one
database: tests/e2e/test_mcp_tasks_replicas.py.)"""

from __future__ import annotations

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ostinato.models.scripted import text_step, tool_step
from tests.server.live_protocols import Live
from tests.server.mcp_server.tasks_client import (
    cancel_task,
    get_task,
    start,
    tasks_client,
    until,
    update_task,
)


async def test_a_call_is_a_task_polled_to_its_result(live: Live) -> None:
    live.model.add(
        tool_step(("calculator", {"expression": "6*7"}), text="Let me see."),
        text_step("It is 42."),
    )
    async with tasks_client(live.url, live.headers()) as client:
        created = await start(client, "what is 6*7?")
        assert created.status in ("working", "completed")
        done = await until(client, created.task_id, "completed")
    result = done["result"]
    assert result["content"] == [{"type": "text", "text": "Let me see.\n\nIt is 42."}]
    assert result["structuredContent"]["stop_reason"] == "end_turn"
    assert done["resultType"] == "complete" and done["ttlMs"] is None


async def test_an_approval_is_an_input_request_answered_by_update(live: Live) -> None:
    live.model.add(tool_step(("shell", {"command": "echo via-task"})), text_step("Ran it."))
    async with tasks_client(live.url, live.headers()) as client:
        created = await start(client, "run it")
        waiting = await until(client, created.task_id, "input_required")
        ((key, asked),) = waiting["inputRequests"].items()
        assert asked["method"] == "elicitation/create"
        assert "Waiting for your approval: shell" in asked["params"]["message"]
        await update_task(client.session, created.task_id, {"stale": {"action": "accept"}})
        assert (await get_task(client.session, created.task_id))["status"] == "input_required"
        answer = {"action": "accept", "content": {"approve": True}}
        await update_task(client.session, created.task_id, {key: answer})
        done = await until(client, created.task_id, "completed")
    assert done["result"]["content"][0]["text"] == "Ran it."


async def test_a_task_is_cancelled_and_another_owners_is_not_found(live: Live) -> None:
    live.gate.clear()
    async with tasks_client(live.url, live.headers()) as client:
        created = await start(client, "gated: a long one")
        async with tasks_client(live.url, live.headers("bob")) as bob:
            with pytest.raises(MCPError) as missing:
                await get_task(bob.session, created.task_id)
        assert missing.value.error.code == -32602
        await cancel_task(client.session, created.task_id)
        live.gate.set()
        await until(client, created.task_id, "cancelled")


async def test_a_client_without_the_extension_gets_a_plain_result(live: Live) -> None:
    live.model.add(text_step("Plain."))
    http = httpx2.AsyncClient(headers=live.headers(), timeout=30)
    transport = streamable_http_client(f"{live.url}/mcp", http_client=http)
    async with http, Client(transport, cache=None) as client:
        result = await client.call_tool("default", {"message": "hello"})
        with pytest.raises(MCPError) as refused:
            await get_task(client.session, "anything")
    assert result.content[0].text == "Plain."  # type: ignore[union-attr]
    assert refused.value.error.code == -32021
