"""Retention: once a day, delete the conversations idle longer than ``data.retention_days``.

The daily run is a background job of the deployment (owner ``""``) on the jobs' own
machinery (``store.jobs``), so it runs exactly once a day across every server sharing
the database: a server claims the day's run with a lease (``ClaimJob`` with the UTC
day's start as the activity it runs after; a claim for a day already run, or held by a
live lease, gets nothing), and commits the deletions with the release of its claim in
one write (``FinishJob``, a compare-and-set on the holder). A server that loses its
claim (its lease ran out while it worked) commits nothing, and one that dies before its
write leaves the day to be claimed again when the lease ends.

A conversation is idle since its last change (``updated_at``: its last row, its state,
a rename). A running one is never deleted; every other is deleted as ``DELETE`` of it
does, with its workdir. Each server checks every ``poll_seconds`` whether the day's run
is due.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable
from datetime import datetime, time, timedelta
from pathlib import Path

from ostinato.deletion import remove_workdir
from ostinato.errors import NotFound
from ostinato.ids import new_id
from ostinato.store.base import Store, utcnow
from ostinato.store.erasure import DeleteConversation
from ostinato.store.jobs import ClaimJob, FinishJob, JobRun, JobTakenOver
from ostinato.transfer.exporting import owner_conversations

log = logging.getLogger(__name__)

JOB = "retention"
DEPLOYMENT = ""  # the job's owner: the deployment's, not a person's


def day_start(now: datetime) -> datetime:
    return datetime.combine(now.date(), time(), tzinfo=now.tzinfo)


class Retention:
    """Deletes ``store``'s conversations idle more than ``days`` days, once a day."""

    def __init__(
        self,
        store: Store,
        days: int,
        data_dir: Path | None,
        *,
        holder: str | None = None,
        clock: Callable[[], datetime] = utcnow,
        poll_seconds: float = 3600.0,
        lease: timedelta = timedelta(minutes=10),
    ) -> None:
        self.store, self.days, self.data_dir = store, days, data_dir
        self.holder = holder or f"retention_{new_id()}"
        self.clock, self.poll_seconds, self.lease = clock, poll_seconds, lease
        self._stopped = asyncio.Event()

    async def run(self) -> None:
        while not self._stopped.is_set():
            try:
                await self.tick()
            except Exception:  # the store is away: try again at the next poll
                log.exception("retention: a run failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), self.poll_seconds)

    def stop(self) -> None:
        self._stopped.set()

    async def expired(self, now: datetime) -> list[str]:
        """The conversations idle since before the cutoff, not running."""
        cutoff = now - timedelta(days=self.days)
        return [
            c.id
            async for c in owner_conversations(self.store, None)
            if c.updated_at < cutoff and c.state != "running"
        ]

    async def tick(self) -> list[str] | None:
        """The day's run, if it is due here: the ids deleted; None when it is not (run
        today already, or held by another server)."""
        now = self.clock()
        today = day_start(now)
        claim = ClaimJob(DEPLOYMENT, JOB, self.holder, now, now + self.lease, today)
        (state,) = await self.store.write(claim)
        if state is None:
            return None
        gone = await self.expired(now)
        done = dataclasses.replace(state, active_at=today, last_run_at=now)
        changes = [{"deleted": cid} for cid in gone]
        run = None
        if gone:
            run = JobRun(new_id(), DEPLOYMENT, JOB, now, max(self.clock(), now), "ok", changes)
        deletions = [DeleteConversation(cid) for cid in gone]
        try:
            await self.store.write(*deletions, FinishJob(done, self.holder, run))
        except JobTakenOver:
            return None
        except NotFound:  # one was deleted meanwhile: leave the day to the next poll
            await self.store.write(FinishJob(state, self.holder))
            return None
        for cid in gone:
            remove_workdir(self.data_dir, cid)
        if gone:
            log.info(
                "retention: deleted %d conversation(s) idle over %d days", len(gone), self.days
            )
        return gone
