"""The server process: its listening socket, taken first, and its graceful shutdown.

``listen`` binds the socket before ``ostinato serve`` opens the store: a second server
started on a port that is taken exits there, having read and changed nothing (the app's
start-up recovery never runs in it).

``GracefulServer`` is uvicorn's server with ostinato's shutdown. Once it listens it starts
the work in ``once_started`` (``serve`` prepares the app there: ``server.app.prepare``);
a shutdown cancels what is left of it. On SIGTERM (or Ctrl-C):

0. the background pollers (schedules, memory jobs: ``before_drain``) stop, while the
   store is still open: none ticks against a closed store;
1. no new turn begins: a new message, a card's answer, or a decision that needs a new
   turn gets 503 ``shutting_down`` with ``Retry-After``, and ``/healthz`` answers 503
   ``draining``; a message already waiting in a conversation's queue stays stored there
   for the next server to run (its waiting request gets a 503 that says so);
2. running turns get ``grace`` seconds (the setting ``server.shutdown_grace_s``,
   default 10) to end by themselves, while the socket still answers; with another
   server live on the same store, they hand over to it at their next step boundary
   instead (``ostinato.handover``);
3. the turns still running are cancelled: each ends ``cancelled`` with every open call
   answered, and its shell commands' process groups are stopped;
4. open event streams (SSE and WebSocket) end with a ``closing`` frame;
5. uvicorn closes the socket and waits (at most ``REQUESTS_GRACE_S``) for the last
   responses; the app's lifespan closes the runtime: the lease is released and the
   store closed.

A second signal skips what is left of the grace.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable
from types import FrameType

import uvicorn
from fastapi import FastAPI

from ostinato.runtime import Runtime
from ostinato.server.app import end_streams

log = logging.getLogger("ostinato.server")

REQUESTS_GRACE_S = 5  # after the turns: how long uvicorn waits for the last responses


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (listening starts when the server does);
    ``OSError`` if the address is taken or not ours.

    Made with the protocol named (``IPPROTO_TCP``): asyncio switches Nagle's algorithm
    off (``TCP_NODELAY``) only on sockets that say they are TCP, and without that a
    response written in two parts on a kept-alive connection waits about 40 ms for the
    client's delayed ACK."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class GracefulServer(uvicorn.Server):
    """uvicorn's server, shutting down as the module doc says."""

    def __init__(
        self, config: uvicorn.Config, app: FastAPI, runtime: Runtime, *, grace: float
    ) -> None:
        super().__init__(config)
        self.ostinato_app = app
        self.runtime = runtime
        self.grace = grace
        self._hurry: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.before_drain: list[Callable[[], Awaitable[None]]] = []
        self.once_started: list[Callable[[], Awaitable[object]]] = []  # run once it listens
        self._started_work: list[asyncio.Future[object]] = []

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._started_work = [run_reported(work) for work in self.once_started]

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        again = self.should_exit
        super().handle_exit(sig, frame)
        if again and self._hurry is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._hurry.set)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._hurry = asyncio.Event()
        if self.force_exit:
            self._hurry.set()
        for work in self._started_work:
            work.cancel()
        for stop in self.before_drain:
            await stop()
        busy = self.runtime.active()
        if busy:
            log.info("shutting down: %d conversation(s) busy, %g s of grace", busy, self.grace)
        await self.runtime.drain(self.grace, hurry=self._hurry)
        end_streams(self.ostinato_app)
        await super().shutdown(sockets)
        if self.force_exit:  # uvicorn skipped the lifespan's shutdown
            await self.runtime.close()


def run_reported(work: Callable[[], Awaitable[object]]) -> asyncio.Future[object]:
    """``work`` as a task whose failure is logged when it ends (no one awaits it: the
    server goes on without what it would have prepared, which is then made on demand)."""
    task = asyncio.ensure_future(work())
    task.add_done_callback(_report)
    return task


def _report(task: asyncio.Future[object]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("work run once the server listens failed", exc_info=exc)
