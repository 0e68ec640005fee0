"""``steer`` beyond ``POST …/turns``: a message sent over the WebSocket with
``"policy": "steer"``, and one sent to ``/v1/chat/completions`` for an agent whose
``completions.policy`` is ``steer``, are taken by the running turn at its next step
boundary (one turn in all); and a turn that takes a steered message and then waits for an
approval keeps the message once, before the call that waits (nothing lost, nothing
doubled), as it does when the message comes while the approval waits (it dismisses it)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import httpx2
import openai
import pytest
from fastapi import FastAPI
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from ostinato.approvals import ApprovalPolicy
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.server.surfaces import AgentSurfaces, Surfaces
from ostinato.store.base import Enqueue, Store, WriteOp
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from tests.server.people import client_for, deploy_tool, eventually, sse_turn
from tests.server.ws_client import open_websocket

HEADER = "x-ostinato-conversation-id"


class Wait:
    """A ``wait`` tool that runs until the test releases it."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def wait(self, label: str) -> str:
        """Wait for a signal.

        Args:
            label: What is waited for.
        """
        self.entered.set()
        await self.release.wait()
        return f"done {label}"


@pytest.fixture
def waiting() -> Wait:
    return Wait()


@pytest.fixture
def deployed() -> list[str]:
    return []


@pytest.fixture
async def runtime(
    store: Store, model: ScriptedModel, waiting: Wait, deployed: list[str]
) -> AsyncIterator[Runtime]:
    tools = ToolRegistry([function_tool(waiting.wait), deploy_tool(deployed)])
    runtime = Runtime(store, model=model, tools=tools, approvals=ApprovalPolicy(timeout=60))
    yield runtime
    waiting.release.set()
    await runtime.close()


@pytest.fixture
def app(runtime: Runtime) -> FastAPI:
    surfaces = Surfaces({"steering": AgentSurfaces(policy="steer")}, "steering")
    return create_app(runtime, model_name="scripted:model", ping_interval=0.2, surfaces=surfaces)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app) as client:
        yield client


async def _rows(store: Store, cid: str) -> list[tuple[str, str, bool]]:
    """(role, text or the kind of block, steered) of every stored row."""
    out: list[tuple[str, str, bool]] = []
    for row in await store.list_messages(cid):
        kind = "tool_use" if row.tool_uses else "tool_result" if row.tool_results else row.text
        out.append((row.role, kind, row.metadata.get("steered") is True))
    return out


async def test_a_message_steered_over_the_websocket_joins_the_running_turn(
    app: FastAPI, store: Store, model: ScriptedModel, waiting: Wait, conversation_id: str
) -> None:
    model.add(tool_step(("wait", {"label": "a"})), text_step("Both done."))
    async with open_websocket(app, f"/v1/conversations/{conversation_id}/ws") as socket:
        await socket.send_json({"type": "message", "text": "start"})
        await socket.until("tool.started")
        steer = {"type": "message", "text": "also this", "policy": "steer"}
        await socket.send_json({**steer, "client_message_id": "w-1"})
        queued = (await socket.until("input.queued"))[-1]
        assert queued["steer"] is True and queued["client_message_id"] == "w-1"
        waiting.release.set()
        frames = await socket.until("turn.finished")
    assert frames[-1]["stop_reason"] == "end_turn"
    (user,) = [f for f in frames if f["type"] == "message" and f["message"]["role"] == "user"]
    assert user["client_message_id"] == "w-1" and user["message"]["metadata"]["steered"]
    assert user["run_id"] == frames[-1]["run_id"]
    assert model.requests[1].messages[-1].text == "also this"
    assert len(await store.list_turns(conversation_id)) == 1
    assert await _rows(store, conversation_id) == [
        ("user", "start", False),
        ("assistant", "tool_use", False),
        ("tool", "tool_result", False),
        ("user", "also this", True),
        ("assistant", "Both done.", False),
    ]


def _said(*texts: str) -> list[ChatCompletionMessageParam]:
    said: list[ChatCompletionMessageParam] = []
    for i, text in enumerate(texts):
        if i % 2:
            said.append({"role": "assistant", "content": text})
        else:
            said.append({"role": "user", "content": text})
    return said


async def test_a_completion_with_policy_steer_is_answered_by_the_running_turn(
    app: FastAPI, store: Store, model: ScriptedModel, waiting: Wait, conversation_id: str
) -> None:
    """With the official ``openai`` SDK (its own HTTP client, driving the app in process)."""
    model.add(tool_step(("wait", {"label": "a"})), text_step("Both done."))
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as http:
        sdk = openai.AsyncOpenAI(
            base_url="http://test/v1", api_key="k", http_client=http, max_retries=0
        )
        headers = {HEADER: conversation_id}

        def ask(*texts: str) -> asyncio.Future[ChatCompletion]:
            made = sdk.chat.completions.create(
                model="ostinato", messages=_said(*texts), extra_headers=headers
            )
            return asyncio.ensure_future(made)

        first = ask("start")
        await asyncio.wait_for(waiting.entered.wait(), 5)
        second = ask("start", "", "also this")

        async def queued() -> bool:
            return bool(await store.list_queued(conversation_id))

        await eventually(queued)
        waiting.release.set()
        answers = [await asyncio.wait_for(r, 10) for r in (first, second)]
    assert [a.choices[0].message.content for a in answers] == ["Both done.", "Both done."]
    assert len(await store.list_turns(conversation_id)) == 1  # one turn answered both
    assert model.requests[1].messages[-1].text == "also this"
    assert [r for r in await _rows(store, conversation_id) if r[2]] == [("user", "also this", True)]


async def test_a_steered_message_stays_once_when_the_turn_then_waits_for_an_approval(
    app: FastAPI,
    client: httpx.AsyncClient,
    store: Store,
    model: ScriptedModel,
    waiting: Wait,
    deployed: list[str],
    conversation_id: str,
) -> None:
    model.add(
        tool_step(("wait", {"label": "a"})),
        tool_step(("deploy", {"target": "prod"})),  # after the steered row: asks first
        text_step("Deployed."),
    )
    body = {"text": "also deploy", "policy": "steer", "client_message_id": "s-1"}
    async with sse_turn(app, conversation_id, {"text": "start"}) as first:
        await first.frames_until("tool.started")
        async with sse_turn(app, conversation_id, body) as steered:
            assert (await steered.next_frame()).event == "input.queued"
            waiting.release.set()
            asked = (await first.frames_until("approval.requested"))[-1].data
            assert await store.list_queued(conversation_id) == []  # taken before the ask
            path = f"/v1/conversations/{conversation_id}/approvals/{asked['approval_id']}"
            assert (await client.post(path, json={"decision": "approve"})).status_code == 200
            rest = await steered.frames_until("turn.finished")
        await first.frames_until("turn.finished")
    assert rest[-1].data["stop_reason"] == "end_turn" and deployed == ["prod"]
    assert len(await store.list_turns(conversation_id)) == 1
    assert await _rows(store, conversation_id) == [
        ("user", "start", False),
        ("assistant", "tool_use", False),
        ("tool", "tool_result", False),
        ("user", "also deploy", True),
        ("assistant", "tool_use", False),
        ("tool", "tool_result", False),
        ("assistant", "Deployed.", False),
    ]


async def test_a_message_steered_while_an_approval_waits_dismisses_it_and_joins_the_turn(
    app: FastAPI, store: Store, model: ScriptedModel, deployed: list[str], conversation_id: str
) -> None:
    model.add(tool_step(("deploy", {"target": "prod"})), text_step("Not deploying, then."))
    body = {"text": "no, wait", "policy": "steer", "client_message_id": "s-2"}
    async with sse_turn(app, conversation_id, {"text": "deploy"}) as first:
        await first.frames_until("approval.requested")
        async with sse_turn(app, conversation_id, body) as steered:
            assert (await steered.next_frame()).event == "input.queued"
            rest = await steered.frames_until("turn.finished")
        decided = await first.frames_until("turn.finished")
    endings = [f.data["ending"] for f in decided if f.event == "approval.decided"]
    assert endings == ["DISMISSED"], endings
    assert rest[-1].data["stop_reason"] == "end_turn" and deployed == []
    assert len(await store.list_turns(conversation_id)) == 1
    assert await store.list_queued(conversation_id) == []
    assert await _rows(store, conversation_id) == [
        ("user", "deploy", False),
        ("assistant", "tool_use", False),
        ("tool", "tool_result", False),
        ("user", "no, wait", True),
        ("assistant", "Not deploying, then.", False),
    ]


async def test_the_message_is_queued_before_the_approval_it_dismisses_lets_the_turn_go_on(
    app: FastAPI,
    store: Store,
    model: ScriptedModel,
    deployed: list[str],
    conversation_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Dismissing the approval lets its turn go on at once. Were the message not in the
    queue by then (its write slow, as under load), the turn would reach its next step
    without it, answer without it, and the message would run as a turn of its own: a
    model call more than there are replies (the race behind a flaky run of the test
    above). The queue write comes first, so the turn takes it."""
    write = store.write

    async def slow_queue_write(*ops: WriteOp) -> list[Any]:
        if any(isinstance(op, Enqueue) for op in ops):
            await asyncio.sleep(0.2)
        return await write(*ops)

    monkeypatch.setattr(store, "write", slow_queue_write)
    await test_a_message_steered_while_an_approval_waits_dismisses_it_and_joins_the_turn(
        app, store, model, deployed, conversation_id
    )


async def test_a_stored_message_stays_accepted_when_dismissing_the_approval_fails(
    app: FastAPI,
    runtime: Runtime,
    store: Store,
    model: ScriptedModel,
    conversation_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The message is in the queue before the dismissal: a dismissal that fails (its
    store write, say) does not turn the accepted message into an error."""
    model.add(tool_step(("deploy", {"target": "prod"})), text_step("Not deploying."))

    async def failing(conversation_id: str) -> list[object]:
        raise RuntimeError("the store did not answer")

    async with sse_turn(app, conversation_id, {"text": "deploy"}) as first:
        await first.frames_until("approval.requested")
        monkeypatch.setattr(runtime.consent, "dismiss", failing)
        body = {"text": "later", "policy": "queue", "client_message_id": "q-1"}
        async with sse_turn(app, conversation_id, body) as queued:
            assert (await queued.next_frame()).event == "input.queued"
        waiting = await store.list_queued(conversation_id)
        assert [q.client_message_id for q in waiting] == ["q-1"]
        pending = await store.list_approvals(conversation_id, pending_only=True)
        assert len(pending) == 1  # not dismissed: it ends as it would have
