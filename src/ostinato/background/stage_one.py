"""Stage one of a scheduled prompt: a background turn on a muted channel.

Where its rows live: in the schedule's **background conversation** (id
``<schedule id>-bg``), owned by the schedule's owner, made at its first firing with the
persona and model of the conversation the schedule serves, and marked
``metadata.background``. A turn there is an ordinary turn of the one loop (the runtime's
workers, arbitration, leases, recovery), so stage one has the agent's tools and budget
in the owner's scope (memory, switched-off tools, grants, MCP servers) and its own
``run_id``; nobody subscribes to that conversation, so its frames reach no surface (the
muted channel), and none of its rows is in the chat view of the conversation it serves.
A separate conversation, not hidden rows in the served one, because a turn there would
hold the served conversation's one turn slot (a person typing meanwhile would wait, or
cancel it with supersede), and its tool calls would sit in that conversation's history
for every later request. The listing of conversations leaves background conversations
out (``is_background``); their rows stay readable by the owner, by id.

An approval stage one needs is asked in the served conversation (``ConsentGate.asks_in``,
while the attempt runs in this process): a person watching it sees the card (with the
background turn's ``run_id``) and answers it there; with no surface open it ends
``UNREACHABLE``, as any approval nobody can be asked.

Each attempt is a hidden user row (the machinery's words, not the person's: no fact is
extracted from it) marked with the slot (``metadata.schedule``) and its number;
the schedule row records the newest attempt's ``run_id`` and count once its turn has
begun (``attempts``), so what an attempt did is found again after a crash.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ostinato.background.firing import StageOne
from ostinato.errors import NotFound, StoreError
from ostinato.messages import Message, TextBlock
from ostinato.store.base import Conversation, CreateConversation, Store, utcnow
from ostinato.store.schedules import Schedule
from ostinato.submissions import TurnHandle

MARKER = "schedule"  # metadata key of a firing's rows: "<schedule id>:<slot number>"
BACKGROUND = "background"  # metadata key of a background conversation
LOOK_BACK = 50  # rows read for a marker before writing one
LATE_NOTE_S = 60.0  # a prompt this late says so


def marker(schedule: Schedule) -> str:
    return f"{schedule.id}:{schedule.fired}"


BACKGROUND_SUFFIX = "-bg"


def conversation_id(schedule: Schedule) -> str:
    """The schedule's background conversation."""
    return f"{schedule.id}{BACKGROUND_SUFFIX}"


def is_reserved(cid: str) -> bool:
    """Whether ``cid`` is a name the server keeps for itself (a schedule's background
    conversation): a client that chooses its conversation's id may not choose it."""
    return cid.endswith(BACKGROUND_SUFFIX)


def is_background(conversation: Conversation) -> bool:
    return isinstance(conversation.metadata.get(BACKGROUND), dict)


async def marked(store: Store, cid: str, mark: str) -> list[Message]:
    """The rows (newest ``LOOK_BACK``) and queued inputs of ``cid`` marked ``mark``."""
    window = await store.window(cid, limit=LOOK_BACK)
    found = [row for row in window.rows if row.metadata.get(MARKER) == mark]
    queued = await store.list_queued(cid)
    return found + [q.message for q in queued if q.message.metadata.get(MARKER) == mark]


async def ensure_conversation(store: Store, schedule: Schedule) -> str:
    """The schedule's background conversation, made if it is not there yet;
    ``NotFound`` when the conversation it serves is gone, or when a conversation of that
    id is there but is not this schedule's (another owner's, or not made for it): stage
    one never runs in a conversation the schedule did not make."""
    served = await store.get_conversation(schedule.conversation_id)
    if served is None:
        raise NotFound(f"no conversation {schedule.conversation_id!r}")
    cid = conversation_id(schedule)
    existing = await store.get_conversation(cid)
    if existing is not None:
        made_for = existing.metadata.get(BACKGROUND)
        mine = isinstance(made_for, dict) and made_for.get("schedule_id") == schedule.id
        if existing.owner != schedule.owner or not mine:
            raise NotFound(f"the background conversation {cid!r} is not this schedule's")
        return cid
    now = utcnow()
    metadata: dict[str, Any] = {
        BACKGROUND: {"schedule_id": schedule.id, "conversation_id": served.id}
    }
    if "model" in served.metadata:
        metadata["model"] = served.metadata["model"]
    title = f"Background: {schedule.text[:60]}"
    made = Conversation(cid, "idle", now, now, schedule.owner, served.persona, title, metadata)
    with contextlib.suppress(StoreError):  # made meanwhile (another server took over)
        await store.write(CreateConversation(made))
    return cid


def attempt_row(schedule: Schedule, attempt: int) -> Message:
    """The row that starts an attempt: the prompt, with what the model should know."""
    note = ""
    if schedule.late_seconds and schedule.late_seconds >= LATE_NOTE_S:
        note = f" It runs {round(schedule.late_seconds / 60)} minutes late."
    again = (
        " An earlier attempt stopped before it answered (see above): do what is left."
        if attempt > 1
        else ""
    )
    preface = (
        f"[A prompt the user scheduled ({schedule.kind} {schedule.spec}, zone "
        f"{schedule.zone}) is due now.{note} You run it in the background: nobody reads "
        f"this conversation, and nobody can answer a question here. Do what it asks; your "
        f"answer is handed to the user in their conversation.{again}]"
    )
    meta = {MARKER: marker(schedule), "attempt": attempt, "trigger": "schedule"}
    text = f"{preface}\n{schedule.text}"
    return Message("user", (TextBlock(text),), hidden=True, metadata=meta)


async def start(runtime: Any, schedule: Schedule, attempt: int) -> TurnHandle:
    """Begin an attempt: its row in the background conversation, its turn (once the
    conversation's earlier turns are done), its approvals asked where the schedule
    serves. The caller ends the asking (``done``) when the attempt ends."""
    cid = await ensure_conversation(runtime.store, schedule)
    runtime.consent.asks_in[cid] = schedule.conversation_id
    try:
        submission = await runtime.submit(cid, attempt_row(schedule, attempt), policy="queue")
        handle: TurnHandle = await submission.handle()
    except BaseException:
        done(runtime, schedule)
        raise
    return handle


def done(runtime: Any, schedule: Schedule) -> None:
    runtime.consent.asks_in.pop(conversation_id(schedule), None)


async def seen(store: Store, schedule: Schedule) -> StageOne:
    """What the store shows of this slot's stage one: the attempt the schedule records,
    or (a crash between an attempt's start and its record) one marked in the background
    conversation."""
    cid = conversation_id(schedule)
    if await store.get_conversation(cid) is None:
        return StageOne()
    rows = await marked(store, cid, marker(schedule))
    attempts = max([schedule.attempts, *(int(r.metadata.get("attempt", 1)) for r in rows)])
    if attempts == 0:
        return StageOne()
    turns = await store.list_turns(cid)
    newest = _newest_attempt(schedule, rows, turns)
    if newest is None:  # its row waits in the queue, or is written and its turn not yet
        return StageOne(attempts, running=True)
    if newest.status == "running":
        return StageOne(attempts, running=True, run_id=newest.run_id)
    window = await store.window(cid, limit=LOOK_BACK)
    texts = [r.text for r in window.rows if r.turn_id == newest.id and r.role == "assistant"]
    answer = next((t for t in reversed(texts) if t.strip()), None)
    return StageOne(attempts, False, newest.stop_reason, answer, newest.run_id)


def _newest_attempt(schedule: Schedule, rows: list[Message], turns: list[Any]) -> Any:
    """The turn of the newest attempt: the one the schedule records, or the turn of the
    newest marked row (after a crash before the record), whichever began later."""
    by_run = {t.run_id: t for t in turns}
    by_id = {t.id: t for t in turns}
    found = [by_run[schedule.run_id]] if schedule.run_id in by_run else []
    found += [by_id[r.turn_id] for r in rows if r.turn_id in by_id]
    return max(found, key=lambda t: t.started_at) if found else None
