"""The official A2A Python SDK's client (``a2a-sdk``, JSON-RPC, A2A 1.0) against a live
server on SQLite and on PostgreSQL: it resolves the card, runs a task with a tool, answers
an input-required approval, cancels a task, resubscribes after dropping a stream and
loses nothing, and finds none of another owner's tasks."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver
from a2a.client.client import Client
from a2a.server.tasks.task_manager import append_artifact_to_task
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict

from ostinato.models.scripted import text_step, tool_step
from tests.server.live_protocols import Live


@asynccontextmanager
async def a2a_client(
    live: Live, who: str = "ann", *, streaming: bool = True
) -> AsyncIterator[Client]:
    http = httpx.AsyncClient(headers=live.headers(who), timeout=30)
    factory = ClientFactory(ClientConfig(httpx_client=http, streaming=streaming))
    client = await factory.create_from_url(live.url)
    try:
        yield client
    finally:
        await client.close()
        await http.aclose()


def message(text: str, *, task_id: str = "", context_id: str = "") -> SendMessageRequest:
    said = Message(role=Role.ROLE_USER, parts=[Part(text=text)], message_id=f"m-{text[:20]}")
    if task_id:
        said.task_id = task_id
    if context_id:
        said.context_id = context_id
    return SendMessageRequest(message=said)


async def collect(events: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [event async for event in events]


def follow(events: list[StreamResponse], into: Task | None = None) -> Task:
    """The task the events describe, built the SDK's way (artifact updates applied)."""
    task = Task()
    if into is not None:
        task.CopyFrom(into)
    for event in events:
        if event.HasField("task"):
            task.CopyFrom(event.task)
        elif event.HasField("artifact_update"):
            append_artifact_to_task(task, event.artifact_update)
        elif event.HasField("status_update"):
            task.status.CopyFrom(event.status_update.status)
    return task


def answer_text(task: Task) -> str:
    (answer,) = [a for a in task.artifacts if a.artifact_id == "answer"]
    return "".join(p.text for p in answer.parts)


def data_parts(events: list[StreamResponse]) -> list[dict[str, Any]]:
    found = []
    for event in events:
        if event.HasField("status_update"):
            for part in event.status_update.status.message.parts:
                if part.HasField("data"):
                    found.append(MessageToDict(part.data))
    return found


async def test_the_card_is_public_and_names_the_interface_and_the_key(live: Live) -> None:
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, live.url).get_agent_card()
    (interface,) = card.supported_interfaces
    assert interface.url == f"{live.url}/a2a" and interface.protocol_binding == "JSONRPC"
    assert interface.protocol_version == "1.0"
    assert card.capabilities.streaming and not card.capabilities.push_notifications
    assert card.security_schemes["apiKey"].http_auth_security_scheme.scheme == "Bearer"
    assert [s.id for s in card.skills] == ["default"]


async def test_a_task_with_a_tool_streams_and_ends_completed(live: Live) -> None:
    live.model.add(
        tool_step(("calculator", {"expression": "6*7"}), text="Let me see."),
        text_step("It is 42.", chunks=3),
    )
    async with a2a_client(live) as client:
        events = await collect(client.send_message(message("what is 6*7?")))
        task = follow(events)
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert answer_text(task) == "Let me see.It is 42."
        calls = [d["toolCall"]["name"] for d in data_parts(events) if "toolCall" in d]
        results = [d["toolResult"]["result"] for d in data_parts(events) if "toolResult" in d]
        assert calls == ["calculator"] and "42" in results[0]
        stored = await client.get_task(GetTaskRequest(id=task.id))
    assert stored.status.state == TaskState.TASK_STATE_COMPLETED
    assert stored.context_id == task.context_id
    assert [m.role for m in stored.history] == [Role.ROLE_USER, Role.ROLE_AGENT, Role.ROLE_AGENT]
    assert [p.text for p in stored.artifacts[0].parts] == ["Let me see.", "It is 42."]


async def test_send_message_without_streaming_waits_for_the_end(live: Live) -> None:
    live.model.add(text_step("Plain answer."))
    async with a2a_client(live, streaming=False) as client:
        (only,) = await collect(client.send_message(message("hello")))
    assert only.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(only.task) == "Plain answer."


async def test_an_approval_is_input_required_and_the_next_message_answers_it(live: Live) -> None:
    live.model.add(tool_step(("shell", {"command": "echo via-a2a"})), text_step("Ran it."))
    async with a2a_client(live) as client:
        first = await collect(client.send_message(message("run it")))
        asked = follow(first)
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        (waits,) = [d for d in data_parts(first) if "approval" in d]
        assert waits["approval"]["tool"] == "shell"
        assert "Answer yes" in asked.status.message.parts[0].text
        second = await collect(
            client.send_message(message("yes", task_id=asked.id, context_id=asked.context_id))
        )
        done = follow(second)
    assert done.id == asked.id and done.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(done) == "Ran it."
    ran = [d["toolResult"]["result"] for d in data_parts(second) if "toolResult" in d]
    assert "via-a2a" in ran[0]


async def test_a_message_that_answers_nothing_is_refused_saying_what_waits(live: Live) -> None:
    live.model.add(tool_step(("shell", {"command": "echo x"})), text_step("Ran it."))
    async with a2a_client(live) as client:
        asked = follow(await collect(client.send_message(message("run it"))))
        with pytest.raises(Exception, match="Waiting for your approval: shell"):
            await collect(client.send_message(message("maybe later?", task_id=asked.id)))
        await client.cancel_task(CancelTaskRequest(id=asked.id))


async def test_a_working_task_is_cancelled(live: Live) -> None:
    async with a2a_client(live) as client:
        stream = client.send_message(message("gated work"))
        first = await anext(stream)
        second = await anext(stream)  # part one, as an artifact
        assert first.task.status.state == TaskState.TASK_STATE_WORKING
        assert second.HasField("artifact_update")
        cancelled = await client.cancel_task(CancelTaskRequest(id=first.task.id))
        rest = await collect(stream)
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        assert follow(rest).status.state == TaskState.TASK_STATE_CANCELED
        again = await client.get_task(GetTaskRequest(id=first.task.id))
    assert again.status.state == TaskState.TASK_STATE_CANCELED


async def test_a_dropped_stream_resubscribes_and_loses_nothing(live: Live) -> None:
    async with a2a_client(live) as client:
        stream = client.send_message(message("gated story"))
        seen = [await anext(stream), await anext(stream)]  # the task, part one
        await stream.aclose()  # the connection drops; the task goes on
        task = follow(seen)
        resumed = client.subscribe(SubscribeToTaskRequest(id=task.id))
        head = await anext(resumed)
        assert head.task.status.state == TaskState.TASK_STATE_WORKING
        live.gate.set()
        rest = await collect(resumed)
    final = follow([head, *rest])
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(final) == "part one. part two."
    async with a2a_client(live) as client:
        with pytest.raises(UnsupportedOperationError):
            await collect(client.subscribe(SubscribeToTaskRequest(id=task.id)))


async def test_another_owners_task_and_context_are_not_found(live: Live) -> None:
    live.model.add(text_step("Ann's secret answer."))
    async with a2a_client(live) as ann:
        task = follow(await collect(ann.send_message(message("hello"))))
    async with a2a_client(live, "bob") as bob:
        for call in (
            bob.get_task(GetTaskRequest(id=task.id)),
            bob.cancel_task(CancelTaskRequest(id=task.id)),
            collect(bob.subscribe(SubscribeToTaskRequest(id=task.id))),
            collect(bob.send_message(message("yes", task_id=task.id))),
            collect(bob.send_message(message("hi", context_id=task.context_id))),
        ):
            with pytest.raises(TaskNotFoundError):
                await call
        listed = await bob.list_tasks(ListTasksRequest())
        missing = await bob.list_tasks(ListTasksRequest())
    assert list(listed.tasks) == [] and missing.next_page_token == ""
    async with a2a_client(live) as ann:
        mine = await ann.list_tasks(ListTasksRequest(context_id=task.context_id))
    assert [t.id for t in mine.tasks] == [task.id]


async def test_a_request_without_the_version_header_is_refused(live: Live) -> None:
    body = {"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "x"}}
    async with httpx.AsyncClient(headers=live.headers()) as http:
        answer = (await http.post(f"{live.url}/a2a", json=body)).json()
        unknown = (
            await http.post(f"{live.url}/a2a", json=body, headers={"a2a-version": "1.0"})
        ).json()
    assert answer["id"] == 7 and answer["error"]["code"] == -32009
    assert unknown["error"]["code"] == -32001


async def test_data_parts_files_and_return_immediately(live: Live) -> None:
    # The call comes a moment later, once the subscription below watches the task: a call
    # is asked only while a surface watches its conversation (else it is UNREACHABLE).
    writing = tool_step(("write_file", {"path": "notes/plan.md", "content": "step one"}))
    live.model.add(dataclasses.replace(writing, delay=1.0), text_step("Wrote it."))
    said = {
        "role": "ROLE_USER",
        "messageId": "m-data",
        "parts": [{"text": "write this:"}, {"data": {"plan": "step one"}}],
    }
    body = {
        "jsonrpc": "2.0",
        "id": "r1",
        "method": "SendMessage",
        "params": {"message": said, "configuration": {"returnImmediately": True}},
    }
    async with httpx.AsyncClient(headers={**live.headers(), "a2a-version": "1.0"}) as http:
        first = (await http.post(f"{live.url}/a2a", json=body)).json()["result"]["task"]
        assert first["status"]["state"] in ("TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED")
        yes = {**said, "messageId": "m-yes", "parts": [{"text": "yes"}], "taskId": first["id"]}
        answer = {**body, "params": {"message": yes, "configuration": {"returnImmediately": True}}}
        async with a2a_client(live) as client:  # the SDK follows it to its end
            events = []
            async for event in client.subscribe(SubscribeToTaskRequest(id=first["id"])):
                events.append(event)
                if follow(events).status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                    await http.post(f"{live.url}/a2a", json=answer)  # writing asks first
        assert follow(events).status.state == TaskState.TASK_STATE_COMPLETED
        get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": first["id"]}}
        task = (await http.post(f"{live.url}/a2a", json=get)).json()["result"]
    assert task["history"][0]["parts"][0]["text"] == 'write this:\n{"plan": "step one"}'
    (written,) = [a for a in task["artifacts"] if a["artifactId"] == "file:notes/plan.md"]
    assert written["parts"] == [
        {"text": "step one", "filename": "plan.md", "mediaType": "text/plain"}
    ]
