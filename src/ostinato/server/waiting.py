"""What a conversation waits on, for the surfaces whose people answer by typing or by a
part of their own protocol: the newest pending approval, else the question card a paused
conversation's last assistant row is ``awaiting``."""

from __future__ import annotations

from ostinato.answers import Waiting, WaitingApproval, WaitingCard
from ostinato.messages import ToolUseBlock
from ostinato.runtime import Runtime

LOOK_BACK = 20  # rows read to find the card a paused conversation waits on


async def what_waits(runtime: Runtime, conversation_id: str) -> Waiting | None:
    """The approval that waits (the newest), else the question card a paused
    conversation waits on, else nothing."""
    pending = await runtime.store.list_approvals(conversation_id, pending_only=True)
    if pending:
        a = pending[-1]
        return WaitingApproval(a.id, a.tool_use_id, a.tool, a.arguments, a.risk, a.family)
    conversation = await runtime.store.get_conversation(conversation_id)
    if conversation is None or conversation.state != "paused":
        return None
    rows = (await runtime.store.window(conversation_id, limit=LOOK_BACK)).rows
    for row in reversed(rows):
        card = row.metadata.get("awaiting") if row.role == "assistant" else None
        if card:
            for block in row.blocks:
                if isinstance(block, ToolUseBlock) and block.id == card:
                    return WaitingCard(block.id, block.name, block.input)
            return None
    return None
