"""Making a stored history valid for every provider. Pure.

The store should never hold an orphan (every turn answers its tool calls before it ends,
and recovery answers those of a crashed turn), but a request must be valid even if it
does: ``repair`` answers any unanswered tool_use right after the message that made it and
drops tool_results whose tool_use is not in the history.
"""

from __future__ import annotations

from collections.abc import Sequence

from ostinato.messages import Message, ToolResultBlock

MISSING_RESULT = "no result was recorded for this tool call (it was interrupted)"


def repair(messages: Sequence[Message]) -> list[Message]:
    uses = {u.id for m in messages for u in m.tool_uses}
    answered = {r.tool_use_id for m in messages for r in m.tool_results}
    if uses == answered:
        return list(messages)
    out: list[Message] = []
    for message in messages:
        if message.tool_results and not {r.tool_use_id for r in message.tool_results} <= uses:
            kept = tuple(
                b
                for b in message.blocks
                if not isinstance(b, ToolResultBlock) or b.tool_use_id in uses
            )
            if not kept:
                continue
            message = Message(message.role, kept, message.hidden, message.metadata, message.seq)
        out.append(message)
        missing = [u for u in message.tool_uses if u.id not in answered]
        if missing:
            out.append(
                Message(
                    "tool",
                    tuple(ToolResultBlock(u.id, MISSING_RESULT, is_error=True) for u in missing),
                )
            )
    return out
