"""``ostinato.leases``: who is gone, judged by expiry and, on this machine, by the pid."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import subprocess
import sys
from datetime import timedelta

import pytest

from ostinato.leases import Lease, holders, process_exists, this_machine, this_process
from ostinato.store.base import utcnow
from ostinato.store.leases import ServerLease
from ostinato.store.memory import MemoryStore


def ended_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(done.stdout)


def test_this_process_exists_and_an_ended_one_does_not() -> None:
    me = this_process()
    assert me.machine == this_machine()
    assert process_exists(me.pid, me.pid_start)
    assert not process_exists(ended_pid(), me.pid_start)
    if me.pid_start is not None:  # Linux: a pid taken by another process is not the same
        assert not process_exists(me.pid, str(int(me.pid_start) + 1))


def lease_of(lease_id: str, *, pid: int, pid_start: str | None, machine: str) -> ServerLease:
    now = utcnow()
    return ServerLease(lease_id, "h", machine, pid, pid_start, now, now, now)


async def test_holders_are_gone_when_expired_dead_here_or_missing() -> None:
    store = MemoryStore()
    me = this_process()
    here = this_machine()
    ttl = 60.0
    await store.acquire_lease(
        lease_of("live", pid=me.pid, pid_start=me.pid_start, machine=here), ttl
    )
    await store.acquire_lease(
        lease_of("crashed", pid=ended_pid(), pid_start="1", machine=here), ttl
    )
    # another host: its pid means nothing here, only its expiry counts
    await store.acquire_lease(lease_of("remote", pid=1, pid_start="1", machine="elsewhere"), ttl)
    stale = await store.acquire_lease(lease_of("stale", pid=1, pid_start="1", machine="x"), ttl)
    store._leases["stale"] = dataclasses.replace(stale, expires_at=utcnow() - timedelta(seconds=1))

    who = await holders(store, me="mine")
    assert who.live == {"live", "remote", "mine"}
    assert sorted(who.dropped) == ["crashed", "stale"]
    assert not who.gone("live") and not who.gone("remote")
    assert who.gone("crashed") and who.gone("stale") and who.gone("never-heard-of")
    assert who.gone(None)  # written without a lease: nobody holds it
    assert {lease.id for lease in (await store.list_leases()).leases} == {"live", "remote"}


async def test_my_own_lease_is_never_gone_to_me() -> None:
    store = MemoryStore()
    lease = Lease(store, ttl=30)
    await lease.acquire()
    await store.release_lease(lease.id)  # as if another server dropped it
    assert not (await holders(store, me=lease.id)).gone(lease.id)


async def test_a_lease_keeps_itself_and_takes_itself_again_when_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    lease = Lease(store, ttl=0.06)
    await lease.acquire()
    sweeps = 0
    lost = asyncio.Event()

    async def sweep() -> None:
        nonlocal sweeps
        sweeps += 1
        if sweeps == 2:
            await store.release_lease(lease.id)  # judged dead by someone else
        if lease.losses:
            lost.set()

    with caplog.at_level(logging.ERROR, "ostinato.leases"):
        lease.keep(sweep)
        await asyncio.wait_for(lost.wait(), 10)
    assert lease.id in {found.id for found in (await store.list_leases()).leases}
    assert "was gone" in caplog.text
    await lease.release()
    assert (await store.list_leases()).leases == []


def test_a_lease_needs_a_positive_ttl() -> None:
    with pytest.raises(ValueError, match="ttl"):
        Lease(MemoryStore(), ttl=0)
