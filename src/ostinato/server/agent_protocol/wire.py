"""The Agent Protocol's shapes (LangGraph's server API), as ostinato writes them.

Rows are LangChain messages: a user row is ``human``, an assistant row ``ai`` (its tool
calls in ``tool_calls``; its id ``msg-<seq>``, the id its streamed chunks carried), each
result of a tool row a ``tool`` message; hidden rows are left out. A thread is a
conversation (its values: ``{"messages": [...]}``), an assistant an agent, a run a turn.
What waits for a person is an interrupt: an approval ``{"type": "approval", ...}`` or a
question card ``{"type": "question", ...}``, whose id is the approval's id or the card's
tool call id.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ostinato.answers import Waiting, WaitingApproval, describe
from ostinato.messages import JSON, Message
from ostinato.store.base import Conversation

PREFIX = "/langgraph"
GRAPH = "agent"


def iso(when: datetime) -> str:
    return when.isoformat()


def messages_of(rows: list[Message]) -> list[JSON]:
    out: list[JSON] = []
    for row in rows:
        if row.hidden:
            continue
        if row.role == "user":
            out.append({"type": "human", "content": row.text, "id": row.id})
        elif row.role == "assistant":
            calls = [
                {"name": use.name, "args": use.input, "id": use.id, "type": "tool_call"}
                for use in row.tool_uses
            ]
            # the id its streamed chunks had (``events``): the seq it was to get
            ai = {"type": "ai", "content": row.text, "id": f"msg-{row.seq}", "tool_calls": calls}
            out.append(ai)
        elif row.role == "tool":
            for i, result in enumerate(row.tool_results):
                out.append(
                    {
                        "type": "tool",
                        "content": result.text,
                        "id": f"{row.id}-{i}",
                        "tool_call_id": result.tool_use_id,
                        "status": "error" if result.is_error else "success",
                    }
                )
    return out


def interrupt_of(waiting: Waiting) -> JSON:
    if isinstance(waiting, WaitingApproval):
        value: JSON = {
            "type": "approval",
            "tool": waiting.tool,
            "args": waiting.input,
            "risk": waiting.risk,
            "description": describe(waiting),
        }
        return {"value": value, "id": waiting.approval_id}
    question = {
        "type": "question",
        "name": waiting.name,
        "input": waiting.input,
        "description": describe(waiting),
    }
    return {"value": question, "id": waiting.tool_use_id}


def thread_status(conversation: Conversation, waiting: Waiting | None) -> str:
    if waiting is not None:
        return "interrupted"
    return {"running": "busy", "failed": "error"}.get(conversation.state, "idle")


def thread_json(
    conversation: Conversation, values: JSON | None = None, waiting: Waiting | None = None
) -> JSON:
    interrupts = [interrupt_of(waiting)] if waiting is not None else []
    return {
        "thread_id": conversation.id,
        "created_at": iso(conversation.created_at),
        "updated_at": iso(conversation.updated_at),
        "metadata": dict(conversation.metadata),
        "status": thread_status(conversation, waiting),
        "values": values if values is not None else {},
        "interrupts": {"": interrupts} if interrupts else {},
        "config": {},
    }


def assistant_json(assistant_id: str, name: str, created: datetime) -> JSON:
    return {
        "assistant_id": assistant_id,
        "graph_id": GRAPH,
        "name": name,
        "description": None,
        "config": {},
        "context": {},
        "metadata": {},
        "version": 1,
        "created_at": iso(created),
        "updated_at": iso(created),
    }


def state_json(conversation: Conversation, rows: list[Message], waiting: Waiting | None) -> JSON:
    values: JSON = {"messages": messages_of(rows)}
    interrupts = [interrupt_of(waiting)] if waiting is not None else []
    last = max((r.seq or 0 for r in rows), default=0)
    checkpoint = {"thread_id": conversation.id, "checkpoint_ns": "", "checkpoint_id": str(last)}
    tasks: list[Any] = (
        [{"id": "agent", "name": "agent", "interrupts": interrupts, "state": None}]
        if interrupts
        else []
    )
    return {
        "values": values,
        "next": ["agent"] if interrupts else [],
        "tasks": tasks,
        "interrupts": interrupts,
        "checkpoint": checkpoint,
        "metadata": dict(conversation.metadata),
        "created_at": iso(conversation.updated_at),
        "parent_checkpoint": None,
    }
