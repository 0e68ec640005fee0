"""Turn setup: the rows a turn begins with, worked out from the history. Pure.

What a paused conversation waits on (a question card, an approval that outlived its
turn), the answer to a card, the turn-zero seed calls: each is a function from the
history window (and what the store knows about approvals) to write ops or calls. The
runtime reads, calls these, writes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ostinato.approvals import Approval, Ending, refusal
from ostinato.errors import Conflict
from ostinato.ids import new_id
from ostinato.messages import JSON, FileBlock, Message, ToolResultBlock, ToolUseBlock
from ostinato.store.base import AppendMessage, DecideApproval, FinishToolCall, WriteOp, utcnow

NO_RESULT = "interrupted: no result was recorded for this call"


def _since_last_user(history: Sequence[Message]) -> Sequence[Message]:
    """The rows after the newest user message: every turn answers its calls before it
    ends (recovery answers a crashed one's), so only the newest turn can have open calls:
    a question card, or an approval that outlived its turn."""
    for index in range(len(history) - 1, -1, -1):
        if history[index].role == "user":
            return history[index + 1 :]
    return history


def open_tool_uses(history: Sequence[Message]) -> list[tuple[ToolUseBlock, str]]:
    """tool_use blocks with no result yet, each with the id of the turn that made it."""
    answered: set[str] = set()
    made: list[tuple[ToolUseBlock, str]] = []
    for message in _since_last_user(history):  # one pass over the blocks (every turn)
        if message.role == "tool":
            for block in message.blocks:
                if type(block) is ToolResultBlock:
                    answered.add(block.tool_use_id)
        elif message.role == "assistant":
            for block in message.blocks:
                if type(block) is ToolUseBlock:
                    made.append((block, message.turn_id or ""))
    return [(use, turn) for use, turn in made if use.id not in answered]


def open_tool_use(history: Sequence[Message], tool_use_id: str) -> ToolUseBlock | None:
    return next((u for u, _ in open_tool_uses(history) if u.id == tool_use_id), None)


def waiting_card(history: Sequence[Message]) -> tuple[ToolUseBlock, str] | None:
    """The question card the conversation waits on: the newest assistant row marked
    ``awaiting`` whose call has no result yet, with the id of its turn."""
    tail = _since_last_user(history)
    answered = {r.tool_use_id for m in tail if m.role == "tool" for r in m.tool_results}
    for message in reversed(tail):
        awaiting = message.metadata.get("awaiting") if message.role == "assistant" else None
        if awaiting:
            use = next((u for u in message.tool_uses if u.id == awaiting), None)
            if use is not None and use.id not in answered:
                return use, message.turn_id or ""
            return None
    return None


def card_answer(
    conversation_id: str, history: Sequence[Message], tool_use_id: str, result: Any, turn_id: str
) -> list[WriteOp]:
    """The ops answering the waiting card; ``Conflict`` for a wrong or stale id."""
    card = waiting_card(history)
    if card is None:
        raise Conflict("no question card is waiting in this conversation")
    use, card_turn = card
    if use.id != tool_use_id:
        raise Conflict(f"the card waiting is {use.id!r}, not {tool_use_id!r} (a stale or wrong id)")
    content = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
    answer = Message("tool", (ToolResultBlock(use.id, content),))
    return [
        AppendMessage(conversation_id, answer, turn_id, {use.id: card_turn}),
        FinishToolCall(card_turn, use.id, "ok", content, False, utcnow(), 0.0),
    ]


def waiting_answers(
    conversation_id: str,
    history: Sequence[Message],
    pending: Sequence[Approval],
    user_text: str | None,
) -> tuple[list[WriteOp], list[str]]:
    """Answer what a paused conversation waits on, because the user moved on
    (``user_text``) or cancelled (None): a card is dismissed; a pending approval ends
    DISMISSED (typed) or DECLINED (cancel). One tool message answers them all; returns the
    ops and the answered tool_use ids."""
    open_uses = open_tool_uses(history)
    if not open_uses:
        return [], []
    card = waiting_card(history)
    by_use = {a.tool_use_id: a for a in pending}
    now = utcnow()
    blocks: list[ToolResultBlock] = []
    ops: list[WriteOp] = []
    for use, turn_id in open_uses:
        if card is not None and use.id == card[0].id:
            dismissal: JSON = {"dismissed": True}
            if user_text is not None:
                dismissal["user_message"] = user_text
            text = json.dumps(dismissal, ensure_ascii=False)
            blocks.append(ToolResultBlock(use.id, text))
            ops.append(FinishToolCall(turn_id, use.id, "dismissed", text, False, now, 0.0))
        elif use.id in by_use:
            ending = Ending.DISMISSED if user_text is not None else Ending.DECLINED
            text = refusal(ending, use.name)
            blocks.append(ToolResultBlock(use.id, text, is_error=True))
            ops.append(DecideApproval(by_use[use.id].id, ending, now, "user"))
            ops.append(FinishToolCall(turn_id, use.id, "refused", text, True, now, 0.0))
        else:
            blocks.append(ToolResultBlock(use.id, NO_RESULT, is_error=True))
    made = {use.id: turn_id for use, turn_id in open_uses}  # the turn of each call
    ops.insert(0, AppendMessage(conversation_id, Message("tool", tuple(blocks)), None, made))
    return ops, [use.id for use, _ in open_uses]


def seed_calls(
    message: Message, files: dict[str, FileBlock], *, recall: bool
) -> list[ToolUseBlock]:
    """The turn-zero calls for a user message: a memory recall keyed on it, and one read
    per attached file (the driver skips tools the turn's catalog does not offer)."""
    seeds = [ToolUseBlock(f"seed_{new_id()}", "read_attachment", {"name": n}) for n in files]
    text = message.text.strip()
    if recall and text:
        seeds.insert(0, ToolUseBlock(f"seed_{new_id()}", "recall", {"query": text[:500]}))
    return seeds
