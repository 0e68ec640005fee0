"""Approvals and question cards as MCP elicitations (protocol 2026-07-28's multi
round-trip requests). Pure.

A call whose turn waits, from a client that declared elicitation, ends with an
``InputRequiredResult``: one form elicitation, ``answer``, asking what waits (``approve``
and ``remember`` for an approval; ``answer`` for a card, its options as an enum), and a
``requestState`` naming the conversation and what waits (sealed by the SDK, bound to the
caller). The client's retry carries the elicitation's result: ``accept`` answers with
the form's values, ``decline`` / ``cancel`` decline the approval or dismiss the card.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult

from ostinato.answers import AnswerCard, Decide, WaitingApproval, WaitingCard, describe, options_of
from ostinato.messages import JSON

KEY = "answer"


def ask(waiting: WaitingApproval | WaitingCard, conversation_id: str) -> InputRequiredResult:
    """The elicitation that asks for what waits."""
    if isinstance(waiting, WaitingApproval):
        schema: JSON = {
            "type": "object",
            "properties": {
                "approve": {"type": "boolean", "description": "Allow the call"},
                "remember": {"type": "string", "enum": ["none", "exact", "family"],
                             "description": "Remember the grant"},
            },
            "required": ["approve"],
        }  # fmt: skip
        waits = waiting.approval_id
    else:
        answer: JSON = {"type": "string"}
        options = options_of(waiting)
        if options:
            answer["enum"] = [value if waiting.name == "choose" else label
                              for label, value in options]  # fmt: skip
        schema = {"type": "object", "properties": {"answer": answer}, "required": ["answer"]}
        waits = waiting.tool_use_id
    params = ElicitRequestFormParams(message=describe(waiting), requested_schema=schema)
    state = json.dumps({"conversation_id": conversation_id, "waits": waits})
    return InputRequiredResult(input_requests={KEY: ElicitRequest(params=params)},
                               request_state=state)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Reply:
    """An elicitation's answer: the conversation it is for, and what it does there
    (``None``: the card is dismissed)."""

    conversation_id: str
    reading: Decide | AnswerCard | None


def state_of(state: str) -> tuple[str, str] | None:
    """The conversation and what waited, from a ``requestState`` this server minted."""
    try:
        named = json.loads(state)
        return str(named["conversation_id"]), str(named["waits"])
    except (ValueError, KeyError, TypeError):
        return None


def reply(
    cid: str, waits: str, responses: Any, waiting: WaitingApproval | WaitingCard | None
) -> Reply | None:
    """What a retry's elicitation answer does to ``waiting`` (``None``: it answers
    nothing that waits now, e.g. it was answered meanwhile)."""
    result = (responses or {}).get(KEY)
    if not isinstance(result, ElicitResult) or waiting is None:
        return None
    content = result.content or {}
    accepted = result.action == "accept"
    if isinstance(waiting, WaitingApproval) and waiting.approval_id == waits:
        approve = accepted and content.get("approve") is True
        remember = content.get("remember") if approve else None
        if remember == "exact":
            return Reply(cid, Decide(waiting.approval_id, True, "exact"))
        if remember == "family":
            return Reply(cid, Decide(waiting.approval_id, True, "family"))
        return Reply(cid, Decide(waiting.approval_id, approve))
    if isinstance(waiting, WaitingCard) and waiting.tool_use_id == waits:
        if not accepted or "answer" not in content:
            return Reply(cid, None)
        given = content["answer"]
        value: Any = {"id": given} if waiting.name == "choose" else given
        return Reply(cid, AnswerCard(waiting.tool_use_id, value))
    return None
