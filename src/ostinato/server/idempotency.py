"""Idempotent retries: a request sent again with the same key is answered with what the
first one did, and nothing is done twice.

A request that creates something (``POST /v1/conversations``, ``POST .../turns`` as JSON
or as a multipart form) may carry an ``Idempotency-Key`` header; a turn's
``client_message_id`` is a key too (scoped to its conversation; the header wins when
both are sent). Keys belong to the caller's owner: another owner's key never matches.

For ``window_s`` after the first request (a setting: ``requests.idempotency_window_s``):

- the same key with the same request (method, path, body; files by content) gets the
  first request's answer: the same conversation, or the same turn's result (read back
  from the store once it ends) or its frames (replayed from the store, then live);
  nothing new is stored and no second turn runs;
- the same key with another request is a 422 ``idempotency_key_reused``;
- a request refused before it stored anything (404, 409, 422, 429 ...) leaves no record:
  sending it again tries again.

Two requests with one key at once: in one process the second finds the first in
``Idempotency.inflight`` and waits for it; across processes (or after a restart) the
store's primary key lets one insert the record, and the other reads it
(``store.idempotency``). A retry waits at most ``join_wait_s`` for a first request in
another process to say what it began; past that the first request is taken as lost (its
server died before it stored anything), its record is deleted, and the retry is a 409
``idempotency_key_in_progress``: the next retry runs afresh. A record that names a
queued message is never deleted so (the message is stored and runs once): a retry of it
is a 409 until its turn is recorded, which after a crash between the two may be never.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Annotated, Any

from fastapi import Header, Request

from ostinato.errors import Conflict, InvalidRequest
from ostinato.messages import Block, blocks_to_json
from ostinato.store.base import QueuedInput, Store, utcnow
from ostinato.store.idempotency import KEY_LIMIT, RequestKey, RequestKeys
from ostinato.submissions import TurnHandle

HEADER = "Idempotency-Key"
KEY_PATTERN = r"^[!-~]([ -~]*[!-~])?$"  # printable ASCII, no space at either end
WINDOW_S = 24 * 3600.0
JOIN_WAIT_S = 30.0
POLL_S = 0.05


IdempotencyKey = Annotated[
    str | None,
    Header(
        alias=HEADER,
        min_length=1,
        max_length=KEY_LIMIT,
        pattern=KEY_PATTERN,
        description="Sent again with the same request, it is answered with the first "
        "request's result and nothing is done twice (kept 24 hours by default); with "
        "another request it is a 422. See docs/api.md, Retries.",
    ),
]


class KeyReused(InvalidRequest):
    code = "idempotency_key_reused"


class KeyInProgress(Conflict):
    code = "idempotency_key_in_progress"


REUSED = (
    "this Idempotency-Key (or client_message_id) was sent before with another request; "
    "a key stands for one request: use a new key for a new request"
)
IN_PROGRESS = (
    "the first request with this Idempotency-Key has not said what it did (its server "
    "may have stopped before it stored anything); send it again"
)


@dataclass(frozen=True, slots=True)
class TurnBegun:
    """What a turn request did: its turn (once it begins), and its queued message."""

    started: asyncio.Future[TurnHandle]
    queued: QueuedInput | None


@dataclass(frozen=True, slots=True)
class Answered:
    """A request whose answer is stored whole (status and JSON body)."""

    status: int
    body: Any


Outcome = TurnBegun | Answered | RequestKey  # RequestKey: another process's; read the store


@dataclass(slots=True)
class _Inflight:
    fingerprint: str
    outcome: asyncio.Future[Outcome]


@dataclass(frozen=True, slots=True)
class Earlier:
    """The key was sent before: what its first request did (or is doing)."""

    outcome: asyncio.Future[Outcome] | None  # in this process
    record: RequestKey | None  # from the store


@dataclass(slots=True)
class Idempotency:
    """The keys of the requests in flight in this process, and the settings."""

    window_s: float = WINDOW_S
    join_wait_s: float = JOIN_WAIT_S
    inflight: dict[tuple[str, str], _Inflight] = field(default_factory=dict)
    _work: set[asyncio.Task[None]] = field(default_factory=set)

    def keep(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` (recording what a request began) in the background, held here."""
        task = asyncio.ensure_future(work)
        self._work.add(task)
        task.add_done_callback(self._work.discard)

    async def aclose(self) -> None:
        """Let the records being written finish."""
        if self._work:
            await asyncio.wait(set(self._work), timeout=5.0)

    async def claim(
        self, store: Store, owner: str, key: str, fingerprint: str
    ) -> Claimed | Earlier:
        """Take ``key`` for this request (``Claimed``), or say what took it (``Earlier``);
        ``KeyReused`` when it was taken by another request."""
        ident = (owner, key)
        found = self.inflight.get(ident)
        if found is not None:
            if found.fingerprint != fingerprint:
                raise KeyReused(REUSED)
            return Earlier(found.outcome, None)
        mine = _Inflight(fingerprint, asyncio.get_running_loop().create_future())
        mine.outcome.add_done_callback(_consume)
        self.inflight[ident] = mine
        try:
            record = await self._claim_stored(store, owner, key, fingerprint)
        except BaseException as exc:
            self._end(ident, mine, error=exc)
            raise
        if record is None:
            return Claimed(self, store, owner, key, mine)
        self._end(ident, mine, outcome=record)
        if record.fingerprint != fingerprint:
            raise KeyReused(REUSED)
        return Earlier(None, record)

    async def _claim_stored(
        self, store: Store, owner: str, key: str, fingerprint: str
    ) -> RequestKey | None:
        if not isinstance(store, RequestKeys):
            return None  # a store without records: this process's in-flight keys only
        now = utcnow()
        record = RequestKey(owner, key, fingerprint, now, now + timedelta(seconds=self.window_s))
        return await store.claim_request(record)

    def _end(
        self,
        ident: tuple[str, str],
        mine: _Inflight,
        *,
        outcome: Outcome | None = None,
        error: BaseException | None = None,
    ) -> None:
        if self.inflight.get(ident) is mine:
            del self.inflight[ident]
        if mine.outcome.done():
            return
        if error is not None:
            mine.outcome.set_exception(error)
        elif outcome is not None:
            mine.outcome.set_result(outcome)


def _consume(future: asyncio.Future[Outcome]) -> None:
    if not future.cancelled():
        future.exception()  # nobody may be waiting: no "never retrieved" warning


@dataclass(slots=True)
class Claimed:
    """This request holds its key: it says what it did (``began`` / ``answered``), or
    that it stored nothing (``failed``)."""

    idempotency: Idempotency
    store: Store
    owner: str
    key: str
    _mine: _Inflight

    async def began(self, conversation_id: str, begun: TurnBegun) -> None:
        """The request's message is stored: its turn began, or it waits in the queue.
        The record learns the turn when it begins; the in-flight entry lasts until the
        turn ends, so a retry in this process joins it live."""
        self._mine.outcome.set_result(begun)
        fields: dict[str, Any] = {"conversation_id": conversation_id}
        if begun.queued is not None:
            fields |= {"queued_id": begun.queued.id, "queued_position": begun.queued.position}
        await self._settle(**fields)
        if begun.started.done():
            await self._turn_known(begun.started)
        else:
            self.idempotency.keep(self._turn_known(begun.started))

    async def _turn_known(self, started: asyncio.Future[TurnHandle]) -> None:
        try:
            handle = await asyncio.shield(started)
        except (asyncio.CancelledError, Exception):
            self._drop()
            return
        after = (handle.rows[0].seq or 1) - 1 if handle.rows else 0
        try:
            await self._settle(turn_id=handle.turn.id, after_seq=after)
        finally:
            if handle.task.done():  # now, not a loop pass later: before its answer is out
                self._drop()
            else:
                handle.task.add_done_callback(lambda _: self._drop())

    async def answered(self, status: int, body: Any) -> None:
        self._mine.outcome.set_result(Answered(status, body))
        try:
            await self._settle(status_code=status, response=json.dumps(body))
        finally:
            self._drop()

    async def failed(self, error: BaseException) -> None:
        """Nothing was stored: forget the key, so a retry tries again."""
        self.idempotency._end((self.owner, self.key), self._mine, error=error)
        if isinstance(self.store, RequestKeys):
            await asyncio.shield(self.store.release_request(self.owner, self.key))

    async def _settle(self, **fields: Any) -> None:
        if isinstance(self.store, RequestKeys):
            await asyncio.shield(self.store.settle_request(self.owner, self.key, **fields))

    def _drop(self) -> None:
        self.idempotency._end((self.owner, self.key), self._mine)


# --- the key and the fingerprint of a request ---------------------------------------------


def request_key(request: Request, client_message_id: str | None, scope: str) -> str | None:
    """The request's key: its ``Idempotency-Key`` header, else its ``client_message_id``
    (scoped to ``scope``: a conversation), else none."""
    header = request.headers.get(HEADER)
    if header is not None:
        if not re.match(KEY_PATTERN, header) or len(header) > KEY_LIMIT:
            raise InvalidRequest(
                f"the {HEADER} header must be 1 to {KEY_LIMIT} printable ASCII characters"
            )
        return f"key:{header}"
    if client_message_id:
        return f"message:{scope}:{client_message_id}"
    return None


def fingerprint(request: Request, body: Any, files: tuple[Block, ...] = ()) -> str:
    """A hash of what the request asks for: its method, path and body (as JSON), and the
    content of its files."""
    digest = hashlib.sha256()
    digest.update(f"{request.method} {request.url.path}\n".encode())
    digest.update(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())
    if files:
        digest.update(json.dumps(blocks_to_json(files), sort_keys=True).encode())
    return digest.hexdigest()


async def record_of(
    idempotency: Idempotency, earlier: Earlier, store: Store, owner: str, key: str
) -> RequestKey:
    """The stored record of a first request in another process, once it says what that
    request did (a turn, or an answer); ``KeyInProgress`` past ``join_wait_s``."""
    assert earlier.record is not None
    record: RequestKey | None = earlier.record
    loop = asyncio.get_running_loop()
    deadline = loop.time() + idempotency.join_wait_s
    while record is not None and record.turn_id is None and record.status_code is None:
        if loop.time() >= deadline:
            # Silent for join_wait_s: its server died before it stored anything (or
            # before it could say what it stored). The key is freed for the next retry.
            assert isinstance(store, RequestKeys)
            if record.queued_id is None:  # a queued message was stored: keep the key
                await store.release_request(owner, key)
            raise KeyInProgress(IN_PROGRESS)
        await asyncio.sleep(POLL_S)
        assert isinstance(store, RequestKeys)
        record = await store.get_request(owner, key)
    if record is None:  # the first request stored nothing after all: it failed
        raise KeyInProgress(IN_PROGRESS)
    return record


async def stored_answer(
    idempotency: Idempotency, earlier: Earlier, store: Store, owner: str, key: str
) -> tuple[int, Any]:
    """The status and JSON body the first request with this key was answered with."""
    outcome = await asyncio.shield(earlier.outcome) if earlier.outcome is not None else None
    if isinstance(outcome, Answered):
        return outcome.status, outcome.body
    if isinstance(outcome, TurnBegun):
        raise KeyReused(REUSED)
    record = await record_of(
        idempotency, Earlier(None, outcome or earlier.record), store, owner, key
    )
    if record.status_code is None or record.response is None:
        raise KeyReused(REUSED)
    return record.status_code, json.loads(record.response)
