"""A finished model call (``ModelReply``), apart from the stream's assembly
(``models.assembly``) so that what observes calls (``ostinato.observe``) names it
without importing what observes it."""

from __future__ import annotations

from dataclasses import dataclass

from ostinato.messages import Message, ToolUseBlock
from ostinato.models.base import StopReason, Usage


@dataclass(slots=True)  # not frozen: made every step (docs/performance.md)
class ModelReply:
    """One finished model call: the assistant message and what the stream said about it."""

    message: Message
    stop_reason: StopReason
    usage: Usage
    # tool_use ids whose arguments never completed (cut off by the output limit) or did not
    # parse as a JSON object; these calls are never executed.
    broken_calls: dict[str, str]

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return self.message.tool_uses
