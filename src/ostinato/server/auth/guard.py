"""``StreamGuard``: open event streams and WebSockets, per owner.

Opening one takes a stream permit (``Limiter.open_stream``: 429 over the limit). While
it is open, the guard re-checks every ``interval`` seconds that the credential it was
opened with still holds (an API key not revoked or expired, a token not expired); when
it does not, the stream's ``revoked`` event is set and the stream ends with an
``unauthorized`` error frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from ostinato.identity.limits import Limiter, Permit
from ostinato.server.auth.authenticator import Authenticator
from ostinato.server.auth.caller import Caller

log = logging.getLogger("ostinato.server")


@dataclass(eq=False, slots=True)
class StreamTicket:
    """One open stream: its caller, its permit, and the event set when its credential
    stops holding."""

    caller: Caller
    permit: Permit
    revoked: asyncio.Event = field(default_factory=asyncio.Event)


class StreamGuard:
    def __init__(self, authenticator: Authenticator, limiter: Limiter, interval: float) -> None:
        self.authenticator = authenticator
        self.limiter = limiter
        self.interval = interval
        self._open: set[StreamTicket] = set()
        self._watcher: asyncio.Task[None] | None = None

    async def open(self, caller: Caller) -> StreamTicket:
        """A ticket for a new stream of ``caller`` (``LimitExceeded`` over the limit)."""
        ticket = StreamTicket(caller, await self.limiter.open_stream(caller.owner))
        if caller.method in ("key", "oidc"):
            self._open.add(ticket)
            if self._watcher is None or self._watcher.done():
                self._watcher = asyncio.create_task(self._watch(), name="stream-guard")
        return ticket

    def close(self, ticket: StreamTicket) -> None:
        """The stream ended: give its permit back."""
        self._open.discard(ticket)
        ticket.permit.release()

    async def _watch(self) -> None:
        while self._open:
            await asyncio.sleep(self.interval)
            try:
                await self.check()
            except Exception:
                log.exception("could not re-check the credentials of open streams")

    async def check(self) -> None:
        """Re-check every open stream's credential now (each credential once)."""
        verdicts: dict[tuple[str, str | None], bool] = {}
        for ticket in list(self._open):
            caller = ticket.caller
            key = (caller.method, caller.credential or caller.owner)
            if key not in verdicts:
                verdicts[key] = await self.authenticator.still_valid(caller)
            if not verdicts[key]:
                ticket.revoked.set()
                self._open.discard(ticket)

    async def aclose(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
