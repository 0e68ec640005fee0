"""A response as the store keeps it: a ``ProtocolRecord`` of kind ``response`` that says
which turn the response follows and from where, and what its request asked; what it
answered is read back from the turn's rows (``steps.replay``).

The turn is found from the record, never kept apart from it: a new message's turn by
its first row (the message, stored with the response's id as its ``client_message_id``,
once its turn begins), an answered approval's by the approval, a card's answer by the
first row after the response began.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from ostinato.errors import NotFound
from ostinato.messages import JSON
from ostinato.server.auth import Caller
from ostinato.server.responses.steps import Snapshot
from ostinato.server.responses.wire import Envelope
from ostinato.server.turn_rows import read_turn
from ostinato.store.base import Store, utcnow
from ostinato.store.protocol_records import ProtocolRecord, records
from ostinato.store.tree import WHOLE

KIND = "response"


@dataclass(frozen=True, slots=True)
class ResponseRecord:
    id: str
    owner: str
    conversation_id: str
    after_seq: int
    envelope: Envelope
    message_id: str | None = None  # the client_message_id of a new message's row
    answers: list[str] = field(default_factory=list)  # the approvals it answered
    fingerprint: str | None = None  # the request's, when it came with an Idempotency-Key

    def to_record(self) -> ProtocolRecord:
        data: JSON = {
            "after_seq": self.after_seq,
            "envelope": self.envelope.to_json(),
            "message_id": self.message_id,
            "answers": self.answers,
            "fingerprint": self.fingerprint,
        }
        now = utcnow()
        made = datetime.fromtimestamp(self.envelope.created_at, UTC)
        return ProtocolRecord(KIND, self.id, self.owner, data, made, now, self.conversation_id)

    @classmethod
    def of(cls, record: ProtocolRecord) -> ResponseRecord:
        data = record.data
        return cls(
            record.id,
            record.owner,
            record.conversation_id or "",
            int(data["after_seq"]),
            Envelope.of(record.id, data["envelope"]),
            data.get("message_id"),
            list(data.get("answers") or []),
            data.get("fingerprint"),
        )


async def owned_response(store: Store, caller: Caller, response_id: str) -> ResponseRecord:
    """The caller's response; another owner's answers like a missing one (404)."""
    found = await records(store).get_record(KIND, response_id)
    if found is None or not (caller.sees_everything or found.owner == caller.owner):
        raise NotFound(f"no response with id {response_id!r}")
    return ResponseRecord.of(found)


async def latest_of(store: Store, conversation_id: str) -> str | None:
    """The id of the newest response of a conversation."""
    found = await records(store).list_records(KIND, conversation_id=conversation_id, limit=1)
    return found[0].id if found else None


async def snapshot(store: Store, rec: ResponseRecord) -> Snapshot:
    """What the store holds of the response's turn (``steps.Snapshot``)."""
    cid = rec.conversation_id
    approvals = await store.list_approvals(cid)
    answers = [a for a in approvals if a.id in rec.answers]
    known = answers[0].turn_id if answers else None
    turn, rows = await read_turn(store, cid, rec.after_seq, rec.message_id, known, WHOLE)
    if turn is None:
        return Snapshot([], [], answers, {}, None)
    turn_id = turn.id
    calls = {c.id: (c.name, c.input) for c in await store.list_tool_calls(cid, turn_id=turn_id)}
    return Snapshot(rows, [a for a in approvals if a.turn_id == turn_id], answers, calls, turn)
