"""The API's routes, one module per resource; ``ROUTERS`` is what ``create_app`` mounts."""

from __future__ import annotations

from ostinato.server.routes import conversations, events, health, messages, turns

ROUTERS = (
    health.router,
    conversations.router,
    messages.router,
    turns.router,
    events.router,
)
