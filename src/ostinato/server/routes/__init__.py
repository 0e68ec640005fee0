"""The API's routes, one module per resource; ``ROUTERS`` is what ``create_app`` mounts."""

from __future__ import annotations

from ostinato.server.routes import (
    approvals,
    caller,
    conversations,
    events,
    forged,
    health,
    jobs,
    mcp_servers,
    memories,
    memory_graph,
    messages,
    records,
    schedules,
    session,
    timeline,
    tools,
    triggers,
    turns,
    websocket,
)

ROUTERS = (
    health.router,
    caller.router,
    session.router,
    conversations.router,
    messages.router,
    records.router,
    timeline.router,
    turns.router,
    approvals.router,
    events.router,
    websocket.router,
    memory_graph.router,
    memories.router,
    forged.router,
    mcp_servers.router,
    tools.router,
    schedules.router,
    triggers.router,
    jobs.router,
)
