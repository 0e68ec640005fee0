"""The HTTP app: ``create_app(runtime)`` builds the FastAPI application.

The app only translates HTTP to runtime calls and back; what a turn does lives in the
runtime. Every request is first resolved to a caller (``server.auth``: the ``[auth]``
mode), and browsers are let in only from allowed origins (CORS is off unless origins
are listed). Its lifespan recovers turns a crash left running before the first request
and closes the runtime (cancelling running turns, closing the store) at shutdown.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts

import ostinato
from ostinato.identity.limits import Limiter
from ostinato.identity.settings import AuthSettings
from ostinato.messages import JSON
from ostinato.models.allowed import ModelChoices
from ostinato.runtime import Runtime
from ostinato.server.apidocs import install_docs
from ostinato.server.auth.authenticator import Authenticator
from ostinato.server.auth.guard import StreamGuard
from ostinato.server.auth.middleware import install_identity
from ostinato.server.context import ModelChooser, ModelResolver, ServerContext
from ostinato.server.errors import install_error_handlers, log
from ostinato.server.idempotency import Idempotency
from ostinato.server.limits import BodyLimit, BodyLimits
from ostinato.server.sse import PING_INTERVAL
from ostinato.server.surfaces import Surfaces

DESCRIPTION = (
    "Run LLM agents as chat conversations. A user message starts a turn; its frames stream "
    "as Server-Sent Events; the stored rows are the truth. See docs/api.md."
)


def create_app(
    runtime: Runtime,
    *,
    model_name: str = "unknown",
    models: JSON | None = None,
    store_name: str = "unknown",
    choose_model: ModelChooser | None = None,
    ping_interval: float = PING_INTERVAL,
    allowed_origins: Iterable[str] | None = None,
    limits: BodyLimits | None = None,
    auth: AuthSettings | Authenticator | None = None,
    hosts: Iterable[str] | None = None,
    surfaces: Surfaces | None = None,
    resolve_model: ModelResolver | None = None,
    idempotency: Idempotency | None = None,
    choices: ModelChoices | None = None,
) -> FastAPI:
    """The app serving ``runtime``.

    ``model_name`` is the runtime's default model and ``models`` the body of
    ``/v1/models`` (OpenAI's list shape; by default the default model alone);
    ``store_name`` is what ``/healthz`` reports; ``choose_model`` picks a model per request
    (``None``: always the runtime's default), among ``choices`` (``None``: any);
    ``allowed_origins`` are the browser origins that may open the WebSocket besides the
    loopback ones (``*`` allows any), and the ones CORS lets in (none: CORS off);
    ``limits`` bound request bodies by kind (``None``: the defaults). ``auth`` says who
    may call (default: mode ``none``); ``hosts``, when given, are the only ``Host``
    names the server answers to. ``surfaces``: the agents' settings on other protocols;
    ``resolve_model``: a tier or id to a model; ``idempotency``: how retries are known.
    """
    limits = limits or BodyLimits()
    if not isinstance(auth, Authenticator):
        auth = Authenticator(auth or AuthSettings(), runtime.store)
    owner_limits = Limiter(runtime.store, auth.settings.limits, enabled=auth.settings.limits_on)
    streams = StreamGuard(auth, owner_limits, auth.settings.stream_recheck_s)
    browsers = origins(allowed_origins)
    app = _fastapi(runtime)
    app.state.ostinato = ServerContext(
        runtime=runtime,
        model_name=model_name,
        models=models,
        store_name=store_name,
        choose_model=choose_model,
        ping_interval=ping_interval,
        allowed_origins=browsers,
        limits=limits,
        auth=auth,
        owner_limits=owner_limits,
        streams=streams,
        surfaces=surfaces or Surfaces(),
        resolve_model=resolve_model,
        idempotency=idempotency or Idempotency(),
        choices=choices,
    )
    app.add_middleware(BodyLimit, limits=limits)
    install_error_handlers(app)
    _include_routes(app)
    install_docs(app)  # the OpenAPI document, and /docs showing it
    install_identity(app, auth, browsers, hosts)  # last, so it runs first
    return app


def _fastapi(runtime: Runtime) -> FastAPI:
    return FastAPI(
        title="ostinato",
        version=getattr(ostinato, "__version__", "0"),
        description=DESCRIPTION,
        lifespan=_lifespan(runtime),
        docs_url=None,  # served by install_docs, from local files
        redoc_url=None,
    )


def _include_routes(app: FastAPI) -> None:
    # The route modules are imported when the first app is built, not with this module:
    # defining their routes is most of the server's import (FastAPI builds each route's
    # models as it is declared), and a process that imports the package without building
    # an app (the CLI's other commands, a library user's tools) need not pay it.
    from ostinato.server import (
        a2a,
        ag_ui,
        agent_protocol,
        ai_sdk,
        mcp_server,
        openai_compat,
        page,
        responses,
    )
    from ostinato.server.responses.guard import ConversationsGuard
    from ostinato.server.routes import ROUTERS, websocket
    from ostinato.server.routes import metrics as metrics_route

    app.state.metrics = None  # what /metrics serves: set by ``serve`` (routes/metrics.py)
    # A request's route is found by trying the routers in the order they are included
    # (FastAPI matches each included router's routes in turn, a few microseconds each),
    # so the routes of a conversation's turns come first: the native ones (up to the
    # WebSocket's), then the protocols' that start turns, the Agent Protocol's many
    # routes last of them; then the rest. No two routers serve the same path, so the
    # order changes no answer (bench/protocols.py shows what it saves).
    hot = ROUTERS.index(websocket.router) + 1
    for router in ROUTERS[:hot]:
        app.include_router(router)
    for base in responses.BASES:  # OpenAI's Responses API
        app.include_router(responses.make_router(base))
    app.include_router(openai_compat.router)  # POST /v1/chat/completions
    app.include_router(ai_sdk.router)  # POST /v1/ai-sdk/chat
    app.include_router(ag_ui.router)  # POST /v1/ag-ui (issue 31)
    app.include_router(agent_protocol.router)  # the Agent Protocol under /langgraph
    for router in ROUTERS[hot:]:
        app.include_router(router)
    app.include_router(a2a.router)  # A2A: the agent cards, POST /a2a (issue 31)
    app.include_router(mcp_server.router)  # /mcp: the agents as MCP tools (issue 31)
    app.include_router(responses.conversations_router)  # the Responses' Conversations API
    app.add_middleware(ConversationsGuard)  # OpenAI's SDKs kept off /v1/conversations
    app.include_router(page.router)  # the chat page at / and /c/<id>
    app.include_router(metrics_route.router)  # GET /metrics (its own token)


def _lifespan(runtime: Runtime) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Recover what a crash left running before the first request; at shutdown, stop
    the server's background work and close the runtime."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        recovered = await runtime.recover()
        if recovered:
            log.warning("closed %d turn(s) left running by a crash", len(recovered))
        lag = asyncio.ensure_future(runtime.admission.lag.watch())
        try:
            yield
        finally:
            lag.cancel()
            await app.state.ostinato.aclose()
            await runtime.close()

    return lifespan


async def build_routes(app: FastAPI) -> int:
    """Build every route's request handling, one router at a time; returns how many
    routes there are.

    FastAPI builds an included router's routes (their dependencies, their bodies' and
    responses' models) the first time a request is matched against them, on the event
    loop: 80-250 ms on this kind of machine for the first request that reaches a late
    route, which every stream open at that moment waits for. ``serve`` runs this once it
    listens; between two routers other work runs (the largest, the Agent Protocol's 32
    routes, takes about 14 ms), and a request that comes first builds what it needs.
    """
    built = 0
    for route in list(app.router.routes):
        built += sum(1 for _ in iter_route_contexts([route]))
        await asyncio.sleep(0)
    return built


async def prepare(app: FastAPI) -> None:
    """Make now what the app would otherwise make at a first request, on the event loop:
    every route's handling (``build_routes``), then the MCP SDK that ``/mcp`` serves
    with (a third of a second of imports, in a thread). ``serve`` runs it once it listens.
    """
    from ostinato.server import mcp_server  # imported with the routes (create_app)

    await build_routes(app)
    await asyncio.to_thread(mcp_server.load)


def end_streams(app: FastAPI) -> None:
    """End every open event stream (each sends an ``error`` frame with code ``closing``).

    Call it when the server starts shutting down: a server waits for open connections
    before it stops, and a live stream would otherwise keep its connection open forever.
    """
    context: ServerContext = app.state.ostinato
    context.closing.set()


def origins(allowed: Iterable[str] | None) -> frozenset[str]:
    """Origins as the WebSocket compares them: trimmed, lower case, no trailing slash."""
    allowed = allowed or ()
    return frozenset(o.strip().rstrip("/").lower() for o in allowed if o.strip())
