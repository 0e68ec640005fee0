"""Reading an export back: our JSON file (``transfer.document``) or ChatGPT's
``conversations.json`` (``transfer.chatgpt``), into new conversations of one owner.

The whole file is checked before anything is written, and then written in one store write:
all of it or nothing. A file that is not one of the two formats, has a wrong version, a
broken reference (a row's parent, turn or call that is not in the file) or a conversation
of another owner is an ``ImportRefused`` (422) naming the place; a file over the limit is
refused before it is read (``ImportTooLarge``, 413).

The conversation, its turns and approvals get new ids; messages are appended through the
store's one insert path in seq order, the branch moved before each row that starts a new
run, so each keeps its seq, its parent, its time and (through ``call_turns``) which turn's
call each tool result answers; the branch the conversation was on is restored last.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from ostinato.approvals import Approval, Ending
from ostinato.ids import new_id
from ostinato.messages import Message, blocks_from_json
from ostinato.store.base import (
    MEMORY_CAPACITY,
    AppendMessage,
    AppendSummary,
    Conversation,
    CreateApproval,
    CreateConversation,
    StartToolCall,
    StartTurn,
    Store,
    ToolCallRecord,
    Turn,
    WriteOp,
)
from ostinato.store.branches import MoveBranch
from ostinato.transfer.chatgpt import from_chatgpt
from ostinato.transfer.document import (
    FORMAT,
    ConversationDoc,
    ExportDocument,
    ImportRefused,
    MessageRow,
)
from ostinato.transfer.memories import Links, memory_ops

DEFAULT_LIMIT = 100 * 2**20  # bytes of an import file


def place(loc: Iterable[Any]) -> str:
    """``conversations[0].messages[3].role`` from a pydantic location."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the file"


def read_document(raw: bytes | str, owner: str) -> ExportDocument:
    """The file as an export document (a ChatGPT file converted); ``ImportRefused``."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ImportRefused(f"the file is not JSON: {exc}") from None
    if isinstance(data, list):
        data = from_chatgpt(data)
    elif not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ImportRefused(
            f"the file is neither an ostinato export (an object with format {FORMAT!r}) "
            "nor a ChatGPT conversations.json (a list of conversations)"
        )
    try:
        document = ExportDocument.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ImportRefused(f"{place(first['loc'])}: {first['msg']}") from None
    if document.owner is not None and document.owner != owner:
        raise ImportRefused(
            f"owner: the file holds {document.owner!r}'s conversations, not {owner!r}'s"
        )
    return document


def conversation_ops(
    doc: ConversationDoc, owner: str, where: str, links: Links | None = None
) -> tuple[str, list[WriteOp]]:
    """The new conversation's id and the ops that write it (its new ids noted in
    ``links``); ``ImportRefused``."""
    cid = new_id()
    turn_ids = {t.id: new_id() for t in doc.turns}
    if links is not None:
        links.add(doc.id, cid, turn_ids)
    state = "idle" if doc.state == "running" else doc.state
    made = Conversation(
        id=cid,
        state=state,
        created_at=doc.created_at,
        updated_at=doc.updated_at,
        owner=owner,
        persona=doc.persona,
        title=doc.title,
        metadata=doc.metadata,
        pinned=doc.pinned,
        archived_at=doc.archived_at,
    )
    ops: list[WriteOp] = [CreateConversation(made)]
    ops += _turn_ops(doc, cid, turn_ids)
    ops += _call_ops(doc, cid, turn_ids, where)
    ops += _message_ops(doc, cid, turn_ids, where)
    newest = doc.messages[-1].seq if doc.messages else 0
    if doc.branch_tip > newest:
        raise ImportRefused(f"{where}.branch_tip: no message {doc.branch_tip}")
    if doc.branch_tip != newest:
        ops.append(MoveBranch(cid, doc.branch_tip))
    return cid, ops


def _turn_ops(doc: ConversationDoc, cid: str, turn_ids: dict[str, str]) -> list[WriteOp]:
    ops: list[WriteOp] = []
    for row in doc.turns:
        running = row.status == "running"
        turn = Turn(
            id=turn_ids[row.id],
            conversation_id=cid,
            run_id=row.run_id,
            status="finished",
            started_at=row.started_at,
            kind=row.kind,
            stop_reason="interrupted" if running else row.stop_reason,  # type: ignore[arg-type]
            finished_at=row.finished_at or (row.started_at if running else None),
            metrics=row.metrics,
            error=row.error,
            timeline=row.timeline,
        )
        ops.append(StartTurn(turn))
    return ops


def _turn_of(turn_ids: dict[str, str], turn_id: str, where: str) -> str:
    if turn_id not in turn_ids:
        raise ImportRefused(f"{where}.turn_id: no turn {turn_id!r} in this conversation")
    return turn_ids[turn_id]


def _call_ops(
    doc: ConversationDoc, cid: str, turn_ids: dict[str, str], where: str
) -> list[WriteOp]:
    ops: list[WriteOp] = []
    for i, call in enumerate(doc.tool_calls):
        record = ToolCallRecord(
            **call.model_dump(exclude={"turn_id"}),
            conversation_id=cid,
            turn_id=_turn_of(turn_ids, call.turn_id, f"{where}.tool_calls[{i}]"),
        )
        ops.append(StartToolCall(record))
    for i, row in enumerate(doc.approvals):
        at = f"{where}.approvals[{i}]"
        try:
            ending = None if row.ending is None else Ending(row.ending)
        except ValueError:
            raise ImportRefused(f"{at}.ending: unknown ending {row.ending!r}") from None
        fields = row.model_dump(exclude={"id", "turn_id", "ending"})
        approval = Approval(
            **fields,
            id=new_id(),
            conversation_id=cid,
            turn_id=_turn_of(turn_ids, row.turn_id, at),
            ending=ending,
        )
        ops.append(CreateApproval(approval))
    return ops


def _message_ops(
    doc: ConversationDoc, cid: str, turn_ids: dict[str, str], where: str
) -> list[WriteOp]:
    ops: list[WriteOp] = []
    made_by: dict[str, str] = {}  # tool_use id -> the new id of the turn whose row made it
    for i, row in enumerate(doc.messages):
        at = f"{where}.messages[{i}]"
        if row.seq != i + 1:
            raise ImportRefused(f"{at}.seq: expected {i + 1} (seqs run from 1, in order)")
        if row.parent_seq >= row.seq:
            raise ImportRefused(f"{at}.parent_seq: {row.parent_seq} is not an earlier row")
        turn = None if row.turn_id is None else _turn_of(turn_ids, row.turn_id, at)
        message = _message(row, at)
        if row.parent_seq != row.seq - 1:
            ops.append(MoveBranch(cid, row.parent_seq))
        summary = message.metadata.get("kind") == "summary" and message.role == "system"
        through = message.metadata.get("through_seq")
        if summary and isinstance(through, int):
            ops.append(AppendSummary(cid, message, through, turn, at=row.created_at))
        else:
            calls = {
                r.tool_use_id: made_by[r.tool_use_id]
                for r in message.tool_results
                if r.tool_use_id in made_by and made_by[r.tool_use_id] != turn
            }
            ops.append(AppendMessage(cid, message, turn, calls, at=row.created_at))
        for use in message.tool_uses:
            if turn is not None:
                made_by[use.id] = turn
    return ops


def _message(row: MessageRow, at: str) -> Message:
    try:
        blocks = blocks_from_json(row.blocks)
    except ValueError as exc:
        raise ImportRefused(f"{at}.blocks: {exc}") from None
    return Message(row.role, blocks, row.hidden, row.metadata)


async def import_document(
    store: Store, document: ExportDocument, owner: str, *, capacity: int = MEMORY_CAPACITY
) -> list[str]:
    """Write the document's conversations (and memories, if it has them) for ``owner``
    in one write; the conversations' new ids. ``MemoryFull`` (nothing written) when the
    owner would hold more than ``capacity`` current facts."""
    ids: list[str] = []
    ops: list[WriteOp] = []
    links = Links()
    for i, doc in enumerate(document.conversations):
        cid, made = conversation_ops(doc, owner, f"conversations[{i}]", links)
        ids.append(cid)
        ops += made
    ops += memory_ops(document.memories or [], owner, links, capacity)
    if ops:
        await store.write(*ops)
    return ids
