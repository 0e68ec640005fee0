"""Crash recovery: closing the turns a crash left ``running`` (DESIGN invariant 8).

For each such turn, every tool call without a result is answered, in one tool message:

- a call waiting on a pending approval keeps waiting: the approval survives with its id,
  its record goes back to ``waiting``, the turn ends ``paused`` (a decision posted later
  continues it in a new turn);
- a question card (the call its assistant row is ``awaiting``) keeps waiting too, and the
  turn ends ``paused``: the card was committed, maybe shown, before the crash came in the
  moment before the turn was recorded paused; it is answered as any card;
- a call that never started gets "interrupted: not run";
- an idempotent call that started gets "interrupted";
- a non-idempotent call that started is reported as "outcome unknown" and is never run
  again by itself: it may or may not have taken effect.

Tool-call records still marked running are closed to match, and the turn ends
``interrupted`` (or ``paused``). Paused turns are left alone: they stay resumable.
"""

from __future__ import annotations

from ostinato.loop.setup import open_tool_uses
from ostinato.messages import Message, ToolResultBlock
from ostinato.store.base import (
    AppendMessage,
    FinishToolCall,
    FinishTurn,
    Store,
    ToolCallRecord,
    ToolCallStatus,
    TurnStopReason,
    WriteOp,
    utcnow,
)
from ostinato.tools.registry import ToolRegistry

NOT_STARTED = "interrupted: the server stopped before this tool call ran; it was not run"
INTERRUPTED = "interrupted: the server stopped while this tool call was running"
UNKNOWN = (
    "outcome unknown: the server stopped while this call was running, so it may or may "
    "not have taken effect; it will not be run again by itself. Check before repeating it."
)


async def recover(store: Store, tools: ToolRegistry) -> list[str]:
    closed = []
    for turn in await store.running_turns():
        messages = await store.list_messages(turn.conversation_id)
        open_uses = [use for use, _ in open_tool_uses(messages)]
        records = {r.id: r for r in await store.list_tool_calls(turn.conversation_id)}
        pending = {
            a.tool_use_id
            for a in await store.list_approvals(turn.conversation_id, pending_only=True)
        }
        # a question card is a row: once committed, it waits for its answer like a pending
        # approval, even if the crash came before the turn was recorded paused
        pending |= {
            str(card)
            for m in messages
            if m.role == "assistant" and (card := m.metadata.get("awaiting"))
        }
        now = utcnow()
        ops: list[WriteOp] = []
        blocks: list[ToolResultBlock] = []
        for use in open_uses:
            record = records.get(use.id)
            if use.id in pending:
                if record is not None and record.status != "waiting":
                    ops.append(_close(record, "waiting", ""))
                continue
            status, text = _verdict(record, tools)
            blocks.append(ToolResultBlock(use.id, text, is_error=True))
            if record is not None and record.status in ("running", "waiting"):
                ops.append(_close(record, status, text))
        if blocks:
            ops.insert(
                0, AppendMessage(turn.conversation_id, Message("tool", tuple(blocks)), turn.id)
            )
        stop: TurnStopReason = "paused" if pending & {u.id for u in open_uses} else "interrupted"
        ops.append(FinishTurn(turn.id, turn.conversation_id, stop, now))
        await store.write(*ops)
        closed.append(turn.id)
    return closed


def _verdict(record: ToolCallRecord | None, tools: ToolRegistry) -> tuple[ToolCallStatus, str]:
    if record is None or record.status == "waiting":
        return "interrupted", NOT_STARTED
    tool = tools.get(record.name)
    if tool is not None and tool.idempotent:
        return "interrupted", INTERRUPTED
    return "unknown", UNKNOWN


def _close(record: ToolCallRecord, status: ToolCallStatus, text: str) -> FinishToolCall:
    return FinishToolCall(record.turn_id, record.id, status, text, True, utcnow(), 0.0)
