"""The HTTP API (FastAPI): ``create_app(runtime)``. Routes are documented in docs/api.md."""

from __future__ import annotations

from ostinato.server.app import build_routes, create_app, end_streams, prepare
from ostinato.server.context import ModelChooser, ServerContext
from ostinato.server.limits import BodyLimits

__all__ = [
    "BodyLimits",
    "ModelChooser",
    "ServerContext",
    "build_routes",
    "create_app",
    "end_streams",
    "prepare",
]
