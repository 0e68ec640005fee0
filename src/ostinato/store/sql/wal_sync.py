"""SQLite's durable commits: the writes that acknowledge something to a client are on
disk before their ``write()`` returns, at one fsync for all the writes waiting for one.

The writer commits with ``synchronous = NORMAL`` in WAL mode: a commit appends its pages
to the WAL file without an fsync (on the event loop, cheaply), so an operating system
crash or a power loss can lose the last commits. A write that acknowledges something to
a client (``acknowledges``: a conversation created, a message accepted or queued, a turn
begun, a tool's result, an approval decided, a grant, an erasure, keys and settings)
waits, after its commit, for an fsync of the WAL file; every such write committed before
the fsync began rides on it (group commit: writes that arrive while one fsync runs wait
for the next one, which takes them all). The fsync runs on a thread of its own, never on
the event loop. Everything else (a step's reply and the settlement of its call's cost,
tool calls' records as they start, a turn-zero seed's result, metrics, a turn's end) is
answered at once and made durable by the next fsync or checkpoint; what a power loss can
take from it, recovery redoes.

``durability=relaxed`` in the database URL answers every write at once (what
``synchronous = NORMAL`` alone gives). Idea: PostgreSQL's group commit of its WAL
(``commit_delay``), applied to SQLite's WAL file from outside.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, Literal, TypeAlias

from ostinato.store.accounts import UpdateConversation
from ostinato.store.base import (
    AppendMessage,
    CreateConversation,
    CreateGrant,
    DecideApproval,
    Enqueue,
    FinishToolCall,
    RevokeGrant,
    SetTurnMetrics,
    StartTurn,
    WriteOp,
)

Durability: TypeAlias = Literal["acknowledged", "relaxed"]
DURABILITIES: tuple[Durability, ...] = ("acknowledged", "relaxed")

# Ops that, by their own type, acknowledge what a client sent.
_ACKNOWLEDGING: frozenset[type] = frozenset(
    {CreateConversation, StartTurn, Enqueue, DecideApproval, CreateGrant, RevokeGrant}
)
# Ops of a turn's own bookkeeping: never waited for (the rest of ``WriteOp`` is).
_BOOKKEEPING_NAMES = frozenset(
    {"SetConversationState", "ClaimTurn", "FinishTurn", "AppendSummary", "SetMessageMetadata"}
    | {"StartToolCall", "CreateApproval", "TakeQueued", "RememberFact", "ForgetFact"}
    | {"ClaimJob", "FinishJob", "NoteFactsUsed", "RelateFacts", "ResolveConflict"}
    | {"AcquireSlot", "ReleaseSlots", "RenewSlots", "RecordEvent"}  # limits' counting
    | {"SettleSpend", "TabSpend", "CloseTab"}  # a call's cost: a lost hold is recovery's
)


def acknowledges(ops: tuple[WriteOp, ...]) -> bool:
    """Whether a write acknowledges something to a client, so must be durable before
    its ``write()`` returns: any op of ``_ACKNOWLEDGING``, a message of the person's
    (their text, or tool results), a tool call's end unless the call changed nothing (a
    turn-zero seed's read: ``FinishToolCall.side_effects``), and any op that is not a
    turn's bookkeeping (nor a title the server made: ``UpdateConversation.made``)."""
    for op in ops:
        kind = type(op)
        if kind in _ACKNOWLEDGING:
            return True
        if kind is FinishToolCall:
            if op.side_effects:  # type: ignore[union-attr]
                return True
            continue
        if kind is AppendMessage:
            if op.message.role == "user":  # type: ignore[union-attr]
                return True
            continue
        if kind is SetTurnMetrics or kind.__name__ in _BOOKKEEPING_NAMES:
            continue
        if kind is UpdateConversation and op.made:  # type: ignore[union-attr]
            continue  # a title the server made: nobody was told
        return True  # keys, settings, erasure, forged tools, ...: the client was told
    return False


def fsync_file(path: str) -> None:
    """fsync ``path`` (a file or a directory); nothing if it does not exist."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class WalSync:
    """A thread that fsyncs the WAL file for the writes handed to it, then hands each
    batch back (``deliver(batch, error)``: ``error`` None once they are on disk)."""

    def __init__(self, database: str, deliver: Callable[[list[Any], Exception | None], None]):
        self._wal = database + "-wal"
        self._deliver = deliver
        self._cond = threading.Condition()
        self._waiting: list[Any] = []
        self._stopped = False
        self.fsyncs = 0
        self._thread = threading.Thread(target=self._run, name="ostinato-sqlite-sync")
        self._thread.daemon = True

    def start(self) -> None:
        fsync_file(os.path.dirname(self._wal) or ".")  # the WAL file's name, once
        self._thread.start()

    def after_commit(self, items: list[Any]) -> None:
        """``items`` were committed: hand them back once an fsync that began after now
        has ended."""
        with self._cond:
            self._waiting.extend(items)
            self._cond.notify()

    def sync_now(self) -> Exception | None:
        """fsync on the calling thread (the writer thread's own commits)."""
        try:
            fsync_file(self._wal)
        except OSError as exc:
            return exc
        self.fsyncs += 1
        return None

    def stop(self) -> None:
        """Sync and hand back what waits, then end the thread (blocking)."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._stopped:
                    self._cond.wait()
                if not self._waiting:
                    return
                batch, self._waiting = self._waiting, []
            self._deliver(batch, self.sync_now())
