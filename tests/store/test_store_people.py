"""Approvals, grants and queued inputs, on every engine (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from ostinato.approvals import Approval, Ending, Grant, arguments_hash
from ostinato.errors import Conflict, NotFound, StoreError
from ostinato.ids import new_id
from ostinato.messages import JSON, Message, TextBlock, ToolUseBlock, user_text
from ostinato.store import PostgresStore, SQLiteStore, Store
from ostinato.store.base import (
    AppendMessage,
    Conversation,
    CreateApproval,
    CreateConversation,
    CreateGrant,
    DecideApproval,
    Enqueue,
    FinishTurn,
    QueuedInput,
    RevokeGrant,
    StartTurn,
    TakeQueued,
    Turn,
    utcnow,
)

ARGUMENTS: JSON = {
    "path": "notes/café ☕.md",
    "lines": [1, 2.5, None, True],
    "nested": {"empty": {}, "list": [], "quote": 'say "hi"\n', "big": 2**53},
}


async def new_conversation(store: Store, owner: str | None = "ann") -> str:
    now = utcnow()
    cid = new_id()
    await store.write(CreateConversation(Conversation(cid, "idle", now, now, owner=owner)))
    return cid


def approval(cid: str, tool: str = "write_file", **kw: Any) -> Approval:
    arguments = kw.pop("arguments", {"path": "a.txt"})
    return Approval(
        id=new_id(),
        conversation_id=cid,
        turn_id=kw.pop("turn_id", new_id()),
        tool_use_id=f"toolu_{new_id()}",
        tool=tool,
        arguments=arguments,
        arguments_hash=arguments_hash(tool, arguments),
        risk=kw.pop("risk", "write"),
        family=kw.pop("family", "files"),
        requested_at=kw.pop("requested_at", utcnow()),
        **kw,
    )


def grant(owner: str | None = "ann", conversation_id: str | None = None, **kw: Any) -> Grant:
    return Grant(
        id=new_id(),
        owner=owner,
        conversation_id=conversation_id,
        tool=kw.pop("tool", "write_file"),
        scope=kw.pop("scope", "family"),
        key=kw.pop("key", "files"),
        created_at=kw.pop("created_at", utcnow()),
        **kw,
    )


def queued(cid: str, text: str = "later", **kw: Any) -> QueuedInput:
    return QueuedInput(
        id=new_id(), conversation_id=cid, message=user_text(text), created_at=utcnow(), **kw
    )


def assert_utc(value: datetime | None) -> None:
    assert value is not None
    assert value.tzinfo is not None and value.utcoffset() == timedelta(0)


# --- approvals ------------------------------------------------------------------------


async def test_an_approval_round_trips_with_its_json_arguments(store: Store) -> None:
    cid = await new_conversation(store)
    asked = approval(cid, arguments=ARGUMENTS, family=None, risk="exec")
    assert await store.write(CreateApproval(asked)) == [None]
    got = await store.get_approval(asked.id)
    assert got == asked
    assert got.arguments == ARGUMENTS
    assert got.arguments_hash == arguments_hash("write_file", ARGUMENTS)
    assert (got.status, got.ending, got.decided_at, got.remember) == ("pending", None, None, "none")
    assert_utc(got.requested_at)
    assert await store.get_approval("nope") is None


async def test_creating_an_approval_needs_its_conversation_and_a_new_id(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.write(CreateApproval(approval("nope")))
    cid = await new_conversation(store)
    asked = approval(cid)
    await store.write(CreateApproval(asked))
    with pytest.raises(StoreError, match="exists"):
        await store.write(CreateApproval(asked))


async def test_deciding_returns_the_decided_approval(store: Store) -> None:
    cid = await new_conversation(store)
    asked = approval(cid)
    await store.write(CreateApproval(asked))
    when = utcnow()
    (decided,) = await store.write(
        DecideApproval(asked.id, Ending.APPROVED, when, decided_by="ann", remember="family")
    )
    assert isinstance(decided, Approval)
    assert decided.status == "decided" and decided.ending is Ending.APPROVED
    assert (decided.decided_at, decided.decided_by, decided.remember) == (when, "ann", "family")
    assert_utc(decided.decided_at)
    assert decided.arguments == asked.arguments and decided.requested_at == asked.requested_at
    assert await store.get_approval(asked.id) == decided


@pytest.mark.parametrize("ending", list(Ending))
async def test_every_ending_is_kept(store: Store, ending: Ending) -> None:
    cid = await new_conversation(store)
    asked = approval(cid)
    await store.write(CreateApproval(asked))
    await store.write(DecideApproval(asked.id, ending, utcnow()))
    got = await store.get_approval(asked.id)
    assert got is not None and got.ending is ending and got.decided_by is None


async def test_deciding_twice_is_a_conflict_and_keeps_the_first(store: Store) -> None:
    cid = await new_conversation(store)
    asked = approval(cid)
    await store.write(CreateApproval(asked))
    (first,) = await store.write(DecideApproval(asked.id, Ending.DECLINED, utcnow(), "ann"))
    with pytest.raises(Conflict, match="DECLINED"):
        await store.write(DecideApproval(asked.id, Ending.APPROVED, utcnow(), "bob"))
    assert await store.get_approval(asked.id) == first


async def test_deciding_an_unknown_approval_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.write(DecideApproval("nope", Ending.APPROVED, utcnow()))


async def test_two_deciders_at_once_one_wins(store: Store) -> None:
    """Each round races two writes from two tasks; exactly one decides."""
    cid = await new_conversation(store)
    for _ in range(10):
        asked = approval(cid)
        await store.write(CreateApproval(asked))
        outcomes = await asyncio.gather(
            asyncio.create_task(
                store.write(DecideApproval(asked.id, Ending.APPROVED, utcnow(), "ann"))
            ),
            asyncio.create_task(
                store.write(DecideApproval(asked.id, Ending.DECLINED, utcnow(), "bob"))
            ),
            return_exceptions=True,
        )
        wins = [o[0] for o in outcomes if isinstance(o, list)]
        losses = [o for o in outcomes if isinstance(o, BaseException)]
        assert len(wins) == 1 and len(losses) == 1, outcomes
        assert isinstance(losses[0], Conflict)
        assert await store.get_approval(asked.id) == wins[0]


async def test_list_approvals_oldest_first_by_conversation_and_pending(store: Store) -> None:
    cid, other = await new_conversation(store), await new_conversation(store)
    base = utcnow()
    mine = [approval(cid, requested_at=base + timedelta(seconds=i)) for i in range(4)]
    theirs = approval(other, requested_at=base + timedelta(seconds=10))
    await store.write(*(CreateApproval(a) for a in [*mine, theirs]))
    await store.write(DecideApproval(mine[1].id, Ending.UNANSWERED, utcnow()))

    assert [a.id for a in await store.list_approvals(cid)] == [a.id for a in mine]
    pending = await store.list_approvals(cid, pending_only=True)
    assert [a.id for a in pending] == [mine[0].id, mine[2].id, mine[3].id]
    everyone = await store.list_approvals()
    assert [a.id for a in everyone] == [a.id for a in [*mine, theirs]]
    pending_anywhere = await store.list_approvals(pending_only=True)
    assert mine[1].id not in [a.id for a in pending_anywhere] and len(pending_anywhere) == 4
    assert await store.list_approvals("nope") == []


# --- grants ---------------------------------------------------------------------------


async def test_a_grant_round_trips(store: Store) -> None:
    cid = await new_conversation(store)
    asked = approval(cid)
    given = grant(
        owner=None,
        conversation_id=cid,
        scope="exact",
        key=asked.arguments_hash,
        expires_at=utcnow() + timedelta(hours=1),
        approval_id=asked.id,
        metadata={"note": "ünïcode", "n": [1, 2]},
    )
    await store.write(CreateGrant(given))
    got = await store.get_grant(given.id)
    assert got == given
    assert_utc(got.created_at)
    assert_utc(got.expires_at)
    assert await store.get_grant("nope") is None
    with pytest.raises(StoreError, match="exists"):
        await store.write(CreateGrant(given))


async def test_revoking_keeps_the_first_time(store: Store) -> None:
    given = grant()
    await store.write(CreateGrant(given))
    first = utcnow()
    await store.write(RevokeGrant(given.id, first))
    await store.write(RevokeGrant(given.id, first + timedelta(minutes=5)))
    got = await store.get_grant(given.id)
    assert got is not None and got.revoked_at == first
    assert_utc(got.revoked_at)
    with pytest.raises(NotFound):
        await store.write(RevokeGrant("nope", utcnow()))


async def test_list_grants_by_owner_conversation_and_revoked(store: Store) -> None:
    cid = await new_conversation(store)
    owner = f"owner-{new_id()}"
    base = utcnow()

    def at(i: int, **kw: Any) -> Grant:
        return grant(created_at=base + timedelta(seconds=i), **kw)

    owners = at(0, owner=owner)
    conversations = at(1, owner=None, conversation_id=cid)
    both = at(2, owner=owner, conversation_id=cid)
    revoked = at(3, owner=owner)
    elsewhere = at(4, owner="someone-else", conversation_id=new_id())
    await store.write(*(CreateGrant(g) for g in [owners, conversations, both, revoked, elsewhere]))
    await store.write(RevokeGrant(revoked.id, utcnow()))

    def ids(found: list[Grant]) -> list[str]:
        return [g.id for g in found]

    assert ids(await store.list_grants(owner=owner)) == [owners.id, both.id]
    assert ids(await store.list_grants(conversation_id=cid)) == [conversations.id, both.id]
    assert ids(await store.list_grants(owner=owner, conversation_id=cid)) == [
        owners.id,
        conversations.id,
        both.id,
    ]
    assert ids(await store.list_grants(owner=owner, include_revoked=True)) == [
        owners.id,
        both.id,
        revoked.id,
    ]
    assert await store.list_grants() == []
    assert await store.list_grants(owner="nobody", conversation_id="nope") == []


# --- queued inputs --------------------------------------------------------------------


async def test_enqueue_returns_the_item_with_its_position(store: Store) -> None:
    cid = await new_conversation(store)
    message = Message(
        "user",
        (TextBlock("and also"), ToolUseBlock("tu_1", "x", {"q": "é"})),
        hidden=True,
        metadata={"via": "web"},
    )
    item = QueuedInput(new_id(), cid, message, utcnow(), client_message_id="client-1")
    (stored,) = await store.write(Enqueue(item))
    assert isinstance(stored, QueuedInput)
    assert stored.position > 0 and stored.status == "queued"
    assert stored.id == item.id and stored.message == message
    (listed,) = await store.list_queued(cid)
    assert listed == stored
    assert listed.message == message and listed.client_message_id == "client-1"
    assert_utc(listed.created_at)


async def test_enqueue_needs_its_conversation_and_a_new_id(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.write(Enqueue(queued("nope")))
    cid = await new_conversation(store)
    item = queued(cid)
    await store.write(Enqueue(item))
    with pytest.raises(StoreError, match="exists"):
        await store.write(Enqueue(item))
    assert len(await store.list_queued(cid)) == 1


async def test_positions_increase_in_arrival_order_across_conversations(store: Store) -> None:
    a, b = await new_conversation(store), await new_conversation(store)
    made = []
    for i in range(6):
        (stored,) = await store.write(Enqueue(queued(a if i % 2 else b, str(i))))
        made.append(stored)
    positions = [q.position for q in made]
    assert positions == sorted(positions) and len(set(positions)) == 6
    assert await store.list_queued() == made
    assert await store.list_queued(a) == made[1::2]
    assert await store.list_queued(b) == made[0::2]
    assert await store.list_queued("nope") == []


async def test_take_and_drop_leave_the_queue(store: Store) -> None:
    cid = await new_conversation(store)
    first, second, third = (queued(cid, str(i)) for i in range(3))
    await store.write(Enqueue(first), Enqueue(second), Enqueue(third))
    assert await store.write(TakeQueued(first.id)) == [None]
    await store.write(TakeQueued(third.id, "dropped"))
    assert [q.id for q in await store.list_queued(cid)] == [second.id]
    with pytest.raises(Conflict, match="taken"):
        await store.write(TakeQueued(first.id))
    with pytest.raises(Conflict, match="dropped"):
        await store.write(TakeQueued(third.id, "taken"))
    with pytest.raises(NotFound):
        await store.write(TakeQueued("nope"))


async def test_50_concurrent_enqueues_get_distinct_increasing_positions(store: Store) -> None:
    cids = [await new_conversation(store) for _ in range(5)]
    tasks = [
        asyncio.create_task(store.write(Enqueue(queued(cids[i % 5], str(i))))) for i in range(50)
    ]
    stored = [result[0] for result in await asyncio.gather(*tasks)]
    positions = [q.position for q in stored]
    assert len(set(positions)) == 50 and min(positions) > 0
    listed = await store.list_queued()
    assert [q.position for q in listed] == sorted(positions)  # strictly increasing
    assert {q.id for q in listed} == {q.id for q in stored}
    for cid in cids:
        mine = await store.list_queued(cid)
        assert len(mine) == 10 and [q.position for q in mine] == sorted(q.position for q in mine)
    (later,) = await store.write(Enqueue(queued(cids[0], "later")))
    assert later.position > max(positions)


# --- one write, all or nothing ----------------------------------------------------------


async def test_a_conflicting_decision_keeps_nothing_of_its_write(store: Store) -> None:
    cid = await new_conversation(store)
    asked = approval(cid)
    await store.write(CreateApproval(asked))
    await store.write(DecideApproval(asked.id, Ending.APPROVED, utcnow()))
    before = await store.get_approval(asked.id)
    new_grant, item, other = grant(conversation_id=cid), queued(cid), approval(cid)
    with pytest.raises(Conflict):
        await store.write(
            CreateGrant(new_grant),
            Enqueue(item),
            CreateApproval(other),
            AppendMessage(cid, user_text("lost")),
            DecideApproval(asked.id, Ending.DECLINED, utcnow()),
        )
    assert await store.get_grant(new_grant.id) is None
    assert await store.list_queued(cid) == []
    assert await store.get_approval(other.id) is None
    assert await store.list_messages(cid) == []
    assert await store.get_approval(asked.id) == before


async def test_a_failing_op_undoes_decisions_revocations_and_takes(store: Store) -> None:
    cid = await new_conversation(store)
    asked, given, item = approval(cid), grant(), queued(cid)
    await store.write(CreateApproval(asked), CreateGrant(given), Enqueue(item))
    with pytest.raises(NotFound):
        await store.write(
            DecideApproval(asked.id, Ending.APPROVED, utcnow()),
            RevokeGrant(given.id, utcnow()),
            TakeQueued(item.id),
            RevokeGrant("nope", utcnow()),
        )
    got = await store.get_approval(asked.id)
    assert got is not None and got.status == "pending"
    revoked = await store.get_grant(given.id)
    assert revoked is not None and revoked.revoked_at is None
    assert [q.id for q in await store.list_queued(cid)] == [item.id]
    # Everything undone can still happen.
    await store.write(DecideApproval(asked.id, Ending.APPROVED, utcnow()), TakeQueued(item.id))


async def test_one_write_creates_and_decides(store: Store) -> None:
    cid = await new_conversation(store)
    asked = approval(cid)
    item = queued(cid)
    results = await store.write(
        CreateApproval(asked),
        DecideApproval(asked.id, Ending.APPROVED, utcnow(), "ann", "exact"),
        CreateGrant(grant(scope="exact", key=asked.arguments_hash, approval_id=asked.id)),
        Enqueue(item),
        TakeQueued(item.id),
    )
    assert results[0] is None and results[2] is None and results[4] is None
    assert isinstance(results[1], Approval) and results[1].remember == "exact"
    assert isinstance(results[3], QueuedInput) and results[3].status == "queued"
    assert await store.list_queued(cid) == []


# --- turns: the engines agree -----------------------------------------------------------


async def test_starting_a_turn_twice_is_a_store_error(store: Store) -> None:
    cid = await new_conversation(store)
    t = Turn(new_id(), cid, new_id(), "running", utcnow())
    await store.write(StartTurn(t))
    with pytest.raises(StoreError, match="exists") as caught:
        await store.write(StartTurn(t))
    assert not isinstance(caught.value, NotFound)
    assert await store.get_turn(t.id) == t


async def test_finishing_a_turn_of_an_unknown_conversation_is_not_found(store: Store) -> None:
    cid = await new_conversation(store)
    t = Turn(new_id(), cid, new_id(), "running", utcnow())
    await store.write(StartTurn(t))
    with pytest.raises(NotFound, match="conversation"):
        await store.write(FinishTurn(t.id, "nope", "end_turn", utcnow()))
    assert await store.get_turn(t.id) == t  # the turn's update was undone with it


# --- a decision racing one made outside the store ---------------------------------------


async def test_postgres_a_decide_waits_for_a_rival_and_then_conflicts(
    postgres_store: PostgresStore,
) -> None:
    """Another transaction decided the approval but has not committed: the store's
    decision waits on the row lock, re-reads the row after the commit, and conflicts."""
    store = postgres_store
    cid = await new_conversation(store)
    asked = approval(cid)
    await store.write(CreateApproval(asked))
    async with store.engine.connect() as rival:
        await rival.begin()
        await rival.execute(
            sa.text("UPDATE approvals SET status = 'decided', ending = 'DECLINED' WHERE id = :id"),
            {"id": asked.id},
        )
        pending = asyncio.create_task(
            store.write(DecideApproval(asked.id, Ending.APPROVED, utcnow()))
        )
        await asyncio.sleep(0.2)
        assert not pending.done()  # waiting for the rival's row lock
        await rival.commit()
    with pytest.raises(Conflict, match="DECLINED"):
        await pending
    got = await store.get_approval(asked.id)
    assert got is not None and got.ending is Ending.DECLINED


async def test_sqlite_a_decide_waits_for_a_rival_and_then_conflicts(
    sqlite_store: SQLiteStore,
) -> None:
    """Another connection holds the write lock with its own decision: the store's
    decision waits in the writer thread and, once the rival commits, conflicts."""
    store = sqlite_store
    cid = await new_conversation(store)
    asked = approval(cid)
    await store.write(CreateApproval(asked))
    rival = sqlite3.connect(store.path, isolation_level=None)
    try:
        rival.execute("BEGIN IMMEDIATE")
        rival.execute(
            "UPDATE approvals SET status = 'decided', ending = 'DECLINED' WHERE id = ?",
            (asked.id,),
        )
        pending = asyncio.create_task(
            store.write(DecideApproval(asked.id, Ending.APPROVED, utcnow()))
        )
        await asyncio.sleep(0.2)
        assert not pending.done()  # waiting for the write lock, not failing with BUSY
        rival.execute("COMMIT")
        with pytest.raises(Conflict, match="DECLINED"):
            await pending
    finally:
        rival.close()


async def test_tool_switches_per_scope(store: Store) -> None:
    from ostinato.store.base import SetToolSwitch

    assert await store.switched_off_tools("ann") == frozenset()
    await store.write(SetToolSwitch("ann", "shell", False), SetToolSwitch("ann", "clock", False))
    await store.write(SetToolSwitch("bob", "shell", False))
    assert await store.switched_off_tools("ann") == {"shell", "clock"}
    await store.write(SetToolSwitch("ann", "clock", True))  # back on: an update, not a copy
    assert await store.switched_off_tools("ann") == {"shell"}
    assert await store.switched_off_tools("bob") == {"shell"}
