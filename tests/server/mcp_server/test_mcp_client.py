"""The official ``mcp`` Python client (SDK 2.3, protocol 2026-07-28, and the 2025-11-25
handshake) calling ostinato's agents at ``/mcp`` on a live server, SQLite and
PostgreSQL: a call runs a turn with a tool and streams its text as progress; an approval
ends the call saying what waits and the next call answers it; another owner's
conversation is answered like a missing one; and ostinato itself is the MCP client of
another ostinato (its agent called as a tool by the first server's agent)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitResult

from ostinato.models.scripted import text_step, tool_step
from ostinato.tools.base import ToolContext
from ostinato.tools.mcp import McpClients, McpServerConfig
from ostinato.tools.mcp.tools import McpToolCache, mcp_tools
from tests.server.live_protocols import Live


@asynccontextmanager
async def mcp_client(
    live: Live, who: str = "ann", mode: str = "auto", elicitation: Any = None
) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers=live.headers(who), timeout=30)
    transport = streamable_http_client(f"{live.url}/mcp", http_client=http)
    async with http, Client(transport, mode=mode, cache=None,
                            elicitation_callback=elicitation) as client:  # fmt: skip
        yield client


async def test_an_agent_is_a_tool_its_call_a_turn_with_progress(live: Live) -> None:
    live.model.add(
        tool_step(("calculator", {"expression": "6*7"}), text="Let me see."),
        text_step("It is 42.", chunks=3),
    )
    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with mcp_client(live) as client:
        assert client.protocol_version == "2026-07-28"
        listed = await client.list_tools()
        assert [t.name for t in listed.tools] == ["default"]
        result = await client.call_tool(
            "default", {"message": "what is 6*7?"}, progress_callback=on_progress
        )
    assert not result.is_error
    assert result.content[0].text == "Let me see.\n\nIt is 42."  # type: ignore[union-attr]
    assert result.structured_content["stop_reason"] == "end_turn"
    assert "".join(progress) == "Let me see.It is 42."
    cid = result.structured_content["conversation_id"]
    rows = httpx2.get(f"{live.url}/v1/conversations/{cid}/messages", headers=live.headers())
    assert [r["role"] for r in rows.json()["messages"]][:2] == ["user", "assistant"]


async def test_an_approval_ends_the_call_and_the_next_call_answers_it(live: Live) -> None:
    live.model.add(tool_step(("shell", {"command": "echo via-mcp"})), text_step("Ran it."))
    async with mcp_client(live, mode="legacy") as client:  # the 2025-11-25 handshake
        asked = await client.call_tool("default", {"message": "run it"})
        waiting: dict[str, Any] = asked.structured_content
        assert waiting["waiting"]["approval"]["tool"] == "shell"
        assert "Waiting for your approval: shell" in asked.content[0].text  # type: ignore[union-attr]
        cid = waiting["conversation_id"]
        done = await client.call_tool("default", {"message": "yes", "conversation_id": cid})
    assert done.content[0].text == "Ran it."  # type: ignore[union-attr]
    assert done.structured_content == {
        "stop_reason": "end_turn",
        "conversation_id": cid,
        "text": "Ran it.",
    }


async def test_an_approval_is_an_elicitation_the_client_answers(live: Live) -> None:
    live.model.add(tool_step(("shell", {"command": "echo via-elicitation"})), text_step("Ran it."))
    asked: list[Any] = []

    async def on_elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params)
        return ElicitResult(action="accept", content={"approve": True})

    async with mcp_client(live, elicitation=on_elicit) as client:
        result = await client.call_tool("default", {"message": "run it"})
    (params,) = asked
    assert "Waiting for your approval: shell" in params.message
    assert params.requested_schema["properties"]["approve"]["type"] == "boolean"
    assert result.content[0].text == "Ran it."  # type: ignore[union-attr]
    assert result.structured_content["stop_reason"] == "end_turn"


async def test_a_question_is_an_elicitation_and_declining_dismisses_it(live: Live) -> None:
    card = {"question": "Which colour?", "options": ["red", "blue"]}
    live.model.add(tool_step(("ask_user", card)), text_step("Blue it is."))
    live.model.add(tool_step(("ask_user", card)))

    async def pick_blue(context: Any, params: Any) -> ElicitResult:
        assert params.requested_schema["properties"]["answer"]["enum"] == ["red", "blue"]
        return ElicitResult(action="accept", content={"answer": "blue"})

    async def decline(context: Any, params: Any) -> ElicitResult:
        return ElicitResult(action="decline")

    async with mcp_client(live, elicitation=pick_blue) as client:
        answered = await client.call_tool("default", {"message": "ask me"})
    async with mcp_client(live, elicitation=decline) as client:
        dismissed = await client.call_tool("default", {"message": "ask me again"})
    assert answered.content[0].text == "Blue it is."  # type: ignore[union-attr]
    assert dismissed.structured_content["stop_reason"] == "dismissed"


async def test_another_owners_conversation_is_answered_like_a_missing_one(live: Live) -> None:
    live.model.add(text_step("Ann's answer."))
    async with mcp_client(live) as ann:
        mine = await ann.call_tool("default", {"message": "hello"})
    cid = mine.structured_content["conversation_id"]
    async with mcp_client(live, "bob") as bob:
        theirs = await bob.call_tool("default", {"message": "hi", "conversation_id": cid})
        nobodys = await bob.call_tool("default", {"message": "hi", "conversation_id": "nope"})
    assert theirs.is_error and nobodys.is_error
    assert theirs.content[0].text == f"no conversation with id {cid!r}"  # type: ignore[union-attr]
    assert nobodys.content[0].text == "no conversation with id 'nope'"  # type: ignore[union-attr]


async def test_ostinato_is_the_mcp_client_of_another_ostinato(live: Live) -> None:
    live.model.add(text_step("Delegated answer."))
    config = McpServerConfig("other", url=f"{live.url}/mcp", headers=live.headers())
    clients, lines = McpClients(), []
    try:
        (tool,) = await mcp_tools(config, cache=McpToolCache(), clients=clients)
        assert tool.name == "other_default"
        context = ToolContext("c", "t", "r", "u", progress=lines.append)
        out = await tool.run({"message": "please answer"}, context)  # as a turn's loop does
    finally:
        await clients.aclose()
    assert "Delegated answer." in str(out)
    assert [line.endswith("Delegated answer.") for line in lines] == [True]  # its progress
