"""Leases: which server process holds which turn, so recovery never touches a live one's.

Several processes may share one database: a restarted server, a second ``ostinato
serve`` started by mistake, or (issue 16) several servers behind a load balancer. Each
server holds a ``Lease``: a row in the store's ``servers`` table with its id, where it
runs (host, boot, pid namespace, pid and the pid's start time) and an expiry, renewed
every ``ttl / 3`` seconds. Every turn it begins and every message it queues carries the
lease's id as its ``holder``.

A holder is **gone** (``Holders.gone``) when

1. its lease row is missing: it was released by a clean shutdown, or dropped by
   whoever found it dead (rule 2 or 3);
2. its lease expired: not renewed for ``ttl`` seconds by the store's clock (the only
   rule that can judge a process on another host);
3. it ran on this machine (same host, boot and pid namespace) and its process is no
   longer there (no such pid, a zombie, or a pid reused by a process that started at
   another time): judged at once, so a server restarted after a crash recovers its
   predecessor's turns before its first request, without waiting for the expiry;
4. or it has no holder at all (``None``): written by a process without a lease (an
   embedded ``Runtime``, or a version before leases), which is assumed alone.

Recovery (``ostinato.recovery``) acts only on what a gone holder held, and takes each
thing over by a compare-and-set on its holder (``LeaseStore.claim_turn`` /
``claim_queued``), so two processes that both see a holder gone never both act. It runs
once at start and then after every renewal (``Lease.keep``): a server killed with
SIGKILL has its turns recovered by a live one within about ``ttl`` seconds (at once on
the same machine), and its queued messages are run there.

A process that finds its own lease gone (it stalled for longer than ``ttl``, so another
judged it dead) writes it again under the same id and logs an error: what was not yet
taken over is its own again; what was is finished there, and a result it still writes
for such a call is refused by the store (one result per call, ``store.answered``): its
turn stops, taken over.

Extending it (issue 16, several servers): the lease is the unit of ownership, so

- arbitration across processes (one running turn per conversation) can hold a
  conversation by the same compare-and-set on a ``holder`` column of ``conversations``
  (claimed when a worker starts, released when it winds down, taken over when gone);
- failover is ``Lease.keep``'s sweep with a shorter ``ttl``, as it is;
- control that must reach the process running a turn (cancel, decisions) can look up
  the turn's ``holder`` and address that server by its lease id (e.g. a NOTIFY channel
  or Redis key named after it);
- a graceful shutdown that hands turns over instead of cancelling them releases the
  lease after marking them, and the sweep of another server picks them up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ostinato.ids import new_id
from ostinato.store.base import utcnow
from ostinato.store.leases import LeaseStore, ServerLease

log = logging.getLogger("ostinato.leases")

LEASE_TTL_S = 10.0  # a lease not renewed for this long is expired


@dataclass(frozen=True, slots=True)
class ProcessIdentity:
    host: str
    machine: str  # host, boot and pid namespace: where a pid means the same process
    pid: int
    pid_start: str | None  # the process's start time in clock ticks since boot (Linux)


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def this_machine() -> str:
    """The host name, the boot id and the pid namespace: two processes see each other's
    pids exactly when these agree (containers on one host differ in the namespace)."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    return f"{socket.gethostname()}|{boot}|{_namespace()}"


def _stat(pid: int) -> tuple[str, str] | None:
    """The state letter and start time of ``pid`` from ``/proc`` (None: no such process,
    or no ``/proc``)."""
    text = _read(f"/proc/{pid}/stat")
    if not text:
        return None
    fields = text.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces
    return fields[0], fields[19]


def this_process() -> ProcessIdentity:
    pid = os.getpid()
    stat = _stat(pid)
    return ProcessIdentity(socket.gethostname(), this_machine(), pid, stat[1] if stat else None)


def process_exists(pid: int, pid_start: str | None) -> bool:
    """Whether the process ``pid`` (started at ``pid_start``, if known) runs on this
    machine. Without ``/proc`` only the pid is checked."""
    if pid_start is not None and Path("/proc/self/stat").exists():
        stat = _stat(pid)
        return stat is not None and stat[0] != "Z" and stat[1] == pid_start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def dead(lease: ServerLease, now: datetime, machine: str) -> bool:
    """Whether the lease's process is gone (rules 2 and 3 of the module doc)."""
    if lease.expires_at < now:
        return True
    return lease.machine == machine and not process_exists(lease.pid, lease.pid_start)


@dataclass(frozen=True, slots=True)
class Holders:
    """Who holds what, as read once: ``gone(holder)`` says whether a holder's things may
    be taken over; ``dropped`` are the leases found dead and dropped by this read."""

    live: frozenset[str]
    dropped: tuple[str, ...] = ()

    def gone(self, holder: str | None) -> bool:
        return holder is None or holder not in self.live


async def holders(store: object, me: str | None = None) -> Holders:
    """Read the leases, drop the dead ones, and say who is gone; ``me`` (this process's
    lease) never is, even when its row is missing for a moment. A store without leases
    (a test double) has no live holder: everything it holds is gone."""
    if not isinstance(store, LeaseStore):
        return Holders(frozenset())
    view = await store.list_leases()
    machine = this_machine()
    live: set[str] = {me} if me is not None else set()  # never gone to itself (see above)
    dropped: list[str] = []
    for lease in view.leases:
        if lease.id != me and dead(lease, view.now, machine):
            if await store.drop_lease(lease.id, lease.expires_at):
                dropped.append(lease.id)
                log.warning(
                    "server %s (pid %d on %s) is gone: its turns are recovered here",
                    lease.id,
                    lease.pid,
                    lease.host,
                )
            continue
        live.add(lease.id)
    return Holders(frozenset(live), tuple(dropped))


async def claim_turn(store: object, turn_id: str, was: str | None, me: str | None) -> bool:
    """Take a turn over from its gone holder; False if someone else did first."""
    if not isinstance(store, LeaseStore):
        return True
    return await store.claim_turn(turn_id, was, me)


async def claim_queued(store: object, item_id: str, was: str | None, me: str | None) -> bool:
    if not isinstance(store, LeaseStore):
        return True
    return await store.claim_queued(item_id, was, me)


Sweep = Callable[[], Awaitable[object]]


class Lease:
    """This process's lease: acquired once, renewed every ``ttl / 3`` seconds by a
    background task that also runs ``sweep`` (recovery of what gone holders held)."""

    def __init__(self, store: LeaseStore, *, ttl: float = LEASE_TTL_S) -> None:
        if not ttl > 0:
            raise ValueError(f"a lease's ttl must be > 0 seconds: {ttl!r}")
        self.store = store
        self.ttl = ttl
        self.interval = ttl / 3
        self.id = new_id()
        self.identity = this_process()
        self.losses = 0  # times the lease was found gone and written again
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"Lease({self.id!r}, pid={self.identity.pid}, ttl={self.ttl:g})"

    async def acquire(self) -> None:
        who = self.identity
        lease = ServerLease(
            self.id, who.host, who.machine, who.pid, who.pid_start, utcnow(), utcnow(), utcnow()
        )
        await self.store.acquire_lease(lease, self.ttl)

    def keep(self, sweep: Sweep) -> None:
        """Renew the lease in the background, running ``sweep`` after each renewal."""
        if self._task is None:
            self._task = asyncio.create_task(self._keep(sweep), name=f"lease-{self.id}")

    async def renew(self) -> None:
        if not await self.store.renew_lease(self.id, self.ttl):
            self.losses += 1
            log.error(
                "this server's lease %s was gone (not renewed for %g s, so another server "
                "judged it dead and may have recovered its turns); taking it again",
                self.id,
                self.ttl,
            )
            await self.acquire()

    async def _keep(self, sweep: Sweep) -> None:
        while True:
            await asyncio.sleep(self.interval)
            for step in (self.renew, sweep):
                try:
                    await step()
                except asyncio.CancelledError:
                    raise
                except Exception:  # a store hiccup: the next round tries again
                    log.exception("lease %s: %s failed", self.id, getattr(step, "__name__", ""))

    async def release(self) -> None:
        """Stop renewing and delete the lease: whatever this process still holds is
        anyone's to recover from now on."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            await self.store.release_lease(self.id)
        except Exception:  # the store is gone: the lease expires by itself
            log.warning("could not release lease %s; it expires in %g s", self.id, self.ttl)
