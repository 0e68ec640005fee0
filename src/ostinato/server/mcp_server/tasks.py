"""MCP tasks: the ``io.modelcontextprotocol/tasks`` extension (2026-07-28), durable.

A call to an agent from a client that declares the extension on that request, with a
new message (not an answer to what waits), is answered at once with a task handle
(``resultType: "task"``) once its turn has begun. The task is the exchange the message
began (``ostinato.exchanges``, as an A2A task): its id is the id of that turn, and
everything a task shows is read from the store, so ``tasks/get``, ``tasks/update`` and
``tasks/cancel`` are answered by any server on the same database, not only the one that
began it.

- ``tasks/get``: ``working``; ``input_required`` with ``inputRequests``, one form
  elicitation keyed by what waits (the approval's id, the card's tool call id: a key is
  never reused in a task's life); ``completed`` with the ``CallToolResult`` a plain call
  would have returned (the replies' text, ``conversation_id``, ``stop_reason``);
  ``failed`` with a JSON-RPC error; ``cancelled``. ``ttlMs`` is null: a task lives as
  long as its conversation.
- ``tasks/update``: ``inputResponses`` answer what waits, as an elicitation's retry does
  (``elicit.reply``); a response to a key that no longer waits is ignored.
- ``tasks/cancel``: cancels the conversation's turn, or resolves what it waits on.

The server that begins a task's turn (or continues it, answering a card) watches the
conversation until that turn ends, as a streaming surface would: an approval the turn
asks is then asked (not ``UNREACHABLE``) and waits for ``tasks/update``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolRequestParams, ElicitResult, RequestParams
from mcp_types.jsonrpc import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field, ValidationError

from ostinato.answers import AnswerCard, Decide, WaitingApproval, interpret
from ostinato.bus import Subscription
from ostinato.errors import ClientError, NotFound
from ostinato.messages import JSON
from ostinato.server.a2a import reading
from ostinato.server.a2a.tasks import TaskView, iso
from ostinato.server.a2a.wire import TaskNotFound
from ostinato.server.auth.caller import Caller, required_caller
from ostinato.server.context import ServerContext
from ostinato.server.mcp_server import elicit
from ostinato.server.mcp_server.calls import owned
from ostinato.server.routes.turns import release_when_done
from ostinato.server.waiting import what_waits
from ostinato.submissions import TurnHandle

IDENTIFIER = "io.modelcontextprotocol/tasks"
POLL_MS = 1000


class TaskParams(RequestParams):
    task_id: str  # taskId on the wire


class UpdateParams(TaskParams):
    input_responses: dict[str, Any] = Field(default_factory=dict)  # inputResponses


class Tasks(Extension):
    """The extension: the ``tools/call`` interceptor and the three ``tasks/*`` methods."""

    identifier = IDENTIFIER

    def __init__(self, context: ServerContext) -> None:
        self.context = context
        self.watching: set[asyncio.Task[None]] = set()

    def methods(self) -> list[MethodBinding]:
        versions = frozenset(MODERN_PROTOCOL_VERSIONS)
        return [
            MethodBinding("tasks/get", TaskParams, self.get, versions),
            MethodBinding("tasks/update", UpdateParams, self.update, versions),
            MethodBinding("tasks/cancel", TaskParams, self.cancel, versions),
        ]

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        arguments = params.arguments or {}
        message, named = arguments.get("message"), arguments.get("conversation_id")
        agent = self.context.runtime.router.get(params.name)
        if not _declared(ctx) or agent is None or not isinstance(message, str):
            return await call_next(ctx)
        if params.request_state or params.input_responses:
            return await call_next(ctx)  # an elicitation's retry
        caller = _caller(ctx)
        runtime = self.context.runtime
        try:
            if isinstance(named, str):
                cid = await owned(self.context, caller, named)
                read = interpret(message, await what_waits(runtime, cid))
                if isinstance(read, Decide | AnswerCard):
                    return await call_next(ctx)  # an answer to what waits: a plain call
            else:
                made = await runtime.create_conversation(
                    owner=caller.owner, metadata={"surface": "mcp"}
                )
                cid = made.id
            handle = await self._begin(caller, cid, agent.id, message)
        except NotFound:
            return await call_next(ctx)  # the plain call says it in its own words
        view = await reading.view(runtime, await reading.find(runtime, caller, handle.turn.id))
        return {"resultType": "task", **_task(view, handle.turn.started_at)}

    async def _begin(self, caller: Caller, cid: str, agent: str, message: str) -> TurnHandle:
        runtime, subscription = self.context.runtime, self.context.runtime.bus.subscribe(cid)
        try:
            permit = await self.context.owner_limits.begin_turn(caller.owner)
            try:
                submission = await runtime.submit(cid, message, policy="queue", skill=agent)
                handle = await submission.handle()
            except BaseException:
                permit.release()
                raise
            release_when_done(permit, submission.started)
        except BaseException:
            subscription.close()
            raise
        self._watch(subscription, handle)
        return handle

    def _watch(self, subscription: Subscription, handle: TurnHandle) -> None:
        """Watch the conversation here until the turn ends (its approvals are asked)."""
        task = asyncio.ensure_future(_hold(subscription, handle, self.context.closing))
        self.watching.add(task)
        task.add_done_callback(self.watching.discard)

    async def get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> JSON:
        _require(ctx)
        view = await self._view(_caller(ctx), params.task_id)
        found = await reading.find(self.context.runtime, _caller(ctx), params.task_id)
        task = _task(view, found.exchange.first.started_at)
        if view.status == "input_required" and view.waiting is not None:
            asked = elicit.ask(view.waiting, view.context_id)
            request = (asked.input_requests or {})[elicit.KEY]
            task["inputRequests"] = {_key(view.waiting): request.model_dump(
                by_alias=True, mode="json", exclude_none=True)}  # fmt: skip
        elif view.status == "completed":
            task["result"] = _result(view, found.exchange.last.stop_reason)
        elif view.status == "failed":
            message = view.error or "the turn failed"
            task["error"] = {"code": -32603, "message": message}
        return {"resultType": "complete", **task}

    async def update(self, ctx: ServerRequestContext[Any, Any], params: UpdateParams) -> JSON:
        _require(ctx)
        caller, runtime = _caller(ctx), self.context.runtime
        view = await self._view(caller, params.task_id)
        waiting = view.waiting
        if view.status != "input_required" or waiting is None:
            return {"resultType": "complete"}  # nothing outstanding: ignored
        response = params.input_responses.get(_key(waiting))
        try:
            answer = ElicitResult.model_validate(response)
        except ValidationError:
            return {"resultType": "complete"}  # not a response to what waits: ignored
        key = _key(waiting)
        replied = elicit.reply(view.context_id, key, {elicit.KEY: answer}, waiting)
        if replied is None:
            return {"resultType": "complete"}
        cid, read = view.context_id, replied.reading
        try:
            if read is None:
                await runtime.cancel(cid)
            elif isinstance(read, AnswerCard):
                subscription = runtime.bus.subscribe(cid)
                try:
                    handle = await runtime.answer_card(cid, read.tool_use_id, read.result)
                except BaseException:
                    subscription.close()
                    raise
                self._watch(subscription, handle)
            else:
                await runtime.decide(cid, read.approval_id, approve=read.approve,
                                     remember=read.remember)  # fmt: skip
        except ClientError:
            pass  # answered meanwhile (elsewhere): the answer that came first stands
        return {"resultType": "complete"}

    async def cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> JSON:
        _require(ctx)
        view = await self._view(_caller(ctx), params.task_id)
        if view.status in ("working", "input_required"):
            await self.context.runtime.cancel(view.context_id)
        return {"resultType": "complete"}

    async def _view(self, caller: Caller, task_id: str) -> TaskView:
        """The caller's task; another owner's is not found, exactly like a missing one."""
        runtime = self.context.runtime
        try:
            return await reading.view(runtime, await reading.find(runtime, caller, task_id))
        except TaskNotFound:
            raise MCPError(
                INVALID_PARAMS, f"Failed to retrieve task: no task {task_id!r}"
            ) from None


async def _hold(subscription: Subscription, handle: TurnHandle, closing: asyncio.Event) -> None:
    async def drain() -> None:
        async for _ in subscription:
            pass

    waiters = [asyncio.ensure_future(drain()), asyncio.ensure_future(closing.wait())]
    try:
        await asyncio.wait([handle.task, *waiters], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        subscription.close()


def _task(view: TaskView, created: Any) -> JSON:
    return {
        "taskId": view.id,
        "status": view.status,
        "createdAt": iso(created),
        "lastUpdatedAt": iso(view.updated_at),
        "ttlMs": None,
        "pollIntervalMs": POLL_MS,
    }


def _key(waiting: Any) -> str:
    return waiting.approval_id if isinstance(waiting, WaitingApproval) else waiting.tool_use_id


def _result(view: TaskView, stop_reason: str | None) -> JSON:
    texts = [r.text for r in view.rows if r.role == "assistant" and not r.hidden]
    text = "\n\n".join(t for t in texts if t.strip())
    structured = {"stop_reason": stop_reason, "conversation_id": view.context_id, "text": text}
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": False,
    }


def _declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """The client declared the extension on this request (2026-07-28)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    declared = capabilities.extensions if capabilities is not None else None
    return bool(declared) and IDENTIFIER in declared  # type: ignore[operator]


def _require(ctx: ServerRequestContext[Any, Any]) -> None:
    if not _declared(ctx):
        raise MCPError(MISSING_REQUIRED_CLIENT_CAPABILITY, "Missing required client capability",
                       {"requiredCapabilities": {"extensions": {IDENTIFIER: {}}}})  # fmt: skip


def _caller(ctx: ServerRequestContext[Any, Any]) -> Caller:
    return required_caller(ctx.request)
