"""A run as the store keeps it: a ``ProtocolRecord`` of kind ``lg_run`` that says which
turn the run follows and from where; its status is read from that turn.

The turn is found as a response's is: a new message's by its first row (stored with the
run's id as its ``client_message_id``), a resumed approval's by the approval, an
answered card's by the first row after the run began. Status: ``pending`` until its
turn begins, ``running``, ``interrupted`` while a person is waited on (or once
cancelled), ``success``, ``error``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ostinato.errors import NotFound
from ostinato.messages import JSON, Message
from ostinato.server.agent_protocol.wire import iso
from ostinato.server.auth import Caller
from ostinato.server.turn_rows import read_turn
from ostinato.store.base import Store, Turn, utcnow
from ostinato.store.protocol_records import ProtocolRecord, records

KIND = "lg_run"
ENDED = {
    "end_turn": "success",
    "budget_exhausted": "success",
    "paused": "interrupted",
    "cancelled": "interrupted",
}


@dataclass(frozen=True, slots=True)
class RunRecord:
    id: str
    owner: str
    thread_id: str
    assistant_id: str
    after_seq: int
    message_id: str | None = None
    answers: list[str] = field(default_factory=list)
    metadata: JSON = field(default_factory=dict)
    multitask_strategy: str = "reject"

    def to_record(self) -> ProtocolRecord:
        now = utcnow()
        data = {
            "assistant_id": self.assistant_id,
            "after_seq": self.after_seq,
            "message_id": self.message_id,
            "answers": self.answers,
            "metadata": self.metadata,
            "multitask_strategy": self.multitask_strategy,
        }
        return ProtocolRecord(KIND, self.id, self.owner, data, now, now, self.thread_id)

    @classmethod
    def of(cls, record: ProtocolRecord) -> RunRecord:
        d = record.data
        return cls(
            record.id,
            record.owner,
            record.conversation_id or "",
            d["assistant_id"],
            int(d["after_seq"]),
            d.get("message_id"),
            list(d.get("answers") or []),
            dict(d.get("metadata") or {}),
            d.get("multitask_strategy") or "reject",
        )


async def owned_run(store: Store, caller: Caller, thread_id: str, run_id: str) -> RunRecord:
    found = await records(store).get_record(KIND, run_id)
    mine = found is not None and (caller.sees_everything or found.owner == caller.owner)
    if found is None or not mine or found.conversation_id != thread_id:
        raise NotFound(f"no run with id {run_id!r} in thread {thread_id!r}")
    return RunRecord.of(found)


@dataclass(frozen=True, slots=True)
class RunState:
    turn: Turn | None
    rows: list[Message]
    waiting: bool  # a person is waited on

    @property
    def status(self) -> str:
        if self.turn is None:
            return "pending"
        if self.turn.status == "running":
            return "interrupted" if self.waiting else "running"
        return ENDED.get(self.turn.stop_reason or "", "error")

    @property
    def done(self) -> bool:
        return self.status not in ("pending", "running")


async def run_state(store: Store, run: RunRecord) -> RunState:
    approvals = await store.list_approvals(run.thread_id)
    answered = [a for a in approvals if a.id in run.answers]
    known = answered[0].turn_id if answered else None
    turn, rows = await read_turn(store, run.thread_id, run.after_seq, run.message_id, known)
    turn_id = turn.id if turn is not None else None
    waits = any(
        a.turn_id == turn_id and a.status == "pending" and a.id not in run.answers
        for a in approvals
    )
    return RunState(turn, rows, waits)


def run_json(run: RunRecord, state: RunState, created: Any = None) -> JSON:
    when = iso(created or utcnow())
    return {
        "run_id": run.id,
        "thread_id": run.thread_id,
        "assistant_id": run.assistant_id,
        "created_at": when,
        "updated_at": when,
        "status": state.status,
        "metadata": run.metadata,
        "kwargs": {},
        "multitask_strategy": run.multitask_strategy,
    }
