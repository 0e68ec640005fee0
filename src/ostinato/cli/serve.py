"""``ostinato serve``: load the settings, open the store, pick the model, run the HTTP
API under uvicorn.

Every setting comes from ``ostinato.config`` (flags over the environment over the file over
the defaults). The model is chosen once at start: ``models.default`` when set, else
autodetected (``ostinato.models.choice``: a provider key, a local OpenAI-compatible
server, or the offline model); a request may pick another with the ``x-ostinato-model-*``
headers. The banner says what was chosen and where from. The port is bound before the
store is opened (a server that cannot listen changes nothing). Turns left running by a
server that is gone are recovered by the app's lifespan before the first request, and
later by this server's lease keeper (``ostinato.leases``). SIGTERM or Ctrl-C shut down
gracefully (``ostinato.server.process``): running turns get ``server.shutdown_grace_s``
seconds to end, then end ``cancelled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import uvicorn
from fastapi import Request

from ostinato.admission import Admission
from ostinato.background.service import Background
from ostinato.cli.banner import banner, tool_warnings
from ostinato.cli.workers import WorkerRole, watch_supervisor
from ostinato.config import Config, ConfigError, load_config
from ostinato.deployment import Deployment, build_runtime, provider_settings
from ostinato.errors import InvalidRequest, ModelError
from ostinato.identity.binding import allowed_hosts, refuse_bind
from ostinato.leases import Lease
from ostinato.models.allowed import ModelChoices
from ostinato.models.base import Model
from ostinato.models.choice import (
    TIER_NAMES,
    DefaultModel,
    ModelOverride,
    ProviderSettings,
    Tiers,
    autodetect_default,
    create_model,
    describe_models,
    select_model,
)
from ostinato.models.providers import NO_KEY
from ostinato.models.reach import ServerReach
from ostinato.observe import logs
from ostinato.observe import setup as observe_setup
from ostinato.reload import Reloader
from ostinato.runtime import Runtime
from ostinato.server import BodyLimits, ModelChooser, create_app, prepare
from ostinato.server.idempotency import Idempotency
from ostinato.server.process import REQUESTS_GRACE_S, GracefulServer, listen
from ostinato.server.routes.metrics import MetricsEndpoint
from ostinato.server.surfaces import surfaces_of
from ostinato.store import describe_url, open_store
from ostinato.store.base import Store
from ostinato.store.leases import LeaseStore
from ostinato.store.sql.urls import parse_url

# the collector's thresholds once serving (``settle_collector``): a first pass every 20,000
# allocations, not 700; the older generations' as Python's defaults
COLLECTOR_THRESHOLDS = (20_000, 10, 10)


@dataclass(frozen=True, slots=True)
class ModelSetup:
    """The deployment's model: the default, its tiers, and the per-request chooser."""

    default: DefaultModel
    tiers: Tiers
    model: Model
    allow_base_url: bool = False  # models.allow_caller_base_url
    settings: ProviderSettings = field(default_factory=ProviderSettings)
    choices: ModelChoices | None = None  # what callers may choose (models.choosable)

    def choose(self, request: Request) -> Model | None:
        override = ModelOverride.from_headers(request.headers)
        if override is None:
            return None
        selection = select_model(
            default=self.default.model_id,
            tiers=self.tiers,
            request=override,
            allow_base_url=self.allow_base_url,
        )
        try:
            return selection.create(settings=self.settings)
        except ModelError as exc:  # e.g. no key for the provider asked for
            raise InvalidRequest(f"cannot use model {selection.model_id!r}: {exc.message}") from exc


async def setup_model(config: Config, env: Mapping[str, str] | None = None) -> ModelSetup:
    """The one place the server decides which model answers: ``models.default`` (an id or
    a tier), else autodetected."""
    settings = provider_settings(config.models)
    configured = config.models.default
    if configured and ":" in configured:
        default = DefaultModel(configured, "set by models.default / OSTINATO_MODEL")
    else:
        default = await autodetect_default(env, settings=settings)
        if configured:  # a tier, of the autodetected provider's tiers
            tiers = Tiers.for_default(default.model_id, config.models.tiers)
            reason = f"models.default is the tier {configured!r}; {default.reason}"
            default = DefaultModel(tiers.resolve(configured), reason)
    tiers = Tiers.for_default(default.model_id, config.models.tiers)
    choices = ModelChoices.of(
        config.models.choosable,
        tiers,
        default.model_id,
        own_key_lifts=config.models.caller_key_chooses_any,
    )
    return ModelSetup(
        default,
        tiers,
        create_model(default.model_id, settings=settings),
        allow_base_url=config.models.allow_caller_base_url,
        settings=settings,
        choices=choices,
    )


def resolver(deployment: Deployment) -> Callable[[str], Model]:
    """The deployment's models by tier or id, a model it cannot build a client error."""

    def resolve(name: str) -> Model:
        try:
            return deployment.models(name)
        except ModelError as exc:
            raise InvalidRequest(f"cannot use model {name!r}: {exc.message}") from exc

    return resolve


def data_dir_of(config: Config) -> Path:
    return Path(config.server.data_dir).expanduser().resolve()


class _Refused(Exception):
    """The server cannot start; the message says why, in one sentence."""


async def start(config: Config, *, hub: str = "") -> tuple[ModelSetup, Deployment]:
    """The model, the store and the runtime, from the settings; ``_Refused`` if any
    of them cannot be had. ``hub``: the supervisor's fan-out hub, for a worker."""
    data_dir = data_dir_of(config)
    try:
        setup = await setup_model(config)
        store = await open_store(config.server.database_url)
    except (ValueError, ModelError, InvalidRequest) as exc:
        raise _Refused(str(exc)) from exc
    try:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        deployment = await build_runtime(
            config,
            store,
            default_model=setup.model,
            default_id=setup.default.model_id,
            data_dir=data_dir,
            reported_window=setup.default.window,
        )
    except OSError as exc:
        await store.close()
        raise _Refused(f"cannot use the data dir: {exc}") from exc
    except (ConfigError, ValueError, ModelError) as exc:
        await store.close()
        raise _Refused(str(exc)) from exc
    if isinstance(store, LeaseStore):  # recovery then leaves other live servers' turns alone
        deployment.runtime.lease = Lease(store, ttl=config.server.lease_ttl_s)
    await fan_out(config, store, deployment, hub)
    return setup, deployment


async def fan_out(config: Config, store: Store, deployment: Deployment, hub: str = "") -> None:
    """Relay the bus's frames and commands to the other servers on the same database
    (``ostinato.fanout``): over Redis if ``server.redis_url`` is set, else over
    PostgreSQL ``LISTEN/NOTIFY`` on a PostgreSQL store, else over the supervisor's
    ``hub`` for a worker of ``--workers`` (a SQLite or memory store alone: none);
    ``_Refused`` if its connection cannot be had."""
    from ostinato.fanout import Relay, Transport
    from ostinato.store import is_postgres

    channel = config.server.fanout_channel
    transport: Transport
    if config.server.redis_url:
        from ostinato.fanout_redis import RedisTransport

        transport = RedisTransport(config.server.redis_url, channel=channel)
    elif is_postgres(store):
        from ostinato.fanout_pg import PostgresTransport

        transport = PostgresTransport(store.engine.url, channel=channel)
    elif hub:
        from ostinato.fanout_local import HubTransport

        transport = HubTransport(hub)
    else:
        return
    try:
        await Relay(transport, store).start(deployment.runtime.bus)
    except Exception as exc:  # OSError, a driver's own connection error, a bad URL
        await deployment.runtime.close()
        raise _Refused(f"cannot listen for other servers' frames: {exc}") from exc


def settings(
    config_path: str | None, overrides: Mapping[str, Any] | None, dangerously_public: bool
) -> tuple[Config, str] | int:
    """The settings and where they came from; the exit code (2, said why) if they are bad
    or refused. A database URL we cannot use is refused here, before anything is opened."""
    try:
        config, source = load_config(config_path, overrides=overrides)
        parse_url(config.server.database_url)
        refused = refuse_bind(
            config.auth, config.server.host, dangerously_public=dangerously_public
        )
    except ConfigError as exc:
        print(f"ostinato serve: {exc.source}:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        return 2
    except ValueError as exc:
        refused = str(exc)
    if refused:
        print(f"ostinato serve: {refused}", file=sys.stderr)
        return 2
    return config, source


async def serve(
    config_path: str | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    out: TextIO | None = None,
    dangerously_public: bool = False,
    worker_of: str | None = None,
    argv: Sequence[str] = (),
    loaded: tuple[Config, str] | None = None,
) -> int:
    """Run the server until it is stopped; ``overrides`` are the command line's settings.
    In auth mode ``none`` it listens only on a loopback address, unless
    ``dangerously_public`` (``--dangerously-serve-without-auth``). With ``server.workers``
    over 1 this process supervises that many workers (``cli.workers``), each started with
    ``argv`` (this command's arguments) and a ``worker_of`` role. ``loaded``: the
    settings and their source, read already (``cli.main`` reads them to choose the event
    loop); else they are read here."""
    hold_hangups()  # a SIGHUP while starting must not end the process
    logging.basicConfig(level=logging.INFO, format=logs.PLAIN)
    if loaded is None:
        read = settings(config_path, overrides, dangerously_public)
        if isinstance(read, int):
            return read
        loaded = read
    config, source = loaded
    logs.configure(config.observability.log_format)
    role = WorkerRole.decode(worker_of) if worker_of else None
    if role is None and config.server.workers > 1:
        from ostinato.cli.workers import supervise

        gc.enable()  # off while the command started (cli.main); a supervisor runs long
        return await supervise(config, argv)
    try:
        observed = observe_setup.configure(config.observability)
    except observe_setup.ObservabilityUnavailable as exc:
        print(f"ostinato serve: {exc}", file=sys.stderr)
        return 2
    try:
        return await _serve(config, source, out, dangerously_public, observed, role, overrides)
    finally:
        observed.close()


async def _serve(
    config: Config,
    source: str,
    out: TextIO | None,
    dangerously_public: bool,
    observed: observe_setup.Installed,
    role: WorkerRole | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> int:
    host, port = config.server.host, config.server.port
    try:  # before the store: a server that cannot listen must change nothing
        sock = socket.socket(fileno=role.fd) if role is not None else listen(host, port)
    except OSError as exc:
        print(f"ostinato serve: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return 1
    try:
        setup, deployment = await start(config, hub=role.hub if role is not None else "")
    except _Refused as exc:
        sock.close()
        print(f"ostinato serve: {exc}", file=sys.stderr)
        return 2
    try:
        if role is None or role.index == 0:  # one banner for a supervisor's workers
            warnings = await tool_warnings(config, deployment)
            banner(config, source, setup.default, deployment, warnings, out or sys.stdout)
        watching = asyncio.ensure_future(watch_supervisor(role)) if role is not None else None
        path = None if source == "built-in defaults" else source
        reloader = Reloader(deployment, config, path, overrides)
        try:
            return await run(
                config, setup, deployment, sock, dangerously_public, observed, reloader
            )
        finally:
            if watching is not None:
                watching.cancel()
    finally:
        sock.close()
        await deployment.aclose()


def body_limits(config: Config) -> BodyLimits:
    """The request body limits the settings ask for (``[requests]``)."""
    asked = config.requests
    return BodyLimits(
        asked.message_bytes, asked.metadata_bytes, asked.upload_bytes, asked.import_bytes
    )


async def run(
    config: Config,
    setup: ModelSetup,
    deployment: Deployment,
    sock: socket.socket,
    dangerously_public: bool,
    observed: observe_setup.Installed | None = None,
    reloader: Reloader | None = None,
) -> int:
    """Serve the app on ``sock`` under uvicorn until a signal stops it (gracefully:
    ``ostinato.server.process``; SIGHUP reloads: ``reloader``); 0 once it has served."""
    runtime, url, bounds = deployment.runtime, config.server.database_url, config.server
    runtime.admission = Admission(
        bounds.max_turns, bounds.admission_wait_s, bounds.admission_queue, bounds.max_starting
    )
    chooser: ModelChooser = setup.choose
    limits = body_limits(config)
    app = create_app(
        runtime,
        model_name=setup.default.model_id,
        models=describe_models(setup.default, setup.tiers),
        store_name=describe_url(url),
        choose_model=chooser,
        allowed_origins=config.server.allowed_origins,
        limits=limits,
        auth=config.auth,
        hosts=allowed_hosts(config.auth, config.server.host, dangerously_public=dangerously_public),
        surfaces=surfaces_of(config.agents, config.default_agent().id),
        resolve_model=resolver(deployment),
        idempotency=Idempotency(window_s=config.requests.idempotency_window_s),
        choices=setup.choices,
    )
    operate(app, config, observed, reloader)
    if base_url := setup.settings.base_url:  # configured: /healthz says whether it answers
        app.state.model_server = ServerReach(base_url, setup.settings.api_key or NO_KEY)
    uvicorn_config = uvicorn.Config(
        app,
        host=config.server.host,
        port=config.server.port,
        lifespan="on",
        log_level="info",
        log_config=log_config(config),
        timeout_graceful_shutdown=REQUESTS_GRACE_S,
        ws_max_size=limits.message_bytes,  # a bigger WebSocket message closes with 1009
    )
    server = GracefulServer(uvicorn_config, app, runtime, grace=bounds.shutdown_grace_s)
    background = background_of(config, deployment, app)
    app.state.schedules, app.state.jobs_settings = background.schedules, config.background.jobs
    background.start()
    server.before_drain.append(background.stop)  # before the store closes (process.py)
    server.once_started.append(lambda: prepare(app))  # not at the first requests (app.py)
    settle_collector()
    try:
        await server.serve(sockets=[sock])
    finally:
        await background.stop()
    return 0 if server.started else 1


def settle_collector() -> None:
    """The cyclic collector, as a server runs it (docs/performance.md). What start-up made
    lives as long as the process: collected once, then frozen, full passes skip it. A
    full pass is due when the objects that outlived two passes grew by a quarter since
    the last; with start-up frozen that quarter is small, so under load (1,000 open
    turns, whose state lives for seconds) full passes came every second or so, each
    walking every turn's objects (up to 0.4 s with the loop stopped). A first pass every
    ``COLLECTOR_THRESHOLDS[0]`` allocations instead of 700 makes every pass rarer; cyclic
    garbage waits at most that many allocations. Then the collector is turned back on
    (off while the command started: ``cli.main``)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*COLLECTOR_THRESHOLDS)
    gc.enable()


def operate(
    app: Any, config: Config, observed: observe_setup.Installed | None, reloader: Reloader | None
) -> None:
    """What an operator reaches besides the API: ``/metrics``, and reloading."""
    app.state.metrics = metrics_endpoint(config, observed)
    if observed is not None and observed.metrics is not None:
        context = app.state.ostinato
        tools, models = metric_labels(config, context.runtime, context.model_name)
        observed.metrics.bound(tools=tools.__contains__, models=models.__contains__)
    app.state.reloader = reloader
    if reloader is not None:
        listen_for_reloads(reloader, reloader.deployment.runtime)


def metric_labels(config: Config, runtime: Runtime, default: str) -> tuple[set[str], set[str]]:
    """The tool and model names ``/metrics`` may name: the tools of the deployment's
    static sources (built-ins, OpenAPI documents; not a person's own nor an MCP
    server's, listed per turn) and the names of its configured models."""
    tools = {t.name for s in runtime.mount.sources if s.lister is None for t in s.tools}
    asked = {default, *TIER_NAMES, *config.models.tiers, *config.models.tiers.values()}
    asked |= {config.models.router, config.models.summarizer, *(a.tier for a in config.agents)}
    models: set[str] = set()
    for name in asked:
        with contextlib.suppress(Exception):  # a tier whose provider has no key: unused
            models.add(runtime.models(name).name if runtime.models else name)
    return tools, models


_HELD: list[int] = []  # SIGHUPs that came while the server started


def hold_hangups() -> None:
    """Until the server listens for reloads, a SIGHUP (whose default action ends the
    process) is kept; ``listen_for_reloads`` then reloads once for those kept."""
    with contextlib.suppress(ValueError):  # not the main thread: no signals here
        signal.signal(signal.SIGHUP, lambda signum, _frame: _HELD.append(signum))


def listen_for_reloads(reloader: Reloader, runtime: Runtime) -> None:
    """SIGHUP reads the configuration again, and so does another server's reload
    (``POST /v1/admin/reload`` there sends a ``reload`` command to every server)."""

    async def asked(_conversation_id: str, _data: object) -> None:
        await reloader.reload_logged()

    def hup() -> None:
        runtime.keep(asyncio.ensure_future(reloader.reload_logged()))

    runtime.bus.on("reload", asked)
    with contextlib.suppress(NotImplementedError, RuntimeError):  # no signals here
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, hup)
    if _HELD:  # asked while starting: the configuration is read again now
        logging.getLogger("ostinato.server").info("a SIGHUP came while starting: reloading")
        _HELD.clear()
        hup()


def background_of(config: Config, deployment: Deployment, app: Any) -> Background:
    """The schedules' and the memory jobs' pollers; the turns that firings start count
    in the owners' limits (the app's own ``Limiter``)."""
    return Background(
        deployment.runtime,
        config.background,
        model=deployment.models(config.models.summarizer),
        capacity=config.memory.capacity,
        env=os.environ,
        turns=app.state.ostinato.owner_limits,
        retention_days=config.data.retention_days,
    )


def log_config(config: Config) -> dict[str, Any] | None:
    """uvicorn's own logging, or none with JSON lines: its loggers then go through the
    root's formatter (``observe.logs``)."""
    if config.observability.log_format == "json":
        return None
    return uvicorn.config.LOGGING_CONFIG


def metrics_endpoint(
    config: Config, observed: observe_setup.Installed | None
) -> MetricsEndpoint | None:
    """What ``/metrics`` serves: the installed Prometheus backend's text, if any."""
    backend = observed.metrics if observed is not None else None
    if backend is None:
        return None
    token = config.observability.metrics_token
    secret = token.get_secret_value() if token is not None else None
    return MetricsEndpoint(backend.exposition, backend.content_type, secret)
