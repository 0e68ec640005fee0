"""The history window: which stored rows go into a request. Pure.

The store hands over the newest rows after the compaction watermark (at most the message
cap) and the summary row that set the watermark. The window then:

- leaves out the rows a person chose to keep from the model (``LEFT_OUT`` in their
  metadata, set by ``manage_messages``; whole turns only, so no tool pair is split);

- starts at a turn boundary (a user message), so a tool_use is never separated from its
  tool_result and no turn is cut in half;
- drops whole turns from the oldest end while it is over its token budget (never the
  newest turn);
- merges same-role neighbours (two user messages in a row, after a failed turn);
- puts the summary first.

Building it costs the same for a conversation of 10 messages as of 10,000: it sees only
the rows the store read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ostinato.context.tokens import estimate_each, estimate_message
from ostinato.messages import Message

LEFT_OUT = "left_out"
"""Metadata key of a row kept from the model's window (the seq of the call that did it)."""


@dataclass(frozen=True, slots=True)
class Window:
    messages: list[Message]  # ready for a request: summary first, neighbours merged
    first_seq: int  # the seq of the oldest stored row kept (0 when none)
    dropped: int  # rows read but left out (cut to a boundary or over the budget)
    tokens: int  # the estimate of ``messages``


def boundaries(rows: Sequence[Message]) -> list[int]:
    """Indexes where a turn starts: user messages (every tool_use before one is answered)."""
    return [i for i, row in enumerate(rows) if row.role == "user"]


def build(
    rows: Sequence[Message],
    *,
    summary: Message | None = None,
    max_tokens: int | None = None,
) -> Window:
    rows = [row for row in rows if not row.metadata.get(LEFT_OUT)]
    starts = boundaries(rows)
    if not starts:
        return Window(_with_summary(summary, []), 0, len(rows), _tokens(summary, []))
    cut = starts[0]
    sizes = estimate_each(rows)
    total = sum(sizes[cut:]) + (estimate_message(summary) if summary else 0)
    if max_tokens is not None:
        for start in starts[1:]:
            if total <= max_tokens:
                break
            total -= sum(sizes[cut:start])
            cut = start
    kept = list(rows[cut:])
    return Window(_with_summary(summary, merge(kept)), kept[0].seq or 0, cut, total)


def merge(rows: Sequence[Message]) -> list[Message]:
    """Same-role neighbours as one message (blocks in order; the first row's seq)."""
    out: list[Message] = []
    for row in rows:
        if out and out[-1].role == row.role and row.role != "system":
            last = out[-1]
            out[-1] = Message(
                last.role,
                last.blocks + row.blocks,
                last.hidden and row.hidden,
                last.metadata,
                last.seq,
                last.id,
                last.turn_id,
                last.created_at,
            )
        else:
            out.append(row)
    return out


def _with_summary(summary: Message | None, messages: list[Message]) -> list[Message]:
    return [summary, *messages] if summary is not None else messages


def _tokens(summary: Message | None, rows: list[Message]) -> int:
    return sum(estimate_message(m) for m in _with_summary(summary, rows))
