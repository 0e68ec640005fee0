"""A message steered on one server and taken by a turn running on another
(``ostinato.steered_elsewhere``): its sender is handed that turn, found by the row's
``queued_id``, even when no frame of the other server reaches this one (the store is
read every ``CHECK_S``), or when this server's worker reaches the message after the take
(``taken_late``); a message withdrawn first ends the watch."""

from __future__ import annotations

import asyncio

import pytest

from ostinato import steered_elsewhere
from ostinato.agents import AgentConfig
from ostinato.bus import LocalBus
from ostinato.errors import Conflict
from ostinato.messages import user_text
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.queueing import steer_marked
from ostinato.runtime import Runtime
from ostinato.store.base import (
    Conversation,
    CreateConversation,
    Enqueue,
    QueuedInput,
    utcnow,
)
from ostinato.store.memory import MemoryStore
from ostinato.submissions import NewMessage, Submission, TurnHandle
from ostinato.turns import Workers
from tests.loop.test_steering import Gate


async def _never(cid: str, submission: Submission) -> TurnHandle:
    raise AssertionError("nothing begins a turn on this server")


async def _queued(store: MemoryStore, cid: str, text: str) -> Submission:
    message = steer_marked(user_text(text))
    (queued,) = await store.write(Enqueue(QueuedInput("q-b", cid, message, utcnow())))
    return Submission(NewMessage(message, None, queued))


async def test_the_sender_follows_the_turn_that_took_it_when_no_frame_arrives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(steered_elsewhere, "CHECK_S", 0.02)
    store, gate = MemoryStore(), Gate()
    steps = [tool_step(("wait", {"label": "a"})), text_step("Seen.")]
    model = ScriptedModel(steps)
    a = Runtime(store, model=model, tools=gate.registry(), agent=AgentConfig())
    try:
        cid = (await a.create_conversation()).id
        running = await a.start_turn(cid, "start")
        await asyncio.wait_for(gate.entered.wait(), 5)
        submission = await _queued(store, cid, "and this")
        silent = LocalBus()  # server b's bus: no frame of a's turn reaches it
        watch = silent.subscribe(cid)
        steered_elsewhere.follow(store, Workers(_never), watch, submission)
        gate.release.set()
        handle = await asyncio.wait_for(submission.handle(), 10)
        assert handle.turn.id == running.turn.id and handle.run_id == running.run_id
        result = await asyncio.wait_for(handle.result(), 10)
        assert (result.turn_id, result.stop_reason) == (running.turn.id, "end_turn")
        steered, answer = result.messages
        assert steered.metadata["queued_id"] == "q-b" and steered.metadata["steered"] is True
        assert steered.text == "and this" and answer.text == "Seen."
        assert silent.subscriber_count(cid) == 0  # the watch let its subscription go
    finally:
        await a.close()


async def test_a_withdrawn_message_ends_the_watch() -> None:
    store = MemoryStore()
    cid, now = "c-1", utcnow()
    await store.write(CreateConversation(Conversation(cid, "idle", now, now)))
    submission = await _queued(store, cid, "never taken")
    bus = LocalBus()
    steered_elsewhere.follow(store, Workers(_never), bus.subscribe(cid), submission)
    submission.started.set_exception(Conflict("withdrawn"))
    with pytest.raises(Conflict):
        await submission.handle()
    for _ in range(100):
        if bus.subscriber_count(cid) == 0:
            break
        await asyncio.sleep(0.01)
    assert bus.subscriber_count(cid) == 0


async def test_a_message_found_taken_as_it_would_begin_here_follows_the_turn_that_took_it() -> None:
    """The watch missed the take (say the frames were lost and this server's worker came
    to the message first): the worker finds the row as the message would begin, and its
    sender follows the turn that took it instead of a 409."""
    store, gate = MemoryStore(), Gate()
    steps = [tool_step(("wait", {"label": "a"})), text_step("Seen.")]
    a = Runtime(store, model=ScriptedModel(steps), tools=gate.registry(), agent=AgentConfig())
    b = Runtime(store, model=ScriptedModel([]), agent=AgentConfig())
    try:
        cid = (await a.create_conversation()).id
        running = await a.start_turn(cid, "start")
        await asyncio.wait_for(gate.entered.wait(), 5)
        submission = await _queued(store, cid, "and this")
        gate.release.set()
        await asyncio.wait_for(running.result(), 10)  # a's turn took it and ended
        b._workers.add(cid, submission)  # b's worker comes to it now
        handle = await asyncio.wait_for(submission.handle(), 10)
        assert handle.run_id == running.run_id
        result = await asyncio.wait_for(handle.result(), 10)
        assert [m.text for m in result.messages] == ["and this", "Seen."]
        assert len(await store.list_turns(cid)) == 1
    finally:
        await b.close()
        await a.close()
