"""``Sandbox``: runs forged tools' code in worker processes, off the server's event loop.

A few worker processes (``worker.py``) are kept warm and each serves one run at a time;
a run waits for a free worker, handed out fairly between owners (``fairness``). The
server side of a run is all ``await``: it sends the job, answers the code's ``fetch``
requests through ostinato's SSRF-safe ``Fetcher``, and reads the result. The wall-time
limit is kept here: a run still going when it is up (or whose turn is cancelled) has its
worker killed, and a new worker is started for the next run. A worker that crashes
takes only its own run with it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ostinato.errors import ToolError
from ostinato.messages import JSON
from ostinato.tools.fetch import Fetcher
from ostinato.tools.forge.fairness import FairSlots, RunRate
from ostinato.tools.forge.limits import Limits, SandboxError, check_code_size

_WORKER = str(Path(__file__).with_name("worker.py"))


@dataclass(slots=True, eq=False)
class _Worker:
    process: asyncio.subprocess.Process

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(message, ensure_ascii=False) + "\n").encode())
        await self.process.stdin.drain()

    async def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        try:
            line = await self.process.stdout.readline()
        except ValueError:  # a line over the limit: more than any result may be
            too_long = "the sandbox's worker sent more than a result may be"
            raise SandboxError(too_long, "output") from None
        if not line:
            code = await self.process.wait()
            raise SandboxError(f"the sandbox's worker stopped (exit status {code})", "crash")
        try:
            message: dict[str, Any] = json.loads(line)
        except ValueError:
            raise SandboxError("the sandbox's worker sent something unreadable", "crash") from None
        return message

    async def kill(self) -> None:
        if self.alive:
            self.process.kill()
        await self.process.wait()


class Sandbox:
    """Runs JavaScript functions under ``limits`` in up to ``workers`` processes at once.

    ``fetcher`` is what the code's ``fetch`` goes through (None: the code has no
    network, whatever it asks). Close it with ``aclose`` (the server does at shutdown).
    """

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        workers: int = 2,
        fetcher: Fetcher | None = None,
        per_owner: int = 1,
        runs_per_minute: int = 60,
    ) -> None:
        self.limits = limits or Limits()
        self.fetcher = fetcher
        self._slots = FairSlots(workers, per_owner)
        self._rate = RunRate(runs_per_minute)
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()

    async def run(
        self,
        code: str,
        args: JSON,
        *,
        network: bool = False,
        limits: Limits | None = None,
        owner: str | None = None,
    ) -> Any:
        """The function's result (any JSON value); ``SandboxError`` when it throws or
        passes a limit. ``owner``'s runs share the workers fairly with everyone else's
        (``fairness``): one at a time each (``per_owner``), ``runs_per_minute`` a minute."""
        check_code_size(code)
        self._rate.count(owner)
        limits = limits or self.limits
        job = {
            "code": code,
            "args": json.dumps(args),
            "limits": limits.as_json(),
            "network": network and self.fetcher is not None,
        }
        async with self._slots.slot(owner):
            worker = await self._take()
            healthy = False
            try:
                async with asyncio.timeout(limits.wall_s):
                    done = await self._job(worker, job)
                healthy = True
            except TimeoutError:
                raise SandboxError(
                    f"the code ran past its {limits.wall_s:g} s of wall time and was stopped",
                    "wall",
                ) from None
            finally:
                self._busy.discard(worker)
                if healthy and worker.alive:
                    self._idle.append(worker)
                else:
                    await worker.kill()
        if not done["ok"]:
            raise SandboxError(str(done["error"]), done.get("limit", "error"))
        return json.loads(done["json"])

    async def _job(self, worker: _Worker, job: dict[str, Any]) -> dict[str, Any]:
        """Run one job on ``worker`` and return its ``done`` report (the worker reports
        the code's exceptions and the engine's limits, and stays fit for another run)."""
        await worker.send({"run": job})
        while True:
            message = await worker.receive()
            if "requests" in message:
                answers = await asyncio.gather(*(self._fetch(r) for r in message["requests"]))
                await worker.send({"answers": list(answers)})
                continue
            done: dict[str, Any] = message["done"]
            return done

    async def _fetch(self, request: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = {"id": request.get("id")}
        method = str(request.get("method", "GET"))
        if self.fetcher is None:
            return {**answer, "ok": False, "error": "this deployment gives tools no network"}
        if method not in ("GET", "HEAD"):
            return {**answer, "ok": False, "error": f"only GET and HEAD, not {method}"}
        try:
            result = await self.fetcher.fetch(str(request.get("url", "")), method)  # type: ignore[arg-type]
        except ToolError as exc:
            return {**answer, "ok": False, "error": exc.message}
        response = {
            "status": result.status,
            "ok": 200 <= result.status < 300,
            "url": result.url,
            "contentType": result.content_type,
            "text": result.text(),
            "truncated": result.truncated,
        }
        return {**answer, "ok": True, "response": response}

    async def _take(self) -> _Worker:
        while self._idle:
            worker = self._idle.pop()
            if worker.alive:
                self._busy.add(worker)
                return worker
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",  # isolated: no PYTHON* variables, no user site, not the current directory
            _WORKER,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={},  # nothing of the server's environment: no keys, tokens or proxies
            limit=_line_limit(self.limits),
        )
        worker = _Worker(process)
        self._busy.add(worker)
        return worker

    async def aclose(self) -> None:
        """Stop every worker (a run still going ends with a crash error)."""
        workers = [*self._idle, *self._busy]
        self._idle.clear()
        await asyncio.gather(*(w.kill() for w in workers), return_exceptions=True)


def _line_limit(limits: Limits) -> int:
    """The longest line the server reads from a worker: a result at the output limit,
    escaped, with room to spare; past it the run fails instead of filling memory."""
    return max(limits.output_bytes, 64 * 1024) * 8
