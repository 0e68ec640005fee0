"""Compaction, size-driven only: summarising the older part of a conversation.

When a request would not fit the model's window (by the pre-flight estimate, or because
the provider said so), the loop asks ``Compactor`` for a summary of the older part of the
history, made by a cheap model call with tools off. The summary is stored as a hidden
``system`` row that becomes the new watermark: later requests start from it. The rows it
covers stay in the store and in ``/messages``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ostinato.context.catalog import ContextCatalog
from ostinato.context.tokens import CHARS_PER_TOKEN, TokenEstimator
from ostinato.messages import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ostinato.models.assembly import complete
from ostinato.models.base import Model, ModelRequest, Usage

SUMMARY_PROMPT = (
    "You compress chat histories. Write a summary of the conversation below that lets the "
    "assistant continue it without the original: the user's goals and preferences, facts "
    "and numbers established, decisions made, what tools were used and what they found, "
    "and anything still open. Be specific and brief; use plain sentences; do not address "
    "the user."
)
SUMMARY_HEADER = "Summary of the earlier conversation:\n"
TOOL_RESULT_CHARS = 2_000  # a long tool result is shortened in the transcript


@dataclass(frozen=True, slots=True)
class Summary:
    text: str
    usage: Usage


class Compactor:
    """Makes summaries with ``model`` (a cheap tier), and knows how big a request may be."""

    def __init__(
        self,
        model: Model | None = None,
        *,
        catalog: ContextCatalog | None = None,
        estimator: TokenEstimator | None = None,
        timeout: float = 120.0,
        max_summary_tokens: int = 1_500,
    ) -> None:
        self.model = model
        self.catalog = catalog or ContextCatalog()
        self.estimator = estimator or TokenEstimator()
        self.timeout = timeout
        self.max_summary_tokens = max_summary_tokens

    def budget(self, model: Model, reserve: int) -> int:
        """How many input tokens a request to ``model`` may have: its window less what
        the answer needs."""
        return max(1_000, self.catalog.window(model.name) - reserve)

    async def summarise(
        self, fallback: Model, previous: Message | None, rows: Sequence[Message]
    ) -> Summary:
        """A summary of ``previous`` (an earlier summary) and ``rows``. Uses the cheap
        model, or ``fallback`` (the turn's model) when none is configured."""
        model = self.model or fallback
        room = self.budget(model, self.max_summary_tokens) - 500
        text = transcript(previous, rows, max_chars=int(room * CHARS_PER_TOKEN))
        request = ModelRequest(
            system=SUMMARY_PROMPT,
            messages=(Message("user", (TextBlock(text),)),),
            tool_choice="none",
            max_tokens=self.max_summary_tokens,
        )
        reply = await complete(model, request, deadline=self.timeout, what="summary")
        return Summary(reply.message.text.strip(), reply.usage)


def summary_row(summary: str, through_seq: int) -> Message:
    """The stored form of a summary: hidden from the chat view, first in every request."""
    return Message(
        "system",
        (TextBlock(SUMMARY_HEADER + summary),),
        hidden=True,
        metadata={"kind": "summary", "through_seq": through_seq},
    )


def transcript(previous: Message | None, rows: Sequence[Message], *, max_chars: int) -> str:
    """The rows as plain text for the summariser (tool pairs need no care in text). When
    it is too long, the oldest lines go first: the newest matter most."""
    lines = [previous.text] if previous is not None else []
    for row in rows:
        for block in row.blocks:
            match block:
                case TextBlock(text=text) if text.strip():
                    lines.append(f"{row.role.capitalize()}: {text}")
                case ToolUseBlock(name=name, input=tool_input):
                    lines.append(f"Assistant called {name} with {tool_input}")
                case ToolResultBlock() as result:
                    body = result.text
                    if len(body) > TOOL_RESULT_CHARS:
                        body = body[:TOOL_RESULT_CHARS] + "…"
                    verdict = "failed" if result.is_error else "returned"
                    lines.append(f"Tool {verdict}: {body}")
                case ThinkingBlock():
                    pass
    text = "\n".join(lines)
    return text if len(text) <= max_chars else "…" + text[len(text) - max_chars :]
