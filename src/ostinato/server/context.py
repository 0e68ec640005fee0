"""What the routes need from the app: the runtime, how models are chosen, and who may
call (the authenticator, per-owner limits, the guard of open streams).

``create_app`` puts one ``ServerContext`` on ``app.state``; routes receive it through the
``Context`` dependency, so they never import globals and a test builds its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from ostinato.identity.limits import Limiter
from ostinato.messages import JSON
from ostinato.models.allowed import ModelChoices
from ostinato.models.base import Model
from ostinato.models.choice import HEADER_MODEL_API_KEY, HEADER_MODEL_BASE_URL, HEADER_MODEL_ID
from ostinato.runtime import Runtime
from ostinato.server.auth.authenticator import Authenticator
from ostinato.server.auth.caller import Caller
from ostinato.server.auth.guard import StreamGuard, StreamTicket
from ostinato.server.idempotency import Idempotency
from ostinato.server.limits import BodyLimits
from ostinato.server.streams import Live, Watched, watching
from ostinato.server.surfaces import Surfaces

ModelResolver = Callable[[str], Model]
"""A tier or ``provider:model`` id to a model (``InvalidRequest`` when it cannot be)."""
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
    auth: Authenticator = field(kw_only=True)  # who may call (server.auth)
    owner_limits: Limiter = field(kw_only=True)  # what each owner may do
    streams: StreamGuard = field(kw_only=True)  # open streams, closed when revoked
    surfaces: Surfaces = field(kw_only=True, default_factory=Surfaces)  # per-agent settings
    resolve_model: ModelResolver | None = field(kw_only=True, default=None)
    idempotency: Idempotency = field(kw_only=True, default_factory=Idempotency)  # retries
    # What callers may choose as a model (``models.choosable``); None: anything.
    choices: ModelChoices | None = field(kw_only=True, default=None)

    @property
    def live(self) -> Live:
        return Live(self.ping_interval, self.closing)

    def live_for(self, ticket: StreamTicket) -> Live:
        """The ``Live`` of one stream: it also ends when the stream's credential does."""
        return Live(self.ping_interval, self.closing, ticket.revoked)

    def watch(self, caller: Caller, conversation_id: str) -> AbstractAsyncContextManager[Watched]:
        """Open a stream of ``caller`` on a conversation (``streams.watching``)."""
        return watching(self.streams, self.runtime.bus, caller, conversation_id, self.live)

    async def aclose(self) -> None:
        """Stop the background work of limits and streams; close the authenticator."""
        await self.idempotency.aclose()
        await self.streams.aclose()
        await self.owner_limits.close()
        await self.auth.aclose()

    def model_for(self, request: Request) -> Model | None:
        """The model the request's ``x-ostinato-model-*`` headers pick (``None``: the
        default); ``ModelNotAllowed`` (403) for one callers may not choose."""
        if self.choose_model is None:
            return None
        named, headers = request.headers.get(HEADER_MODEL_ID), request.headers
        if named and self.choices is not None:
            own_key = bool(headers.get(HEADER_MODEL_API_KEY))
            self.choices.check(
                named, own_key=own_key, own_server=bool(headers.get(HEADER_MODEL_BASE_URL))
            )
        return self.choose_model(request)

    def check_model(self, name: str) -> None:
        """``ModelNotAllowed`` (403) unless callers may choose ``name`` here."""
        if self.choices is not None:
            self.choices.check(name)


def context_of(request: Request) -> ServerContext:
    """The app's ``ServerContext``, read from the request: what the routes asked most
    (a conversation made, a turn posted) do instead of taking ``Context`` and
    ``CurrentCaller`` (``auth.caller.signed_in``), because FastAPI solves each
    dependency on every request as a graph of its own (about 15 microseconds each on
    this kind of machine; docs/performance.md, "Round six")."""
    context: ServerContext = request.app.state.ostinato
    return context


async def _context(request: Request) -> ServerContext:
    # async, though it never awaits: FastAPI runs a plain ``def`` dependency in a worker
    # thread, a thread hand-off there and back on every request (the same for
    # ``current_caller`` and ``request_owner``).
    return context_of(request)


Context = Annotated[ServerContext, Depends(_context)]
