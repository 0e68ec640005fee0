"""A stored response (``server.responses.record.snapshot``) and an Agent Protocol run
(``server.agent_protocol.record.run_state``) read back while their turn ends: the rows
are read, then the turn. A final answer commits with the turn's end in one write
(``TurnRecord.conclude``), so a read that finds the turn ended must also find the rows
that ended it, even when that write landed between the two reads."""

from __future__ import annotations

from ostinato.messages import Message, TextBlock, user_text
from ostinato.server.agent_protocol.record import RunRecord, run_state
from ostinato.server.responses.record import ResponseRecord, snapshot
from ostinato.server.responses.wire import Envelope
from ostinato.store import MemoryStore
from ostinato.store.base import (
    AppendMessage,
    Conversation,
    CreateConversation,
    FinishTurn,
    StartTurn,
    Turn,
    utcnow,
)


class EndsBetweenReads(MemoryStore):
    """Commits ``ending`` just before the first ``get_turn`` answers."""

    ending: tuple[AppendMessage, FinishTurn] | None = None

    async def get_turn(self, turn_id: str) -> Turn | None:
        if self.ending is not None:
            ops, self.ending = self.ending, None
            await self.write(*ops)
        return await super().get_turn(turn_id)


async def _ending_turn() -> EndsBetweenReads:
    """A conversation ``c1`` whose turn ``t1`` runs (its message's client id ``m1``),
    and ends with the answer ``done`` as soon as the turn is read."""
    store = EndsBetweenReads()
    now = utcnow()
    cid = "c1"
    turn = Turn("t1", cid, "r1", "running", now)
    asked = user_text("go")
    asked = Message(asked.role, asked.blocks, metadata={"client_message_id": "m1"})
    await store.write(
        CreateConversation(Conversation(cid, "running", now, now)),
        StartTurn(turn),
        AppendMessage(cid, asked, turn.id),
    )
    answer = Message("assistant", (TextBlock("done"),), metadata={"stop_reason": "end_turn"})
    end = FinishTurn(turn.id, cid, "end_turn", utcnow(), {}, None, None)
    store.ending = (AppendMessage(cid, answer, turn.id), end)
    return store


async def test_a_response_read_as_ended_comes_with_the_answer_that_ended_it() -> None:
    store = await _ending_turn()
    cid, now = "c1", utcnow()
    envelope = Envelope("resp_1", "ostinato", int(now.timestamp()), cid)
    rec = ResponseRecord("resp_1", "local", cid, 0, envelope, message_id="m1")
    snap = await snapshot(store, rec)
    assert snap.turn is not None and snap.turn.status == "finished"
    assert [m.text for m in snap.rows] == ["go", "done"]


async def test_a_run_read_as_ended_comes_with_the_answer_that_ended_it() -> None:
    store = await _ending_turn()
    state = await run_state(store, RunRecord("run_1", "local", "c1", "agent", 0, "m1"))
    assert state.status == "success"
    assert [m.text for m in state.rows] == ["go", "done"]
