"""Running a step's tool calls: concurrently, each under its deadline (``loop.tools``),
with heartbeats for the quiet ones; each finish is written as it happens."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ostinato import observe
from ostinato.frames import ToolProgress
from ostinato.loop.heartbeat import Heartbeat
from ostinato.loop.record import TurnRecord
from ostinato.loop.tools import Consent, ToolRun, run_tool
from ostinato.messages import ToolUseBlock
from ostinato.tools.registry import ToolCatalog


class ToolRunner:
    def __init__(
        self,
        record: TurnRecord,
        catalog: ToolCatalog,
        *,
        consent: Consent | None,
        owner: str | None,
        workdir: Path | None,
        extras: dict[str, Any],
        heartbeat_interval: float,
    ) -> None:
        self.record, self.catalog = record, catalog
        self.consent, self.owner, self.workdir, self.extras = consent, owner, workdir, extras
        self.heartbeat = Heartbeat(self._beat, heartbeat_interval)

    async def run(self, calls: tuple[ToolUseBlock, ...], broken: dict[str, str]) -> list[ToolRun]:
        """Run the calls concurrently; results come back in call order.

        Each finish is written as it happens; the last one rides along with the results
        message, since both happen at that moment.
        """
        if len(calls) == 1 and not broken:  # the common case: no task to spawn
            return [await self._tool(calls[0])]
        runs: dict[str, ToolRun] = {}
        tasks: set[asyncio.Task[ToolRun]] = set()
        for call in calls:
            if call.id in broken:
                runs[call.id] = ToolRun(call, broken[call.id], 0.0, broken[call.id], "skipped")
            else:
                tasks.add(asyncio.ensure_future(self._tool(call)))
        pending = tasks
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    run = task.result()
                    runs[run.call.id] = run
                    if pending:
                        await self.record.finish_one(run)
        finally:
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        return [runs[call.id] for call in calls]

    def stop(self) -> None:
        """The turn ended: no more heartbeats."""
        self.heartbeat.stop()

    async def _tool(self, call: ToolUseBlock) -> ToolRun:
        def progress(text: str) -> None:
            self.heartbeat.touch(call.id)
            self._progress(call.id, call.name, text, False)

        self.heartbeat.start(call.id, call.name)
        watch = observe.tool_call(call.id, call.name, call.input)  # current until it ends
        try:  # not a ``with``: the two calls it would add are the observation's per step
            run = await run_tool(
                call,
                self.catalog,
                self.record.turn,
                consent=self.consent,
                owner=self.owner,
                workdir=self.workdir,
                progress=progress,
                waiting=lambda now: self._waiting(call.id, now),
                seq=self.record.seq,
                extras=self.extras,
                cut_short=lambda text: self.record.cut_short(call.id, text),
            )
        except BaseException as exc:
            watch.failed(exc)
            raise
        finally:
            self.heartbeat.done(call.id)
        watch.ran(run.status, run.content)
        return run

    def _waiting(self, tool_use_id: str, now: bool) -> None:
        """Beats are deferred while a call waits for a person (the card says so)."""
        if now:
            self.heartbeat.waiting(tool_use_id)
        else:
            self.heartbeat.resumed(tool_use_id)

    def _progress(self, tool_use_id: str, name: str, text: str, heartbeat: bool) -> None:
        self.record.emit(
            ToolProgress(
                run_id=self.record.turn.run_id,
                seq=self.record.seq,
                tool_use_id=tool_use_id,
                name=name,
                text=text,
                heartbeat=heartbeat,
            )
        )

    def _beat(self, tool_use_id: str, name: str, seconds: float) -> None:
        self._progress(tool_use_id, name, f"still running ({seconds:.0f} s)", True)
