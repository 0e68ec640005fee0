"""The official ``openai`` SDK (``client.responses``) and the OpenAI Agents SDK (its
Responses model, ``OpenAIResponsesModel``) against a real ``ostinato serve`` (the
offline model, which calls the tool a ``/tool NAME {json}`` message names) on SQLite and
PostgreSQL: a conversation with a tool, an approval, ``previous_response_id`` (from the
newest response, and from an earlier one, which forks) and background mode (polled,
then its stream resumed after an event)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import openai
import pytest
from agents import (
    Agent,
    HostedMCPTool,
    ModelSettings,
    OpenAIResponsesModel,
    Runner,
    set_tracing_disabled,
)

from tests.e2e.hostile import serving

pytestmark = pytest.mark.parametrize("engine", ["sqlite", "postgres"])
set_tracing_disabled(True)


def tool(name: str, arguments: dict[str, str]) -> str:
    return f"/tool {name} {json.dumps(arguments)}"


def test_the_openai_sdk_runs_a_conversation_through_responses(engine: str, tmp_path: Path) -> None:
    with serving(engine, tmp_path) as server:
        client = openai.OpenAI(base_url=f"{server.url}/openai/v1", api_key="unused")
        first = client.responses.create(
            model="ostinato", input=tool("calculator", {"expression": "6*7"})
        )
        assert first.status == "completed" and "42" in first.output_text
        (call,) = [item for item in first.output if item.type == "mcp_call"]
        assert call.name == "calculator" and call.status == "completed"
        with client.responses.stream(
            model="ostinato",
            input=tool("shell", {"command": "echo from-the-sdk"}),
            previous_response_id=first.id,
        ) as stream:
            asked = stream.get_final_response()
        (request,) = [item for item in asked.output if item.type == "mcp_approval_request"]
        assert request.name == "shell"
        approved = client.responses.create(
            model="ostinato",
            previous_response_id=asked.id,
            input=[
                {
                    "type": "mcp_approval_response",
                    "approval_request_id": request.id,
                    "approve": True,
                }
            ],
        )
        ran = [item for item in approved.output if item.type == "mcp_call"]
        assert ran[0].approval_request_id == request.id and "from-the-sdk" in (ran[0].output or "")
        background = client.responses.create(
            model="ostinato",
            input=tool("calculator", {"expression": "2**10"}),
            previous_response_id=approved.id,
            background=True,
        )
        assert background.status in ("queued", "in_progress", "completed")
        polled = background
        for _ in range(600):
            if polled.status == "completed":
                break
            time.sleep(0.05)
            polled = client.responses.retrieve(background.id)
        assert polled.status == "completed" and "1024" in polled.output_text
        events = list(client.responses.retrieve(background.id, stream=True))
        middle = events[len(events) // 2].sequence_number
        resumed = list(client.responses.retrieve(background.id, stream=True, starting_after=middle))
        assert [e.sequence_number for e in resumed] == [
            e.sequence_number for e in events if e.sequence_number > middle
        ]
        assert resumed[-1].type == "response.completed"
        assert resumed[-1].response.output_text == polled.output_text
        fork = client.responses.create(
            model="ostinato",
            input=tool("calculator", {"expression": "3*3"}),
            previous_response_id=first.id,  # not the newest: the conversation forks
        )
        assert "9" in fork.output_text and fork.conversation == first.conversation
        assert "1024" in client.responses.retrieve(background.id).output_text
        held = client.conversations.create(items=[{"role": "user", "content": "remember 7"}])
        answer = client.responses.create(model="ostinato", input="hi", conversation=held.id)
        assert answer.conversation is not None and answer.conversation.id == held.id
        said = [i.content[0].text for i in client.conversations.items.list(held.id, order="asc")]
        assert said[:2] == ["remember 7", "hi"]
        native = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused")
        with pytest.raises(openai.BadRequestError, match="/openai/v1"):
            native.conversations.create()


def test_the_agents_sdk_runs_a_conversation_through_responses(engine: str, tmp_path: Path) -> None:
    with serving(engine, tmp_path) as server:
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="unused")
        asked: list[str] = []

        def approve(request: object) -> dict[str, bool]:
            asked.append(request.data.name)  # type: ignore[attr-defined]
            return {"approve": True}

        ostinato = HostedMCPTool(
            tool_config={
                "type": "mcp",
                "server_label": "ostinato",
                "server_url": "ostinato:",
                "require_approval": "always",
            },
            on_approval_request=approve,  # type: ignore[arg-type]
        )
        model = OpenAIResponsesModel(model="ostinato", openai_client=client)
        agent = Agent(name="assistant", model=model, tools=[ostinato])
        background = agent.clone(model_settings=ModelSettings(extra_args={"background": True}))

        async def run() -> None:
            first = await Runner.run(agent, tool("calculator", {"expression": "6*7"}))
            assert "42" in first.final_output
            second = await Runner.run(
                agent,
                tool("shell", {"command": "echo from-the-agent"}),
                previous_response_id=first.last_response_id,
            )
            assert asked == ["shell"] and "from-the-agent" in second.final_output
            streamed = Runner.run_streamed(
                background,
                tool("calculator", {"expression": "3*3"}),
                previous_response_id=second.last_response_id,
            )
            async for _ in streamed.stream_events():
                pass
            assert "9" in streamed.final_output
            stored = await client.responses.retrieve(str(streamed.last_response_id))
            assert stored.background is True and stored.status == "completed"
            assert stored.previous_response_id == second.last_response_id

        asyncio.run(run())
