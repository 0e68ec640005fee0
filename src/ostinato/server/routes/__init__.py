"""The API's routes, one module per resource; ``ROUTERS`` is what ``create_app`` mounts."""

from __future__ import annotations

from ostinato.server.routes import (
    admin,
    approvals,
    branches,
    caller,
    conversation_agents,
    conversations,
    events,
    forged,
    health,
    jobs,
    mcp_servers,
    memories,
    memory_graph,
    messages,
    queue,
    records,
    schedules,
    search,
    session,
    timeline,
    tools,
    transfer,
    triggers,
    turns,
    usage,
    websocket,
)

# In the order a request tries them (``app.py``): the most asked first, a conversation
# made and a turn posted (a turn's request was matched against 22 routes before its
# own; now 9). A method no route takes is a 405 whatever the order: its
# ``Allow`` lists every route's methods for the path.
ROUTERS = (
    conversations.router,
    records.router,
    turns.router,
    health.router,
    caller.router,
    session.router,
    conversation_agents.router,
    messages.router,
    queue.router,
    timeline.router,
    branches.router,
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
    usage.router,
    admin.router,
    search.router,
    transfer.router,
)
