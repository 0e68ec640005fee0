"""The A2A routes: the agent cards (public) and the JSON-RPC endpoints.

``GET /.well-known/agent-card.json`` and ``GET /a2a/{agent}/.well-known/agent-card.json``
are the cards (``card``). ``POST /a2a`` (the default agent: the router picks) and
``POST /a2a/{agent}`` take one JSON-RPC request each (``wire``), authenticated like every
other route. A request must say ``A2A-Version: 1.0`` (header, or the ``A2A-Version``
query parameter). Answers are JSON-RPC responses (errors too, with HTTP 200), or, for
the streaming methods, Server-Sent Events each holding one JSON-RPC response. A client
that goes away leaves its task running: a task outlives its streams.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from ostinato.errors import ClientError, NotFound
from ostinato.messages import JSON
from ostinato.server.a2a import methods, reading
from ostinato.server.a2a.card import card
from ostinato.server.a2a.tasks import task_json
from ostinato.server.a2a.wire import (
    STREAMING,
    A2AError,
    Call,
    InvalidParams,
    MethodNotFound,
    PushNotSupported,
    TaskNotFound,
    Unsupported,
    check_version,
    error_id,
    read_call,
    read_send,
    result,
)
from ostinato.server.auth import Caller, CurrentCaller
from ostinato.server.context import Context, ServerContext
from ostinato.server.schemas import ERROR_RESPONSES, ErrorBody
from ostinato.server.sse import FrameStream

router = APIRouter(tags=["a2a"])
PUSH = frozenset(
    {
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    }
)
NO_AGENT = {"model": ErrorBody, "description": "No such agent."}
CARD = {"description": "The agent card (A2A 1.0).",
        "content": {"application/json": {"schema": {"type": "object"}}}}  # fmt: skip
RPC_BODY = {
    "type": "object",
    "required": ["jsonrpc", "method"],
    "properties": {
        "jsonrpc": {"type": "string", "enum": ["2.0"]},
        "id": {"type": ["string", "integer", "null"]},
        "method": {"type": "string"},
        "params": {"type": "object"},
    },
}
RPC_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "A JSON-RPC response (a result or an A2A error), or for "
        "`SendStreamingMessage` and `SubscribeToTask` its Server-Sent Events.",
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "text/event-stream": {"schema": {"type": "string"}},
        },
    },
    400: {
        "description": "Not a JSON-RPC 2.0 request (a parse or invalid-request error).",
        "content": {"application/json": {"schema": {"type": "object"}}},
    },
    404: NO_AGENT,
    429: ERROR_RESPONSES[422] | {"description": "Over a limit; see Retry-After."},
}
OPENAPI = {
    "requestBody": {"required": True, "content": {"application/json": {"schema": RPC_BODY}}},
    "parameters": [
        {
            "name": "A2A-Version",
            "in": "header",
            "required": False,
            "schema": {"type": "string"},
            "description": "The A2A version spoken: 1.0 (without it, 0.3, which is refused).",
        }
    ],
}


@router.get("/.well-known/agent-card.json", responses={200: CARD})
async def default_card(context: Context, request: Request) -> JSONResponse:
    """The default agent's A2A card (public)."""
    return _card(context, request, None)


@router.get("/a2a/{agent}/.well-known/agent-card.json", responses={200: CARD, 404: NO_AGENT})
async def agent_card(context: Context, request: Request, agent: str) -> JSONResponse:
    """One agent's A2A card (public)."""
    return _card(context, request, agent)


def _card(context: ServerContext, request: Request, agent: str | None) -> JSONResponse:
    skills = context.runtime.router.skills
    skill = None
    if agent is not None:
        skill = context.runtime.router.get(agent)
        if skill is None:
            raise NotFound(f"no agent named {agent!r}")
    body = card(str(request.base_url), skill, skills, context.auth.settings)
    return JSONResponse(body, headers={"cache-control": "max-age=60"})


@router.post("/a2a", responses=RPC_RESPONSES, openapi_extra=OPENAPI)
async def default_rpc(context: Context, caller: CurrentCaller, request: Request) -> Response:
    """A2A 1.0 JSON-RPC, answered by the default agent (docs/clients.md)."""
    return await _rpc(context, caller, request, None)


@router.post("/a2a/{agent}", responses=RPC_RESPONSES, openapi_extra=OPENAPI)
async def agent_rpc(
    context: Context, caller: CurrentCaller, request: Request, agent: str
) -> Response:
    """A2A 1.0 JSON-RPC, answered by one agent (docs/clients.md)."""
    if context.runtime.router.get(agent) is None:
        raise NotFound(f"no agent named {agent!r}")
    return await _rpc(context, caller, request, agent)


async def _rpc(
    context: ServerContext, caller: Caller, request: Request, agent: str | None
) -> Response:
    rpc_id: Any = None
    try:
        call = read_call(await request.body())
        rpc_id = call.id
        header = request.headers.get("a2a-version") or request.query_params.get("A2A-Version")
        check_version(header)
        return await _dispatch(context, caller, agent, call)
    except A2AError as error:
        # a body that is no JSON-RPC request at all is a 400 (the error object says why)
        return JSONResponse(error.body(error_id(error, rpc_id)), status_code=error.http_status)
    except NotFound as missing:
        return JSONResponse(TaskNotFound(missing.message).body(rpc_id))
    except ClientError as error:
        if error.status in (429, 503):
            retry = getattr(error, "retry_after", None)
            headers = {"retry-after": str(retry)} if retry is not None else None
            body = A2AError(error.message).body(rpc_id)
            return JSONResponse(body, status_code=error.status, headers=headers)
        return JSONResponse(InvalidParams(error.message).body(rpc_id))


async def _dispatch(
    context: ServerContext, caller: Caller, agent: str | None, call: Call
) -> Response:
    method, params = call.method, call.params
    if method in STREAMING:
        return await _stream(context, caller, agent, call)
    match method:
        case "SendMessage":
            value = await _send(context, caller, agent, params)
        case "GetTask":
            value = await methods.get(context, caller, params)
        case "ListTasks":
            value = await methods.listed(context, caller, params)
        case "CancelTask":
            value = await methods.cancel(context, caller, params)
        case "GetExtendedAgentCard":
            raise Unsupported("this agent has no extended card (capabilities.extendedAgentCard)")
        case _ if method in PUSH:
            raise PushNotSupported("push notifications are not supported by this agent")
        case _:
            raise MethodNotFound(f"no method {method!r}; A2A 1.0 methods are PascalCase")
    return JSONResponse(result(call.id, value))


async def _send(context: ServerContext, caller: Caller, agent: str | None, params: JSON) -> JSON:
    incoming = read_send(params)
    conversation, answers = await methods.target(context, caller, incoming)
    runtime = context.runtime
    subscription = runtime.bus.subscribe(conversation.id)
    try:
        sent = await methods.send(context, caller, agent, incoming, conversation, answers)
        found = sent.found
        if incoming.return_immediately:
            view = await reading.view(runtime, found)
            return {"task": task_json(view, history_length=incoming.history_length)}
        events = methods.follow(
            context, found, subscription, context.live, until_input=True, start=sent.start
        )
        return await methods.settled(context, found, events, incoming.history_length)
    finally:
        subscription.close()


async def _stream(
    context: ServerContext, caller: Caller, agent: str | None, call: Call
) -> Response:
    if call.method == "SendStreamingMessage":
        incoming = read_send(call.params)
        conversation, answers = await methods.target(context, caller, incoming)
        cid = conversation.id
    else:
        found = await methods.subscribable(context, caller, call.params)
        cid = found.conversation.id
    async with context.watch(caller, cid) as watched:
        start = None
        if call.method == "SendStreamingMessage":
            sent = await methods.send(context, caller, agent, incoming, conversation, answers)
            found, start = sent.found, sent.start
        until_input = call.method == "SendStreamingMessage"
        events = methods.follow(
            context, found, watched.subscription, watched.live, until_input=until_input, start=start
        )
    return FrameStream(_sse(call.id, events), on_close=watched.close)


async def _sse(rpc_id: Any, events: methods.Events) -> AsyncIterator[bytes]:
    async for event in events:
        if event is None:
            yield b": ping\n\n"
            continue
        data = json.dumps(result(rpc_id, event), ensure_ascii=False, separators=(",", ":"))
        yield f"data: {data}\n\n".encode()
