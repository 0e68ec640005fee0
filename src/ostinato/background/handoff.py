"""Stage two: a firing's result handed on in the conversation the schedule serves.

- a **reminder**'s text is stored as an assistant row and published as a ``message``
  frame (no model call): the frame's ``run_id`` and ``background_run_id`` are the
  firing's own;
- a **prompt**'s result (what stage one answered) and a **trigger**'s text become a
  hidden user row (``metadata.background_run_id``: the work's run_id) submitted like a
  message: a normal turn answers it, of kind ``background`` (its ``turn.started`` names
  the work), and the reply streams on every surface while the row stays out of the chat
  view.

Every row carries the slot's marker (``metadata.schedule``), read back before writing
(``stage_one.marked``), so a process that died after writing is not doubled.
"""

from __future__ import annotations

from typing import Any

from ostinato.background.stage_one import LATE_NOTE_S, MARKER, marked, marker
from ostinato.frames import MessageCommitted
from ostinato.loop.begin import BACKGROUND
from ostinato.messages import Message, TextBlock
from ostinato.store.base import AppendMessage
from ostinato.store.schedules import Schedule


async def handed(runtime: Any, schedule: Schedule) -> bool:
    """Whether this slot's row is in the conversation (or waits in its queue)."""
    return bool(await marked(runtime.store, schedule.conversation_id, marker(schedule)))


async def hand(runtime: Any, schedule: Schedule) -> None:
    """Write the slot's row in the conversation (see the module's docstring)."""
    if schedule.mode == "reminder":
        await _remind(runtime, schedule)
        return
    kind = "outside" if schedule.mode == "trigger" else "schedule"
    meta = {
        MARKER: marker(schedule),
        "trigger": kind,
        "late_s": schedule.late_seconds,
        BACKGROUND: schedule.run_id,
    }
    row = Message("user", (TextBlock(handoff_text(schedule)),), hidden=True, metadata=meta)
    await runtime.submit(schedule.conversation_id, row, policy="queue")


async def _remind(runtime: Any, schedule: Schedule) -> None:
    cid, run_id = schedule.conversation_id, schedule.run_id or ""
    meta = {MARKER: marker(schedule), "trigger": "reminder", "run_id": run_id}
    row = Message("assistant", (TextBlock(schedule.text),), metadata=meta)
    (stored,) = await runtime.store.write(AppendMessage(cid, row))
    seq = stored.seq if stored.seq is not None else runtime.bus.last_seq(cid)
    frame = MessageCommitted(run_id=run_id, seq=seq, message=stored, background_run_id=run_id)
    runtime.bus.publish(cid, frame)


def handoff_text(schedule: Schedule) -> str:
    """What the model reads in the conversation: a trigger's text, or a prompt and the
    result its background run gave."""
    if schedule.mode == "trigger":
        return (
            f"[A message from an outside system ({schedule.spec}), not typed by the user. "
            f"Answer it as a message to the user.]\n{schedule.text}"
        )
    note = ""
    if schedule.late_seconds and schedule.late_seconds >= LATE_NOTE_S:
        note = f" It fired {round(schedule.late_seconds / 60)} minutes late."
    return (
        f"[A prompt the user scheduled ({schedule.kind} {schedule.spec}, zone "
        f"{schedule.zone}) ran in the background.{note} Give the user its result below, "
        f"as a message to them; do not mention this note.]\n"
        f"Prompt: {schedule.text}\nResult:\n{schedule.result or ''}"
    )
