"""The MCP SDK's side of ``/mcp`` (``route``): its server, stateless, with each agent a
tool, and the session manager that serves the Streamable HTTP transport.

Imported when the first app needs it (``route.endpoint_of``; ``serve`` loads it in a
thread once it listens, ``load``): the SDK is about a third of a second of imports, which
neither ``create_app`` nor the event loop should pay.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from typing import Any

from mcp.server.mcpserver import Context as McpContext
from mcp.server.mcpserver import MCPServer
from mcp.server.request_state import RequestStateSecurity
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import CallToolResult, TextContent
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import Receive, Scope, Send

from ostinato.errors import NotFound
from ostinato.messages import JSON
from ostinato.server.auth.caller import Caller, caller_of, required_caller
from ostinato.server.context import ServerContext
from ostinato.server.mcp_server import elicit
from ostinato.server.mcp_server.calls import call_agent, owned
from ostinato.server.mcp_server.tasks import Tasks
from ostinato.server.waiting import what_waits
from ostinato.skills import Skill


class McpEndpoint:
    """The SDK's server and session manager of one app, started on first use."""

    def __init__(self, context: ServerContext) -> None:
        self.server = build(context)
        self.manager = StreamableHTTPSessionManager(
            app=self.server._lowlevel_server, stateless=True
        )
        self._running: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._running is None:
            self._running = asyncio.ensure_future(self._run())
        await self._ready.wait()
        await self.manager.handle_request(scope, receive, send)

    async def _run(self) -> None:
        async with self.manager.run():
            self._ready.set()
            await asyncio.Event().wait()  # until the app's loop ends


def build(context: ServerContext) -> MCPServer:
    server = MCPServer(
        "ostinato",
        instructions="Each tool is an agent: send it a message; pass conversation_id to "
        "go on in a conversation (answers to approvals and questions too).",
        request_state_security=_sealing(context),
        extensions=[Tasks(context)],
    )
    for skill in context.runtime.router.skills:
        tool, description = _tool(context, skill), _describe(skill)
        server.add_tool(tool, name=skill.id, description=description, structured_output=False)
    return server


def _sealing(context: ServerContext) -> RequestStateSecurity:
    """How an elicitation's ``requestState`` is sealed: with a key made from the auth
    secret (``auth.secret``, the same in every process: any server verifies it), else a
    key of this process; bound to the caller's owner either way."""
    secret = context.auth.settings.secret
    key = (
        hashlib.sha256(
            b"ostinato mcp request state\0" + secret.get_secret_value().encode()
        ).digest()
        if secret is not None
        else os.urandom(32)
    )
    return RequestStateSecurity(keys=[key], bind_principal=_owner, audience="ostinato")


def _owner(request_context: Any) -> str | None:
    found = caller_of(request_context.request)
    return found.owner if found is not None else None


def _describe(skill: Skill) -> str:
    what = skill.description or f"The ostinato agent {skill.label}."
    return (
        f"{what} Send it a message; it answers when its turn ends, or says what it waits "
        "for (an approval, a question): answer with the next call in the same conversation."
    )


def _tool(context: ServerContext, skill: Skill) -> Any:
    agent = skill.id

    async def ask(message: str, ctx: McpContext, conversation_id: str | None = None) -> Any:
        """Send a message to the agent.

        Args:
            message: What to say (or the answer to what the conversation waits for).
            conversation_id: The conversation to go on in; none starts a new one.
        """
        caller = _caller(ctx)
        sent = 0.0

        async def progress(text: str) -> None:
            nonlocal sent
            sent += 1
            await ctx.report_progress(sent, None, text)

        try:
            retry = await _retried(context, caller, ctx)
            if retry is not None and retry.reading is None:  # the question was dismissed
                cid = retry.conversation_id
                await context.runtime.cancel(cid)
                done = {"conversation_id": cid, "stop_reason": "dismissed"}
                return _result("The question was dismissed.", done)
            named = retry.conversation_id if retry is not None else conversation_id
            reading = retry.reading if retry is not None else None
            answer = await call_agent(context, caller, agent, message, named, progress, reading)
        except NotFound as missing:
            return CallToolResult(content=[TextContent(text=missing.message)], is_error=True)
        if answer.waiting is not None and _elicits(ctx):
            return elicit.ask(answer.waiting, answer.result["conversation_id"])
        return _result(answer.text, answer.result)

    return ask


async def _retried(context: ServerContext, caller: Caller, ctx: McpContext) -> elicit.Reply | None:
    """A retry carrying an elicitation's answer: its conversation and what the answer
    does (``reading`` ``None``: a card dismissed); ``None`` for a first call."""
    state = elicit.state_of(ctx.request_state) if ctx.request_state else None
    if state is None:
        return None
    cid = await owned(context, caller, state[0])
    waiting = await what_waits(context.runtime, cid)
    replied = elicit.reply(cid, state[1], ctx.input_responses, waiting)
    if replied is None:
        raise NotFound(f"nothing waits in conversation {cid} for this answer any more")
    return replied


def _elicits(ctx: McpContext) -> bool:
    """The client takes an elicitation in an ``InputRequiredResult`` (2026-07-28)."""
    capabilities = ctx.client_capabilities
    modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
    return modern and capabilities is not None and capabilities.elicitation is not None


def _result(text: str, structured: JSON) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=text)], structured_content=structured)


def _caller(ctx: McpContext) -> Caller:
    return required_caller(ctx.request_context.request)
