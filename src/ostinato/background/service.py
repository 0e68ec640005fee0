"""The background work of one ``ostinato serve`` process: the schedules' poller
(``firer``), the idle-gated jobs' poller (``jobs``) and the daily retention run
(``retention``), each when its setting is on, started beside the server and stopped
with it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from ostinato.background.firer import Firer, kill_point
from ostinato.background.jobs import JobRunner
from ostinato.background.registry import default_jobs
from ostinato.background.retention import Retention
from ostinato.background.schedules import Schedules
from ostinato.config.background import BackgroundSection
from ostinato.identity.limits import Limiter
from ostinato.models.base import Model


class Background:
    """``runtime``'s background work under ``settings``; ``model`` makes the jobs'
    calls (the deployment's summarizer tier), ``capacity`` is memory's per scope;
    ``env`` may name a kill point (crash tests); ``turns``: the per-owner limits that
    the turns firings start count in; ``retention_days``: delete conversations idle
    longer (0: never)."""

    def __init__(
        self,
        runtime: Any,
        settings: BackgroundSection,
        *,
        model: Model | None,
        capacity: int,
        env: Mapping[str, str],
        turns: Limiter | None = None,
        retention_days: int = 0,
    ) -> None:
        self.schedules = Schedules(runtime.store, settings)
        kill = kill_point(env)
        self.firer = (
            Firer(runtime, self.schedules, kill=kill, turns=turns) if settings.enabled else None
        )
        jobs = settings.jobs
        self.jobs = (
            JobRunner(
                runtime.store,
                default_jobs(jobs),
                jobs,
                model=model,
                capacity=capacity,
                spend=runtime.spend,
            )
            if jobs.enabled
            else None
        )
        self.retention = (
            Retention(runtime.store, retention_days, runtime.data_dir)
            if retention_days > 0
            else None
        )
        self._tasks: list[tuple[Callable[[], None], asyncio.Task[None]]] = []

    def start(self) -> None:
        for poller in (self.firer, self.jobs, self.retention):
            if poller is not None:
                self._tasks.append((poller.stop, asyncio.create_task(poller.run())))

    async def stop(self) -> None:
        for stop, _ in self._tasks:
            stop()
        for _, task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
