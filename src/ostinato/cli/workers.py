"""``ostinato serve --workers N``: N server processes on one port and one database.

One Python process runs on one core; a machine with more serves more turns with more
processes. The supervisor (this module) binds the port once, brings the database to its
schema once, and starts N workers: each is a whole ``ostinato serve`` that accepts
connections on the inherited socket (the kernel hands each new connection to one of
them) and takes its own lease. They share what several servers on one database share
(``docs/deploy.md``): one turn per conversation through holds in the store, frames and
control through a fan-out (PostgreSQL ``LISTEN/NOTIFY``, Redis when ``server.redis_url``
is set, and on SQLite the supervisor's hub, ``fanout_local``), recovery of a gone
worker's turns once its lease expires.

The supervisor forwards SIGTERM and Ctrl-C to every worker (each shuts down gracefully,
``server.process``) and exits when they all have. A worker that dies (a crash, SIGKILL)
is started again; one that cannot start (its settings are refused, exit 2) stops them
all. Workers run in their own process group, so a terminal's Ctrl-C reaches the
supervisor only, and each watches its supervisor: when it is gone, the worker shuts down.

Each worker is started as ``python -m ostinato serve <the same arguments> --workers 1
--worker-of <role>``, the role saying whose worker it is, its socket and its hub.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ostinato.config import Config
from ostinato.server.process import listen
from ostinato.store import open_store
from ostinato.store.sql.urls import parse_url

log = logging.getLogger("ostinato.workers")

RESTART_S = 1.0  # before a worker that died is started again
CRASH_LOOP = 5  # a worker that dies this many times in a row, each within ...
EARLY_S = 10.0  # ... seconds of its start, is not started again: all stop
WATCH_S = 1.0  # how often a worker checks that its supervisor is alive
STOP_SLACK_S = 30.0  # after the workers' own grace: SIGKILL for one that has not exited
REFUSED = 2  # a worker's exit code when its settings are refused


@dataclass(frozen=True, slots=True)
class WorkerRole:
    """What a worker is told: its supervisor's pid, the socket's fd, its index, and the
    hub's path (empty without one)."""

    supervisor: int
    fd: int
    index: int
    hub: str

    def encode(self) -> str:
        return f"{self.supervisor}:{self.fd}:{self.index}:{self.hub}"

    @classmethod
    def decode(cls, text: str) -> WorkerRole:
        pid, fd, index, hub = text.split(":", 3)
        return cls(int(pid), int(fd), int(index), hub)


def needs_hub(config: Config) -> bool:
    """Whether the workers need the supervisor's hub: no Redis, and not PostgreSQL."""
    return not config.server.redis_url and parse_url(config.server.database_url).kind == "sqlite"


async def watch_supervisor(role: WorkerRole) -> None:
    """Shut this worker down (as SIGTERM does) once its supervisor is gone: told by a
    pidfd where the system has them (Linux), else by asking every ``WATCH_S``."""
    try:
        await _exited(role.supervisor)
    except (AttributeError, OSError):  # no pidfd here: ask
        while os.getppid() == role.supervisor:  # noqa: ASYNC110 (nothing to wait on)
            await asyncio.sleep(WATCH_S)
    log.warning("the supervisor (pid %d) is gone: shutting down", role.supervisor)
    os.kill(os.getpid(), signal.SIGTERM)


async def _exited(pid: int) -> None:
    """Once process ``pid`` has exited (at once if it has already)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    gone = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(fd, gone.set)
    try:
        await gone.wait()
    finally:
        loop.remove_reader(fd)
        os.close(fd)


async def supervise(config: Config, argv: Sequence[str]) -> int:
    """Run ``config.server.workers`` workers until a signal stops them; the exit code."""
    count, url = config.server.workers, config.server.database_url
    if parse_url(url).kind == "memory":
        print(
            "ostinato serve: --workers needs a database the processes share (a SQLite "
            "file or PostgreSQL), not memory://",
            file=sys.stderr,
        )
        return REFUSED
    host, port = config.server.host, config.server.port
    try:
        sock = listen(host, port)
    except OSError as exc:
        print(f"ostinato serve: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return 1
    with sock, tempfile.TemporaryDirectory(prefix="ostinato-") as scratch:
        store = await open_store(url)  # the schema, once, before N processes open it
        await store.close()
        hub = None
        if needs_hub(config):
            from ostinato.fanout_local import Hub

            hub = Hub(str(Path(scratch) / "hub.sock"))
            await hub.start()
        try:
            pool = Pool(config, argv, sock.fileno(), hub.path if hub else "", scratch)
            print(
                f"ostinato serve: {count} workers on http://{host}:{port} "
                f"(supervisor pid {os.getpid()})",
                flush=True,
            )
            return await pool.run(count)
        finally:
            if hub is not None:
                await hub.close()


class Pool:
    """The running workers: started, restarted when they die, stopped on a signal."""

    def __init__(self, config: Config, argv: Sequence[str], fd: int, hub: str, scratch: str):
        self.config = config
        self.argv = list(argv)
        self.fd = fd
        self.hub = hub
        self.env = dict(os.environ)
        if config.observability.metrics and not self.env.get("PROMETHEUS_MULTIPROC_DIR"):
            metrics = Path(scratch) / "metrics"  # one /metrics for all the workers
            metrics.mkdir()
            self.env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics)
        self.stopping = asyncio.Event()
        self.code = 0
        self.children: set[asyncio.subprocess.Process] = set()
        self.signalled: float | None = None  # when SIGTERM (or Ctrl-C) came (monotonic)

    async def run(self, count: int) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._signal)
        loop.add_signal_handler(signal.SIGHUP, self._reload)
        try:
            await asyncio.gather(*(self._keep(index) for index in range(count)))
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(sig)
        if self.signalled is not None:
            took, grace = time.monotonic() - self.signalled, self.config.server.shutdown_grace_s
            late = "" if took <= grace + 1 else ", later than the grace and a second"
            log.info("stopped %.1f s after the signal (grace %g s%s)", took, grace, late)
        return self.code

    def _signal(self) -> None:
        """SIGTERM or Ctrl-C: every worker is asked to stop (``_run_one``)."""
        if self.signalled is None:
            self.signalled = time.monotonic()
        self.stopping.set()

    def _reload(self) -> None:
        """SIGHUP to the supervisor: every worker reads the configuration again."""
        for child in self.children:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGHUP)

    async def _keep(self, index: int) -> None:
        """Run worker ``index``, again each time it dies, until the pool stops."""
        early = 0
        while not self.stopping.is_set():
            began = time.monotonic()
            code = await self._run_one(index)
            if self.stopping.is_set():
                return
            if code == REFUSED:
                log.error("worker %d could not start (its settings): stopping", index)
                self._stop(REFUSED)
                return
            early = early + 1 if time.monotonic() - began < EARLY_S else 0
            if early >= CRASH_LOOP:
                log.error("worker %d died %d times just after starting: stopping", index, early)
                self._stop(1)
                return
            log.warning("worker %d exited with %s: starting it again", index, code)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(RESTART_S):
                    await self.stopping.wait()

    def _stop(self, code: int) -> None:
        self.code = code
        self.stopping.set()

    async def _run_one(self, index: int) -> int:
        role = WorkerRole(os.getpid(), self.fd, index, self.hub)
        args = ["-m", "ostinato", *self.argv, "--workers", "1", "--worker-of", role.encode()]
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            *args,
            pass_fds=(self.fd,),
            env=self.env,
            process_group=0,  # a terminal's Ctrl-C reaches the supervisor alone
        )
        self.children.add(child)
        exited = asyncio.ensure_future(child.wait())
        exited.add_done_callback(lambda _: self.children.discard(child))
        stop = asyncio.ensure_future(self.stopping.wait())
        await asyncio.wait([exited, stop], return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if not exited.done():
            child.send_signal(signal.SIGTERM)
            patience = self.config.server.shutdown_grace_s + STOP_SLACK_S
            done, _ = await asyncio.wait([exited], timeout=patience)
            if not done:
                log.error("worker %d did not stop within %g s: killed", index, patience)
                child.kill()
        return await exited
