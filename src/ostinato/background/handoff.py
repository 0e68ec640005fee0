"""Stage two: a firing's result handed on in the conversation the schedule serves.

- a **reminder**'s text is stored as an assistant row and published as a ``message``
  frame (no model call): the frame's ``run_id`` and ``background_run_id`` are the
  firing's own;
- a **prompt**'s result (what stage one answered) and a **trigger**'s text become a
  hidden user row (``metadata.background_run_id``: the work's run_id) submitted like a
  message: a normal turn answers it, of kind ``background`` (its ``turn.started`` names
  the work), and the reply streams on every surface while the row stays out of the chat
  view;
- a **run**'s text (an Agent Protocol cron's input, the owner's own words) is a user
  row as the person would have sent it (``metadata.trigger``: ``cron``), in the chat
  view, answered by a normal turn.

Every row carries the slot's marker (``metadata.schedule``), read back before writing
(``stage_one.marked``), so a process that died after writing is not doubled; the firer
awaits the turn that answers it, and a reply a crash cut off is asked for again, once.
"""

from __future__ import annotations

from typing import Any

from ostinato.approvals import OUTSIDE
from ostinato.background.firing import StageTwo
from ostinato.background.stage_one import LATE_NOTE_S, MARKER, marked, marker
from ostinato.frames import MessageCommitted
from ostinato.loop.opening import BACKGROUND
from ostinato.messages import Message, TextBlock
from ostinato.store.base import AppendMessage, Store
from ostinato.store.schedules import Schedule
from ostinato.submissions import TurnHandle

CUT_OFF = "[The reply to this before was cut off (the server stopped); give it again.]"


async def seen(store: Store, schedule: Schedule) -> StageTwo:
    """What the store shows of this slot's rows in the conversation, and of the turn
    answering the newest one."""
    rows = await marked(store, schedule.conversation_id, marker(schedule))
    if not rows:
        return StageTwo()
    newest = rows[-1]  # a queued one comes after the stored ones
    if newest.role == "assistant":  # a reminder's: no turn answers it
        return StageTwo(len(rows))
    turn = await store.get_turn(newest.turn_id) if newest.turn_id else None
    if turn is None or turn.status == "running":
        return StageTwo(len(rows), running=True, run_id=turn.run_id if turn else None)
    return StageTwo(len(rows), False, turn.stop_reason, turn.run_id)


async def hand(runtime: Any, schedule: Schedule, hands: int = 0) -> TurnHandle | None:
    """Write the slot's row in the conversation (see the module's docstring); the turn
    that answers it, once begun (None for a reminder). ``hands``: rows handed on
    before, whose reply was cut off."""
    if schedule.mode == "reminder":
        await _remind(runtime, schedule)
        return None
    if schedule.mode == "run":
        said = {MARKER: marker(schedule), "trigger": "cron"}
        row = Message("user", (TextBlock(schedule.text),), metadata=said)
    else:
        row = _handed_row(schedule, hands)
    submission = await runtime.submit(schedule.conversation_id, row, policy="queue")
    handle: TurnHandle = await submission.handle()
    return handle


def _handed_row(schedule: Schedule, hands: int) -> Message:
    kind = "outside" if schedule.mode == "trigger" else "schedule"
    meta = {
        MARKER: marker(schedule),
        OUTSIDE: True,  # taint crosses the hand-off: memory writes in its turn ask
        "trigger": kind,
        "late_s": schedule.late_seconds,
        BACKGROUND: schedule.run_id,
    }
    text = (CUT_OFF + "\n" if hands else "") + handoff_text(schedule)
    return Message("user", (TextBlock(text),), hidden=True, metadata=meta)


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
