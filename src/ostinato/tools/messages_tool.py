"""``manage_messages``: the model looks after its own long conversation.

- ``stats``: the stored conversation's size (rows, rows shown in the chat, the tokens
  of what the model is sent from it, the oldest row) and its earlier turns by seq, so
  the model can name a range;
- ``compact``: summarise the conversation's start (after the latest summary) through a
  seq with the compaction machinery (``context.compaction``: the same summariser, the
  same summary row, which becomes the watermark); the originals stay in the store and
  in ``/messages``, marked ``folded`` in their metadata;
- ``hide``: keep a range of earlier turns out of the model's window (``left_out`` in
  their metadata; ``context.window`` leaves them out); ``show`` brings them back.

Ranges are whole turns (a user message through the row before the next one), widened to
take every turn they touch, so a tool call is never separated from its result; the
running turn is never part of one. What changes what the model sees (compact, hide,
show) is risk ``write`` and asks the person first under the default approval policy;
``stats`` runs without asking. It is protected (``manage.PROTECTED``): never switched off.
Changes apply from the next turn on (the running turn's request is already built).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from ostinato.context.compaction import summary_row
from ostinato.context.tokens import estimate_message
from ostinato.context.window import LEFT_OUT
from ostinato.errors import ToolError
from ostinato.messages import JSON, Message
from ostinato.store.base import AppendSummary, SetMessageMetadata
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.functions import function_tool

FOLDED = "folded"
"""Metadata key of a row a summary stands for (the summary's ``through_seq``)."""
TURNS_LISTED = 30  # the newest earlier turns ``stats`` lists

Action = Literal["stats", "compact", "hide", "show"]


def _runtime(context: ToolContext) -> Any:
    runtime = context.extras.get("runtime")
    if runtime is None or not hasattr(runtime, "compactor"):
        raise ToolError("managing messages needs the runtime; it is not available here")
    return runtime


def _is_summary(row: Message) -> bool:
    return row.metadata.get("kind") == "summary"


def _turns(rows: list[Message]) -> list[list[Message]]:
    """Earlier rows (no summaries) cut into turns: each starts at a user message."""
    turns: list[list[Message]] = []
    for row in rows:
        if row.role == "user" or not turns:
            turns.append([])
        turns[-1].append(row)
    return turns


class _Conversation:
    """The stored rows of one conversation, as ``manage_messages`` sees them."""

    def __init__(self, rows: list[Message], running_turn: str) -> None:
        summaries = [r for r in rows if _is_summary(r)]
        self.summary = summaries[-1] if summaries else None
        self.watermark = int(self.summary.metadata.get("through_seq", 0)) if self.summary else 0
        self.rows = rows
        earlier = [r for r in rows if r.turn_id != running_turn and not _is_summary(r)]
        self.turns = _turns([r for r in earlier if (r.seq or 0) > self.watermark])

    def sent(self) -> list[Message]:
        """What the next request is built from: the summary and the rows after it that
        are not left out."""
        after = [r for r in self.rows if (r.seq or 0) > self.watermark and not _is_summary(r)]
        kept = [r for r in after if not r.metadata.get(LEFT_OUT)]
        return [self.summary, *kept] if self.summary else kept

    def touched(self, first: int, last: int) -> list[list[Message]]:
        """The earlier turns after the watermark that share a seq with ``first..last``."""
        if first > last:
            raise ToolError(f"from_seq {first} is after through_seq {last}")
        found = [t for t in self.turns if (t[0].seq or 0) <= last and (t[-1].seq or 0) >= first]
        if not found:
            raise ToolError(
                f"no earlier turn after the latest summary (through seq {self.watermark}) "
                f"has rows in {first}..{last}; see the turns manage_messages stats lists"
            )
        return found

    def stats(self) -> dict[str, Any]:
        rows = self.rows
        turns = [
            {
                "from_seq": t[0].seq,
                "through_seq": t[-1].seq,
                "starts": t[0].text[:60],
                **({"hidden": True} if all(r.metadata.get(LEFT_OUT) for r in t) else {}),
            }
            for t in self.turns[-TURNS_LISTED:]
        ]
        return {
            "rows": len(rows),
            "shown_in_chat": sum(not r.hidden for r in rows),
            "tokens_stored": sum(estimate_message(r) for r in rows),
            "tokens_sent": sum(estimate_message(r) for r in self.sent()),
            "oldest": rows[0].created_at.isoformat() if rows and rows[0].created_at else None,
            "summary_through_seq": self.watermark or None,
            "folded": sum(bool(r.metadata.get(FOLDED)) for r in rows),
            "hidden_from_model": sum(bool(r.metadata.get(LEFT_OUT)) for r in rows),
            "earlier_turns": turns,
        }


def _marks(cid: str, rows: list[Message], key: str, value: Any) -> list[SetMessageMetadata]:
    """Ops setting (``value``) or clearing (None) ``key`` in each row's metadata."""
    ops = []
    for row in rows:
        metadata = dict(row.metadata)
        if value is None:
            metadata.pop(key, None)
        else:
            metadata[key] = value
        if metadata != row.metadata and row.seq is not None:
            ops.append(SetMessageMetadata(cid, row.seq, metadata))
    return ops


def _span(turns: list[list[Message]], rows: int) -> dict[str, Any]:
    return {"from_seq": turns[0][0].seq, "through_seq": turns[-1][-1].seq, "rows": rows}


async def _compact(runtime: Any, context: ToolContext, seen: _Conversation, last: int) -> JSON:
    """Summarise every earlier turn after the watermark through ``last`` (widened to its
    turn's end) into a summary row; mark the originals folded."""
    turns = seen.touched(seen.watermark + 1, last)
    rows = [r for t in turns for r in t if not r.metadata.get(LEFT_OUT)]
    if not rows:
        raise ToolError("every row of that range is hidden from the model: nothing to summarise")
    through = turns[-1][-1].seq or 0
    conversation = await runtime.conversation(context.conversation_id)
    made = await runtime.compactor.summarise(runtime.model_for(conversation), seen.summary, rows)
    if not made.text:
        raise ToolError("the summariser returned nothing; nothing was changed")
    cid = context.conversation_id
    folded = _marks(cid, [r for t in turns for r in t], FOLDED, through)
    row, *_ = await runtime.store.write(
        AppendSummary(cid, summary_row(made.text, through), through, context.turn_id), *folded
    )
    return {
        "compacted": _span(turns, len(folded)),
        "summary_seq": row.seq,
        "summary": made.text,
        "note": "from the next turn on; the originals stay in the store, marked folded",
    }


async def _hide(context: ToolContext, runtime: Any, turns: list[list[Message]], hide: bool) -> JSON:
    rows = [r for t in turns for r in t]
    ops = _marks(context.conversation_id, rows, LEFT_OUT, True if hide else None)
    if ops:
        await runtime.store.write(*ops)
    key = "hidden_from_model" if hide else "shown_to_model"
    return {key: _span(turns, len(ops)), "note": "from the next turn on"}


def _changes(arguments: JSON) -> bool:
    return bool(arguments.get("action", "stats") != "stats")


def manage_messages_tool() -> Tool:
    async def manage_messages(
        context: ToolContext,
        action: Action = "stats",
        from_seq: int | None = None,
        through_seq: int | None = None,
    ) -> JSON:
        """Look after this conversation's stored history. stats: its size and its
        earlier turns by seq. compact: summarise the earlier turns through through_seq
        into one summary (the originals are kept). hide / show: keep the earlier turns
        from_seq..through_seq out of your context, or bring them back. Ranges are widened
        to whole turns; changes apply from the next turn and ask the user first.

        Args:
            action: stats, compact, hide or show.
            from_seq: The first seq of the range (hide, show).
            through_seq: The last seq of the range (compact, hide, show).
        """
        runtime = _runtime(context)
        rows = await runtime.store.list_messages(context.conversation_id, include_hidden=True)
        seen = _Conversation(rows, context.turn_id)
        if action == "stats":
            return seen.stats()
        if through_seq is None:
            raise ToolError(f"{action} needs through_seq (manage_messages stats lists the turns)")
        if action == "compact":
            return await _compact(runtime, context, seen, through_seq)
        if from_seq is None:
            raise ToolError(f"{action} needs from_seq and through_seq")
        return await _hide(context, runtime, seen.touched(from_seq, through_seq), action == "hide")

    tool = function_tool(manage_messages, category="action", risk="write", idempotent=True)
    return dataclasses.replace(tool, changes=_changes)
