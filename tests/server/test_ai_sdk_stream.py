"""``POST /v1/ai-sdk/chat``: the UI message stream's other parts, on every store engine: a
failed turn's error part, reasoning parts, a tool's error output, the ``start`` chunk's
metadata, the ai_sdk filters on the stream (not on the row), and a client that goes away
mid-stream cancelling its turn."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ostinato.errors import ModelError, ToolError
from ostinato.filters import OutputFilters
from ostinato.models.base import Stop, TextDelta, ThinkingDelta, Usage
from ostinato.models.scripted import ScriptedModel, Step, error_step, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.server.surfaces import AgentSurfaces, Surfaces
from ostinato.store.base import Store
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from tests.server.people import client_for, eventually, turn_ended
from tests.server.sse_client import open_stream

URL = "/v1/ai-sdk/chat"


async def fail(reason: str) -> str:
    """A tool that always fails.

    Args:
        reason: What to fail with.
    """
    raise ToolError(f"it broke: {reason}")


@pytest.fixture
async def runtime(store: Store, model: ScriptedModel) -> AsyncIterator[Runtime]:
    tools = ToolRegistry([function_tool(fail, category="action"), *builtin_tools()])
    runtime = Runtime(store, model=model, tools=tools)
    yield runtime
    await runtime.close()


@pytest.fixture
def app(runtime: Runtime) -> FastAPI:
    filters = OutputFilters(drop_phrases=("Great question! ",))
    surfaces = Surfaces({"default": AgentSurfaces({"ai_sdk": filters})}, "default")
    return create_app(runtime, model_name="scripted:model", ping_interval=0.2, surfaces=surfaces)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app) as client:
        yield client


def user(text: str, mid: str = "u1") -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


def chunks(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    events = [e[6:] for e in response.text.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


async def test_a_failed_turn_is_an_error_part_then_finish_error(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(error_step(ModelError("the provider fell over")))
    got = chunks(await client.post(URL, json={"id": "f1", "messages": [user("hi")]}))
    assert got[0] == {"type": "start", "messageId": "msg-f1-1",
                      "messageMetadata": {"conversationId": "f1"}}  # fmt: skip
    error, finish = got[-2:]
    assert error["type"] == "error" and "the provider fell over" in error["errorText"]
    assert finish == {"type": "finish", "finishReason": "error"}


async def test_thinking_is_reasoning_parts_before_the_text(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    events = (ThinkingDelta("Let me "), ThinkingDelta("think."), TextDelta("Four."))
    model.add(Step((*events, Usage(5, 3), Stop("end_turn"))))
    got = chunks(await client.post(URL, json={"id": "r1", "messages": [user("2+2?")]}))
    kinds = [(c["type"], c.get("delta")) for c in got]
    assert kinds == [
        ("start", None), ("start-step", None), ("reasoning-start", None),
        ("reasoning-delta", "Let me "), ("reasoning-delta", "think."), ("text-start", None),
        ("text-delta", "Four."), ("reasoning-end", None), ("text-end", None),
        ("finish-step", None), ("finish", None),
    ]  # fmt: skip
    ids = {c["type"]: c.get("id") for c in got}
    assert ids["reasoning-start"] == ids["reasoning-end"] != ids["text-start"] == ids["text-end"]


async def test_a_tool_that_fails_is_a_tool_output_error(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(tool_step(("fail", {"reason": "on purpose"})), text_step("It failed."))
    got = chunks(await client.post(URL, json={"id": "t1", "messages": [user("try")]}))
    (started,) = [c for c in got if c["type"] == "tool-input-available"]
    (errored,) = [c for c in got if c["type"] == "tool-output-error"]
    assert errored["toolCallId"] == started["toolCallId"] and errored["dynamic"] is True
    assert "it broke: on purpose" in errored["errorText"]
    assert not [c for c in got if c["type"] == "tool-output-available"]
    assert [c["delta"] for c in got if c["type"] == "text-delta"] == ["It failed."]


async def test_the_ai_sdk_filters_apply_to_the_stream_across_deltas_not_to_the_row(
    client: httpx.AsyncClient, store: Store, model: ScriptedModel
) -> None:
    model.add(text_step("Great question! Yes, it is.", chunks=9))  # the phrase is cut in three
    got = chunks(await client.post(URL, json={"id": "p1", "messages": [user("is it?")]}))
    assert "".join(c["delta"] for c in got if c["type"] == "text-delta") == "Yes, it is."
    rows = [m.text for m in await store.list_messages("p1") if m.role == "assistant"]
    assert rows == ["Great question! Yes, it is."]


async def test_a_client_that_goes_away_mid_stream_cancels_its_turn(
    app: FastAPI, store: Store, model: ScriptedModel
) -> None:
    model.add(Step(text_step("word " * 100, chunks=100).events, delay=0.05))
    body = json.dumps({"id": "gone1", "messages": [user("talk")]}).encode()
    headers = {"content-type": "application/json"}
    async with open_stream(app, "POST", URL, headers=headers, body=body) as stream:
        assert stream.status == 200
        assert (await stream.next_event()).data["type"] == "start"
        while (await stream.next_event()).data["type"] != "text-delta":
            pass  # until some text has streamed
    await eventually(lambda: turn_ended(store, "gone1"))
    (turn,) = await store.list_turns("gone1")
    assert turn.stop_reason == "cancelled"
    kept = [m for m in await store.list_messages("gone1") if m.role == "assistant"]
    assert kept and kept[0].text.startswith("word")  # the partial reply is kept
