"""``ostinato serve``: open the store, pick the model, run the HTTP API under uvicorn.

The model is chosen once at start (``ostinato.models.choice``: OSTINATO_MODEL, a provider
key, a local OpenAI-compatible server, or the offline model); a request may pick another
with the ``x-ostinato-model-*`` headers. The data directory (``--data-dir`` or
``OSTINATO_DATA_DIR``, default ``./ostinato-data``) holds each conversation's workdir, where
the file and shell tools work; ``--approval-timeout`` (``OSTINATO_APPROVAL_TIMEOUT``,
default 300 s) is how long a call waits for a person's approval. Crashed turns are
recovered by the app's lifespan before the first request; SIGTERM or Ctrl-C shut down
gracefully (running turns end ``cancelled``).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import uvicorn
from fastapi import Request

from ostinato import __version__
from ostinato.config import Config, ConfigError, load_config
from ostinato.deployment import build_runtime
from ostinato.errors import InvalidRequest, ModelError
from ostinato.models.base import Model
from ostinato.models.choice import (
    ALLOW_BASE_URL_ENV,
    DefaultModel,
    ModelOverride,
    Tiers,
    autodetect_default,
    create_model,
    describe_models,
    select_model,
)
from ostinato.server import BodyLimits, ModelChooser, create_app, end_streams
from ostinato.store import describe_url, open_store

DATABASE_ENV = "OSTINATO_DATABASE_URL"
DATA_DIR_ENV = "OSTINATO_DATA_DIR"
APPROVAL_TIMEOUT_ENV = "OSTINATO_APPROVAL_TIMEOUT"
DEFAULT_DATA_DIR = "ostinato-data"
DEFAULT_APPROVAL_TIMEOUT = 300.0
GRACE_S = 10  # how long a shutdown waits for requests (a JSON turn) before cancelling


class _Server(uvicorn.Server):
    """Ends the event streams as soon as a shutdown begins, so open SSE connections do
    not hold it up; clients reconnect with ``Last-Event-ID``."""

    def __init__(self, config: uvicorn.Config, on_shutdown: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_shutdown = on_shutdown

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._on_shutdown()
        await super().shutdown(sockets)


@dataclass(frozen=True, slots=True)
class ModelSetup:
    """The deployment's model: the default, its tiers, and the per-request chooser."""

    default: DefaultModel
    tiers: Tiers
    model: Model
    allow_base_url: bool = False  # OSTINATO_ALLOW_CALLER_BASE_URL=1

    def choose(self, request: Request) -> Model | None:
        override = ModelOverride.from_headers(request.headers)
        if override is None:
            return None
        selection = select_model(default=self.default.model_id, tiers=self.tiers, request=override)
        try:
            return selection.create()
        except ModelError as exc:  # e.g. no key for the provider asked for
            raise InvalidRequest(f"cannot use model {selection.model_id!r}: {exc.message}") from exc


async def setup_model(default_id: str | None = None) -> ModelSetup:
    """The one place the server decides which model answers: the config's default (an id
    or a tier), else autodetect."""
    default = await autodetect_default()
    if default_id:
        tiers = Tiers.for_default(default.model_id)
        model_id = default_id if ":" in default_id else tiers.resolve(default_id)
        default = DefaultModel(model_id, "the config file's models.default")
    return ModelSetup(
        default,
        Tiers.for_default(default.model_id),
        create_model(default.model_id),
        allow_base_url=os.environ.get(ALLOW_BASE_URL_ENV) == "1",
    )


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    """Where conversations keep their files, and how long an approval waits."""

    data_dir: Path
    approval_timeout: float

    @classmethod
    def resolve(
        cls,
        data_dir: str | None = None,
        approval_timeout: float | None = None,
        config: Config | None = None,
    ) -> RuntimeSettings:
        """Flags first, then the environment, then the config file, then the defaults.
        ``ValueError`` if bad."""
        directory = (
            data_dir
            or os.environ.get(DATA_DIR_ENV)
            or (config.server.data_dir if config else None)
            or DEFAULT_DATA_DIR
        )
        timeout: float | str = (
            approval_timeout
            if approval_timeout is not None
            else os.environ.get(APPROVAL_TIMEOUT_ENV)
            or (config.approvals.timeout if config else None)
            or DEFAULT_APPROVAL_TIMEOUT
        )
        try:
            seconds = float(timeout)
        except ValueError:
            seconds = float("nan")
        if not seconds > 0 or seconds == float("inf"):
            raise ValueError(f"the approval timeout must be a number of seconds > 0: {timeout!r}")
        return cls(Path(directory).expanduser().resolve(), seconds)


async def serve(
    host: str,
    port: int,
    database_url: str | None,
    *,
    data_dir: str | None = None,
    approval_timeout: float | None = None,
    config_path: str | None = None,
    out: TextIO | None = None,
) -> int:
    try:
        config, source = load_config(config_path)
    except ConfigError as exc:
        print(f"ostinato serve: {exc.source}:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        return 2
    url = database_url or os.environ.get(DATABASE_ENV) or config.server.database_url or None
    try:
        settings = RuntimeSettings.resolve(data_dir, approval_timeout, config)
        setup = await setup_model(config.models.default)
        store = await open_store(url)
    except (ValueError, ModelError) as exc:
        print(f"ostinato serve: {exc}", file=sys.stderr)
        return 2
    out = out or sys.stdout
    print(f"ostinato {__version__}", file=out)
    print(f"  config:   {source}", file=out)
    print(f"  model:    {setup.default}", file=out)
    print(f"  database: {describe_url(url)}", file=out)
    print(f"  data dir: {settings.data_dir}  (conversation workdirs)", file=out)
    print(f"  approval: waits {settings.approval_timeout:g} s for a person", file=out)
    print(f"  api:      http://{host}:{port}/v1  (docs at /docs)", file=out, flush=True)
    try:
        settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        deployment = await build_runtime(
            config,
            store,
            default_model=setup.model,
            default_id=setup.default.model_id,
            data_dir=settings.data_dir,
            approval_timeout=settings.approval_timeout,
        )
    except OSError as exc:
        await store.close()
        print(f"ostinato serve: cannot use the data dir: {exc}", file=sys.stderr)
        return 2
    except (ConfigError, ValueError, ModelError) as exc:
        await store.close()
        print(f"ostinato serve: {exc}", file=sys.stderr)
        return 2
    runtime = deployment.runtime
    skills = ", ".join(s.id for s in runtime.router.skills)
    print(f"  skills:   {skills}", file=out, flush=True)
    chooser: ModelChooser = setup.choose
    limits = BodyLimits()
    app = create_app(
        runtime,
        model_name=setup.default.model_id,
        models=describe_models(setup.default, setup.tiers),
        store_name=describe_url(url),
        choose_model=chooser,
        allowed_origins=config.server.allowed_origins or None,
        limits=limits,
    )
    logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(name)s: %(message)s")
    uvicorn_config = uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        log_level="info",
        timeout_graceful_shutdown=GRACE_S,
        ws_max_size=limits.message_bytes,  # a bigger WebSocket message closes with 1009
    )
    server = _Server(uvicorn_config, lambda: end_streams(app))
    try:
        await server.serve()
    finally:
        await deployment.aclose()
    return 0 if server.started else 1
