"""A task as A2A shows it, made from an exchange's stored rows. Pure.

- ``history``: the exchange's user messages and the agent's replies (text rows; tool
  calls and their results are not messages in A2A);
- ``artifacts``: ``answer``, one text part per reply the agent wrote (what the task
  produced), and one ``file:<path>`` artifact per file the agent wrote with
  ``write_file`` (its text as written: an ``append`` adds a part);
- ``status``: the exchange's state (``ostinato.exchanges``) with, while it waits, an
  agent message saying what it waits for and how to answer (``ostinato.answers``), the
  approval or card itself in a data part; when it failed, the error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from ostinato.answers import Waiting, WaitingApproval, describe
from ostinato.exchanges import Status
from ostinato.messages import JSON, Message, ToolUseBlock
from ostinato.server.a2a.wire import STATES

ANSWER = "answer"
FILE_TOOL = "write_file"


@dataclass(frozen=True, slots=True)
class TaskView:
    """What a task shows, read from the store (``store_view``)."""

    id: str
    context_id: str
    status: Status
    rows: tuple[Message, ...]
    updated_at: datetime
    waiting: Waiting | None = None
    error: str | None = None
    read_through: int = 0  # the conversation's last seq when the rows were read


def iso(moment: datetime) -> str:
    """A timestamp as A2A writes it: UTC, milliseconds, ``Z``."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def task_json(view: TaskView, *, history_length: int | None = None, artifacts: bool = True) -> JSON:
    """The ``Task`` object (``history_length`` 0 leaves the history out)."""
    task: JSON = {
        "id": view.id,
        "contextId": view.context_id,
        "status": status_json(view),
    }
    if artifacts:
        task["artifacts"] = artifacts_of(view.id, view.rows)
    if history_length != 0:
        history = [message_json(row, view) for row in view.rows if _shown(row)]
        task["history"] = history[-history_length:] if history_length else history
    return task


def status_json(view: TaskView) -> JSON:
    status: JSON = {"state": STATES[view.status], "timestamp": iso(view.updated_at)}
    if view.status == "input_required" and view.waiting is not None:
        status["message"] = waiting_message(view.waiting, view.id, view.context_id)
    elif view.status == "failed" and view.error:
        status["message"] = agent_message(view.error, view.id, view.context_id, f"{view.id}-error")
    return status


def waiting_message(waiting: Waiting, task: str, context: str) -> JSON:
    """What waits, in words and as data: the approval (its id, tool, arguments, risk)
    or the question card (its tool call's id, name, input)."""
    if isinstance(waiting, WaitingApproval):
        data: JSON = {
            "approval": {
                "id": waiting.approval_id,
                "toolCallId": waiting.tool_use_id,
                "tool": waiting.tool,
                "input": waiting.input,
                "risk": waiting.risk,
            }
        }
        key = waiting.approval_id
    else:
        data = {"card": {"toolCallId": waiting.tool_use_id, "name": waiting.name,
                         "input": waiting.input}}  # fmt: skip
        key = waiting.tool_use_id
    message = agent_message(describe(waiting), task, context, f"{task}-waits-{key}")
    message["parts"].append({"data": data, "mediaType": "application/json"})
    return message


def agent_message(text: str, task: str, context: str, message_id: str) -> JSON:
    return {
        "messageId": message_id,
        "contextId": context,
        "taskId": task,
        "role": "ROLE_AGENT",
        "parts": [{"text": text}],
    }


def _shown(row: Message) -> bool:
    return not row.hidden and row.role in ("user", "assistant") and bool(row.text.strip())


def message_json(row: Message, view: TaskView) -> JSON:
    role = "ROLE_USER" if row.role == "user" else "ROLE_AGENT"
    message = agent_message(row.text, view.id, view.context_id, row.id or f"{view.id}-{row.seq}")
    message["role"] = role
    return message


def replies(rows: Iterable[Message]) -> list[str]:
    """The text of each reply the agent wrote, in order."""
    return [r.text for r in rows if r.role == "assistant" and not r.hidden and r.text.strip()]


def answer_artifact(texts: list[str]) -> JSON:
    return {"artifactId": ANSWER, "name": ANSWER, "parts": [{"text": t} for t in texts]}


def artifacts_of(task: str, rows: tuple[Message, ...]) -> list[JSON]:
    found: list[JSON] = []
    texts = replies(rows)
    if texts:
        found.append(answer_artifact(texts))
    files: dict[str, JSON] = {}
    for path, content, mode in file_writes(rows):
        part = file_part(path, content)
        if mode == "append" and path in files:
            files[path]["parts"].append(part)
        else:
            files[path] = file_artifact(path, [part])
    return [*found, *files.values()]


def file_artifact(path: str, parts: list[JSON]) -> JSON:
    return {"artifactId": f"file:{path}", "name": path, "parts": parts}


def file_part(path: str, content: str) -> JSON:
    return {"text": content, "filename": path.rsplit("/", 1)[-1], "mediaType": "text/plain"}


def file_writes(rows: Iterable[Message]) -> list[tuple[str, str, str]]:
    """(path, content, mode) of each ``write_file`` call that succeeded, in order."""
    calls: dict[str, ToolUseBlock] = {}
    done: list[tuple[str, str, str]] = []
    for row in rows:
        for use in row.tool_uses:
            if use.name == FILE_TOOL:
                calls[use.id] = use
        for outcome in row.tool_results:
            call = calls.get(outcome.tool_use_id)
            if call is None or outcome.is_error:
                continue
            path, content = call.input.get("path"), call.input.get("content")
            if isinstance(path, str) and isinstance(content, str):
                done.append((path, content, str(call.input.get("mode") or "overwrite")))
    return done


def data_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)
