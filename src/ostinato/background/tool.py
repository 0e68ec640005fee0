"""The ``schedule`` tool: the model (or the person, with ``/tool schedule``) creates,
lists and deletes the owner's schedules, tied to the conversation it runs in.

Listing changes nothing and runs without asking; creating and deleting (risk ``write``)
ask the person first under the default approval policy.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from ostinato.background.schedules import Schedules, describe
from ostinato.errors import ClientError, ToolError
from ostinato.memory.facts import scope_for
from ostinato.messages import JSON
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.functions import function_tool


def _changes(arguments: JSON) -> bool:
    return bool(arguments.get("action", "list") != "list")


def schedule_tool(schedules: Schedules) -> Tool:
    async def schedule(
        context: ToolContext,
        action: Literal["create", "list", "delete"] = "list",
        when: str | None = None,
        text: str | None = None,
        reminder: bool = False,
        zone: str | None = None,
        schedule_id: str | None = None,
    ) -> dict[str, Any]:
        """Schedule a prompt or a reminder in this conversation, list the user's
        schedules, or delete one. At its time a prompt is answered by you in this
        conversation (the user sees your reply, not the prompt); a reminder's text is
        shown as it is, with no model call.

        Args:
            action: create, list or delete.
            when: For create: 'in 20 minutes', an ISO time ('2026-12-24T09:00'),
                'every 15m', 'daily at 09:00', or a cron expression ('0 9 * * 1-5').
            text: For create: the prompt to answer then, or the reminder's text.
            reminder: For create: true for a fixed reminder text (no model call).
            zone: For create: the user's time zone (IANA, e.g. 'Europe/Paris').
            schedule_id: For delete: the schedule's id.
        """
        owner = scope_for(context.owner, context.conversation_id)
        try:
            if action == "list":
                return {"schedules": [describe(s) for s in await schedules.list(owner)]}
            if action == "delete":
                if not schedule_id:
                    raise ToolError("name the schedule to delete (its id)")
                return {"deleted": describe(await schedules.delete(owner, schedule_id))}
            if not when or not text:
                raise ToolError("say when, and the text to schedule")
            mode: Literal["prompt", "reminder"] = "reminder" if reminder else "prompt"
            made = await schedules.create(
                owner, context.conversation_id, when, text, mode=mode, zone=zone
            )
            return {"scheduled": describe(made)}
        except ClientError as exc:
            raise ToolError(exc.message) from None

    tool = function_tool(schedule, category="action", risk="write", idempotent=False)
    return dataclasses.replace(tool, changes=_changes)
