"""``policy: "steer"`` over HTTP: a message sent while a turn runs answers at once with
``input.queued`` (``steer: true``), and its stream then follows the running turn, which
shows the message as a user row before its next model call and ends as usual."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.base import Store
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from tests.server.people import client_for, eventually, sse_turn

RELEASE = "release"


@pytest.fixture
async def runtime(store: Store) -> AsyncIterator[Runtime]:
    release = asyncio.Event()

    async def wait(label: str) -> str:
        """Wait for a signal.

        Args:
            label: What is waited for.
        """
        await release.wait()
        return f"done {label}"

    model = ScriptedModel(
        [tool_step(("wait", {"label": "a"})), text_step("Both done."), text_step("Next.")]
    )
    runtime = Runtime(store, model=model, tools=ToolRegistry([function_tool(wait)]))
    runtime.__dict__[RELEASE] = release
    yield runtime
    release.set()
    await runtime.close()


@pytest.fixture
def app(runtime: Runtime) -> FastAPI:
    return create_app(runtime, ping_interval=0.2)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app) as client:
        yield client


async def test_a_steered_stream_follows_the_running_turn_that_takes_it(
    app: FastAPI, runtime: Runtime, conversation_id: str
) -> None:
    async with sse_turn(app, conversation_id, {"text": "start"}) as first:
        head = await first.frames_until("tool.started")
        run_id = head[0].data["run_id"]
        body = {"text": "also this", "client_message_id": "s-1", "policy": "steer"}
        async with sse_turn(app, conversation_id, body) as steered:
            assert steered.status == 200
            queued = await steered.next_frame()
            assert queued.event == "input.queued" and queued.data["steer"] is True
            runtime.__dict__[RELEASE].set()
            rest = await steered.frames_until("turn.finished")
        await first.frames_until("turn.finished")
    assert {e.data["run_id"] for e in rest} == {run_id}
    (user,) = [e.data for e in rest if e.event == "message" and e.data["message"]["role"] == "user"]
    assert user["client_message_id"] == "s-1" and user["message"]["metadata"]["steered"] is True
    assert rest[-1].data["stop_reason"] == "end_turn"


async def test_a_steered_json_request_answers_the_result_of_the_turn_that_took_it(
    app: FastAPI, client: httpx.AsyncClient, runtime: Runtime, conversation_id: str
) -> None:
    async with sse_turn(app, conversation_id, {"text": "start"}) as first:
        await first.frames_until("tool.started")
        url = f"/v1/conversations/{conversation_id}/turns"
        answer = asyncio.ensure_future(client.post(url, json={"text": "more", "policy": "steer"}))

        async def stored() -> bool:
            return bool(await runtime.store.list_queued(conversation_id))

        await eventually(stored)
        runtime.__dict__[RELEASE].set()
        finished = (await first.frames_until("turn.finished"))[-1].data
        body = (await answer).json()
    assert body["run_id"] == finished["run_id"] and body["stop_reason"] == "end_turn"
    assert body["queued_position"] >= 1
    texts = [m["blocks"][0].get("text") for m in body["messages"] if m["role"] == "user"]
    assert texts == ["start", "more"]


async def test_the_policy_steer_is_in_the_openapi_document(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    request = document["components"]["schemas"]["TurnRequest"]["properties"]["policy"]
    assert "steer" in request["enum"]
