"""What the routes need from the app: the runtime and how models are chosen.

``create_app`` puts one ``ServerContext`` on ``app.state``; routes receive it through the
``Context`` dependency, so they never import globals and a test builds its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from ostinato.messages import JSON
from ostinato.models.base import Model
from ostinato.runtime import Runtime
from ostinato.server.limits import BodyLimits
from ostinato.server.streams import Live

ModelChooser = Callable[[Request], Model | None]
"""Picks the model for one request (e.g. from ``x-ostinato-model-*`` headers); ``None``
means the runtime's default. It may raise a ``ClientError`` for a bad choice."""


@dataclass(frozen=True, slots=True)
class ServerContext:
    runtime: Runtime
    model_name: str
    store_name: str
    models: JSON | None = None  # the body of /v1/models; None lists model_name alone
    choose_model: ModelChooser | None = None
    ping_interval: float = 15.0
    closing: asyncio.Event = field(default_factory=asyncio.Event)  # set: end every stream
    allowed_origins: frozenset[str] = frozenset()  # WebSocket origins besides loopback
    limits: BodyLimits = field(default_factory=BodyLimits)

    @property
    def live(self) -> Live:
        return Live(self.ping_interval, self.closing)

    def model_for(self, request: Request) -> Model | None:
        return self.choose_model(request) if self.choose_model is not None else None


def _context(request: Request) -> ServerContext:
    context: ServerContext = request.app.state.ostinato
    return context


Context = Annotated[ServerContext, Depends(_context)]
