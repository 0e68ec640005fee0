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
from ostinato.messages import JSON, Message
from ostinato.server.auth import Caller
from ostinato.server.responses.steps import Snapshot
from ostinato.server.responses.wire import Envelope
from ostinato.store.base import Store, utcnow
from ostinato.store.protocol_records import ProtocolRecord, records
from ostinato.store.tree import WHOLE

KIND = "response"
PAGE = 200
SCAN = 5000  # rows read at most to find a response's turn


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
    turn_id, rows = await _turn_rows(store, rec, known)
    turn = await store.get_turn(turn_id) if turn_id else None
    if turn is None:
        return Snapshot([], [], answers, {}, None)
    if turn.status == "finished":  # rows committed with its end after the read above
        rows += (await _turn_rows(store, rec, turn.id, rows[-1].seq if rows else None))[1]
    calls = {c.id: (c.name, c.input) for c in await store.list_tool_calls(cid, turn_id=turn_id)}
    return Snapshot(rows, [a for a in approvals if a.turn_id == turn_id], answers, calls, turn)


def _starts(rec: ResponseRecord, row: Message) -> bool:
    """Whether ``row`` is the first of the response's turn, when that is not known."""
    if rec.message_id is None:
        return row.turn_id is not None
    return row.role == "user" and row.metadata.get("client_message_id") == rec.message_id


async def _turn_rows(
    store: Store, rec: ResponseRecord, turn_id: str | None, after: int | None = None
) -> tuple[str | None, list[Message]]:
    """The response's turn and its rows after ``after_seq`` (a later turn's are not
    read), reading at most ``SCAN`` rows of every branch (a turn's rows follow each
    other in seq order, whichever branch is current now). ``after``: the seq of a row of
    the turn read already, to read only what follows it."""
    out: list[Message] = []
    after_seq, read, begun = rec.after_seq if after is None else after, 0, after is not None
    while read < SCAN:
        page = await store.list_messages(
            rec.conversation_id, after_seq=after_seq, limit=PAGE, branch=WHOLE
        )
        read += len(page)
        for row in page:
            if turn_id is None and _starts(rec, row):
                turn_id = row.turn_id
            if turn_id is None or row.turn_id is None:
                continue
            if row.turn_id == turn_id:
                out.append(row)
            elif out or begun:  # the next turn: this one's rows are all read
                return turn_id, out
        if len(page) < PAGE:
            break
        after_seq = page[-1].seq or after_seq
    return turn_id, out
