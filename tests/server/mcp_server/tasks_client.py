"""The requester's side of MCP tasks (``io.modelcontextprotocol/tasks``) on the official
``mcp`` client, which ships no tasks extension: the extension declared on each request
(``ClientExtension`` with a claim of ``resultType: "task"``), and ``tasks/get``,
``tasks/update``, ``tasks/cancel`` sent through the SDK's own ``send_request`` (which
sets the ``Mcp-Name`` header the spec asks of them from ``name_param``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import httpx2
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, Request, RequestParams, Result
from mcp_types.version import LATEST_MODERN_VERSION
from pydantic import ConfigDict

IDENTIFIER = "io.modelcontextprotocol/tasks"


class CreatedTask(Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str


class TaskState(Result):
    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str


class TaskParams(RequestParams):
    task_id: str
    input_responses: dict[str, Any] | None = None


class _TaskRequest(Request[TaskParams, Any]):
    name_param = "taskId"


class GetTask(_TaskRequest):
    method: Literal["tasks/get"] = "tasks/get"


class UpdateTask(_TaskRequest):
    method: Literal["tasks/update"] = "tasks/update"


class CancelTask(_TaskRequest):
    method: Literal["tasks/cancel"] = "tasks/cancel"


async def _unresolved(created: CreatedTask, context: ClaimContext) -> CallToolResult:
    raise AssertionError("the test reads the task handle itself (allow_claimed=True)")


class TasksExtension(ClientExtension):
    identifier = IDENTIFIER

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=_unresolved)]


async def get_task(session: ClientSession, task_id: str) -> dict[str, Any]:
    found = await session.send_request(GetTask(params=TaskParams(task_id=task_id)), TaskState)
    return found.model_dump(by_alias=True, mode="json")


async def update_task(session: ClientSession, task_id: str, responses: dict[str, Any]) -> None:
    params = TaskParams(task_id=task_id, input_responses=responses)
    await session.send_request(UpdateTask(params=params), Result)


async def cancel_task(session: ClientSession, task_id: str) -> None:
    await session.send_request(CancelTask(params=TaskParams(task_id=task_id)), Result)


@asynccontextmanager
async def tasks_client(url: str, headers: dict[str, str]) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers=headers, timeout=30)
    transport = streamable_http_client(f"{url}/mcp", http_client=http)
    # The tasks extension is of the 2026-07-28 era: the client takes that version without
    # a `server/discover` probe, which on a loaded machine can time out client-side and
    # fall back to the older handshake (mcp.client._probe), where no extension is declared
    # and a call is answered whole instead of as a task.
    client = Client(
        transport, cache=None, extensions=[TasksExtension()], mode=LATEST_MODERN_VERSION
    )
    async with http, client:
        yield client


async def until(client: Client, task_id: str, status: str) -> dict[str, Any]:
    for _ in range(300):
        task = await get_task(client.session, task_id)
        if task["status"] == status:
            return task
        await asyncio.sleep(0.1)
    raise AssertionError(f"task {task_id} never reached {status}: {task}")


async def start(client: Client, message: str, agent: str = "default") -> CreatedTask:
    created = await client.session.call_tool(agent, {"message": message}, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    return created
