"""``/mcp``: ostinato's agents as tools of an MCP server (Streamable HTTP), for any MCP
client: editors, desktop chat apps, other agents (another ostinato among them).

The official ``mcp`` SDK serves the protocol (``endpoint``, imported when first needed;
both eras: the ``initialize`` handshake of 2025-11-25 and earlier, and 2026-07-28's
stateless requests), stateless: no session
lives in this process; what a call continues is read from the store. Each
agent is a tool named by its id, taking ``message`` and an optional
``conversation_id`` (``calls``). Requests authenticate like every other route; the
caller the middleware resolved is the owner of what the call does. A client that
declares the tasks extension gets a long call as a task (``tasks``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ostinato.errors import ClientError
from ostinato.server.auth import CurrentCaller
from ostinato.server.context import Context, ServerContext
from ostinato.server.schemas import ErrorBody

if TYPE_CHECKING:
    from ostinato.server.mcp_server.endpoint import McpEndpoint

router = APIRouter(tags=["mcp"])
RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "An MCP JSON-RPC response, or its Server-Sent Events.",
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "text/event-stream": {"schema": {"type": "string"}},
        },
    },
    202: {"description": "A notification, accepted."},
    400: {"description": "Not an MCP request.", "content": {"application/json": {}}},
    404: {
        "description": "No such session (the server keeps none).",
        "content": {"application/json": {}},
    },
    406: {
        "description": "The Accept header allows neither JSON nor SSE.",
        "content": {"application/json": {}},
    },
    415: {"model": ErrorBody, "description": "Not JSON (Content-Type)."},
}
OPENAPI = {
    "requestBody": {
        "required": True,  # a POST without a body is refused (415)
        "content": {"application/json": {"schema": {"type": ["object", "array"]}}},
    }
}


class _Forward(Response):
    def __init__(self, endpoint: McpEndpoint) -> None:
        super().__init__()
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.endpoint.handle(scope, receive, send)


def load() -> None:
    """Import the SDK's side (``endpoint``): ``serve`` calls it in a thread once it
    listens, so the first ``/mcp`` request does not import it on the event loop."""
    from ostinato.server.mcp_server import endpoint  # noqa: F401


def endpoint_of(app: FastAPI, context: ServerContext) -> McpEndpoint:
    found: McpEndpoint | None = getattr(app.state, "mcp_endpoint", None)
    if found is None:
        from ostinato.server.mcp_server.endpoint import McpEndpoint

        found = app.state.mcp_endpoint = McpEndpoint(context)
    return found


@router.post("/mcp", responses=RESPONSES, openapi_extra=OPENAPI)
async def mcp(context: Context, caller: CurrentCaller, request: Request) -> Response:
    """The MCP server (Streamable HTTP): each agent a tool (docs/clients.md)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise NotJson("an MCP request is JSON: send Content-Type: application/json")
    return _Forward(endpoint_of(request.app, context))


class NotJson(ClientError):
    status = 415
    code = "unsupported_media_type"
