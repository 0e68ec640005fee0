"""Per-owner limits, counted in the store so every server process on one database
shares them: running turns at once, turns per minute, open streams, files per turn.
Anonymous callers are also counted as one group (``ANONYMOUS_GROUP``), and each client
address may be given only so many new anonymous owners a minute
(``check_new_anonymous``).

``Limiter.begin_turn`` and ``Limiter.open_stream`` hand out a ``Permit`` (a slot in the
store) or raise ``LimitExceeded`` (HTTP 429 with ``Retry-After``). A permit is released
when what it covers ends; while held, the limiter renews it in the background, so the
slot of a process that died expires by itself within ``ttl_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ostinato.errors import ClientError
from ostinato.identity.owners import is_anonymous
from ostinato.identity.settings import LimitSettings
from ostinato.ids import new_id
from ostinato.store.accounts import AcquireSlot, Admission, RecordEvent, ReleaseSlots, RenewSlots
from ostinato.store.base import Store, utcnow

log = logging.getLogger("ostinato.limits")

TTL_S = 60.0  # a slot nobody renews frees itself after this long
RENEW_S = 20.0
ANONYMOUS_GROUP = "anon:*"  # every anonymous caller's turns and streams, counted together
_ALL = " of all anonymous callers together"


class LimitExceeded(ClientError):
    """An owner is over a limit: 429, and ``retry_after`` seconds to wait."""

    status = 429
    code = "limit_exceeded"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = max(1, math.ceil(retry_after))


@dataclass(slots=True)
class Permit:
    """A held slot (or none, when the limit is off); ``release`` gives it back once."""

    limiter: Limiter | None
    slot_id: str | None
    released: bool = field(default=False)
    group: Permit | None = None  # an anonymous caller's slot among all anonymous callers

    def release(self) -> None:
        if self.group is not None:
            self.group.release()
        if self.released or self.limiter is None or self.slot_id is None:
            return
        self.released = True
        self.limiter.release(self.slot_id)


class Limiter:
    def __init__(
        self,
        store: Store,
        settings: LimitSettings,
        *,
        enabled: bool = True,
        ttl_s: float = TTL_S,
        renew_s: float = RENEW_S,
    ) -> None:
        self.store = store
        self.settings = settings
        self.enabled = enabled
        self.ttl_s = ttl_s
        self.renew_s = renew_s
        self._held: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._renewer: asyncio.Task[None] | None = None

    def _on(self, limit: int) -> bool:
        return self.enabled and limit > 0

    async def begin_turn(self, owner: str) -> Permit:
        """A permit for one more turn of ``owner`` (running or waiting in a queue); an
        anonymous owner's also counts against all anonymous callers together."""
        limits = self.settings
        permit = await self._turn(owner, limits.running_turns, limits.turns_per_minute, "")
        if is_anonymous(owner):
            group = limits.anonymous
            try:
                permit.group = await self._turn(
                    ANONYMOUS_GROUP, group.running_turns, group.turns_per_minute, _ALL
                )
            except BaseException:
                permit.release()
                raise
        return permit

    async def count_turn(self, owner: str) -> float | None:
        """Count one more turn of ``owner`` that no request began (a trigger's, a
        schedule's) in its turns a minute (and an anonymous owner's in the group's):
        ``None`` when it may run now, else the seconds until one may."""
        counts = [(owner, self.settings.turns_per_minute)]
        if is_anonymous(owner):
            counts.append((ANONYMOUS_GROUP, self.settings.anonymous.turns_per_minute))
        for who, most in counts:
            if self._on(most):
                (admission,) = await self.store.write(RecordEvent(who, "turn", most, 60.0))
                if not admission.granted:
                    return float(admission.retry_after)
        return None

    async def _turn(self, owner: str, running: int, per_minute: int, whose: str) -> Permit:
        permit = await self._slot(
            owner, "turn", running, f"turns running at once{whose}", retry_after=5.0
        )
        if self._on(per_minute):
            (admission,) = await self.store.write(RecordEvent(owner, "turn", per_minute, 60.0))
            if not admission.granted:
                permit.release()
                raise LimitExceeded(
                    f"too many turns{whose}: at most {per_minute} a minute; "
                    f"try again in {math.ceil(admission.retry_after)} s",
                    admission.retry_after,
                )
        return permit

    async def open_stream(self, owner: str) -> Permit:
        """A permit for one more open event stream or WebSocket of ``owner`` (and, for an
        anonymous owner, of all anonymous callers together)."""
        permit = await self._slot(
            owner, "stream", self.settings.open_streams, "open streams", retry_after=10.0
        )
        if is_anonymous(owner):
            limit = self.settings.anonymous.open_streams
            try:
                permit.group = await self._slot(
                    ANONYMOUS_GROUP, "stream", limit, f"open streams{_ALL}", retry_after=10.0
                )
            except BaseException:
                permit.release()
                raise
        return permit

    def check_uploads(self, count: int) -> None:
        """``LimitExceeded`` when one turn carries more files than allowed."""
        most = self.settings.uploads_per_turn
        if self._on(most) and count > most:
            raise LimitExceeded(f"too many files: at most {most} in one turn", 1.0)

    async def _slot(
        self, owner: str, kind: Any, limit: int, what: str, *, retry_after: float
    ) -> Permit:
        if not self._on(limit):
            return Permit(None, None)
        if self._tasks:  # slots given back before this request are back before it counts
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        slot_id = new_id()
        until = utcnow() + timedelta(seconds=self.ttl_s)
        (admission,) = await self.store.write(
            AcquireSlot(owner, kind, slot_id, limit, until, retry_after)
        )
        assert isinstance(admission, Admission)
        if not admission.granted:
            raise LimitExceeded(
                f"too many {what}: at most {limit}; try again in {math.ceil(retry_after)} s",
                admission.retry_after,
            )
        self._held.add(slot_id)
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.create_task(self._renew(), name="limits-renew")
        return Permit(self, slot_id)

    def release(self, slot_id: str) -> None:
        """Give a slot back (in the background: callers are often done-callbacks)."""
        self._held.discard(slot_id)
        task = asyncio.ensure_future(self._write(ReleaseSlots((slot_id,))))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, op: ReleaseSlots | RenewSlots) -> None:
        try:
            await self.store.write(op)
        except Exception as exc:  # the slot expires by itself
            log.warning("could not update limit slots: %s", exc)

    async def _renew(self) -> None:
        while self._held:
            await asyncio.sleep(self.renew_s)
            until = utcnow() + timedelta(seconds=self.ttl_s)
            await self._write(RenewSlots(tuple(self._held), until))

    async def close(self) -> None:
        """Release every held slot and stop renewing."""
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
        if self._held:
            await self._write(ReleaseSlots(tuple(self._held)))
            self._held.clear()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


async def check_new_anonymous(
    store: Store, settings: LimitSettings, *, enabled: bool, address: str
) -> None:
    """``LimitExceeded`` when client ``address`` was given as many new anonymous owners
    as it may in the last minute (``settings.anonymous.new_per_minute``); else it
    counts one more."""
    most = settings.anonymous.new_per_minute
    if not enabled or most <= 0:
        return
    (admission,) = await store.write(RecordEvent(f"address:{address}", "owner", most, 60.0))
    if not admission.granted:
        raise LimitExceeded(
            f"too many new anonymous callers from one address: at most {most} a minute; "
            "keep the cookie or token you were given, or try again in "
            f"{math.ceil(admission.retry_after)} s",
            admission.retry_after,
        )
