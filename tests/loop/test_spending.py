"""A turn's own calls against the budgets (``loop.spending``): past the hard limit no call
is made and the turn ends ``spend_limit`` with a sentence saying when the budget resets;
past the soft limit the person is asked first, as an approval any surface answers."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ostinato.approvals import SPEND, Ending
from ostinato.errors import StoreError
from ostinato.frames import ApprovalRequested, Frame, TurnFinished
from ostinato.ids import new_id
from ostinato.models.scripted import text_step, tool_step
from ostinato.observe import prices
from ostinato.recovery import recover
from ostinato.spend.gate import SpendGate
from ostinato.spend.limits import Budgets
from ostinato.spend.rule import Account, Limit
from ostinato.store.base import (
    AppendMessage,
    CreateApproval,
    StartTurn,
    WriteOp,
    utcnow,
)
from ostinato.store.spend import Charge, CloseTab, TabSpend
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from tests.loop.harness import Harness

MODEL = "scripted:model"
# $10 a million tokens: a call of ~50 tokens in and at most 100 out is under $0.0015
PRICE = prices.Price(input=10.0, output=10.0)


@pytest.fixture(autouse=True)
def priced() -> Iterator[None]:
    prices.configure({MODEL: PRICE})
    yield
    prices.configure({})


def harness(
    budgets: Budgets, *steps: object, timeout: float = 5.0, tools: ToolRegistry | None = None
) -> Harness:
    tools = tools or ToolRegistry([])
    h = Harness(*steps, tools=tools, max_tokens=100)  # type: ignore[arg-type]
    h.runtime.spend = SpendGate(h.store, budgets)
    h.runtime.consent.policy = type(h.runtime.consent.policy)(timeout=timeout)
    return h


async def spent_before(h: Harness, amount: float, owner: str = "") -> None:
    """What was spent today before the test's turns."""
    day = utcnow().date().isoformat()
    keys = (("owner", owner), ("deployment", ""))
    await h.store.settle_spend(None, Charge(owner, day, MODEL, "default", keys, amount))  # type: ignore[arg-type]


async def requested(frames: AsyncIterator[Frame]) -> ApprovalRequested:
    async for frame in frames:
        if isinstance(frame, ApprovalRequested):
            return frame
    raise AssertionError("no approval.requested frame")


async def test_past_the_hard_limit_no_call_is_made_and_the_turn_says_when_it_resets() -> None:
    h = harness(Budgets(default=Limit(hard=0.05)))  # the model has no step: a call fails
    await spent_before(h, 0.0495)
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "hello")
    assert result.stop_reason == "spend_limit"
    h.model.assert_consumed()
    assert not h.model.requests  # no call was made
    last = (await h.messages(cid))[-1]
    assert last.role == "assistant" and last.metadata["stop_reason"] == "spend_limit"
    assert "today's limit of $0.05" in last.text and "It resets at" in last.text
    assert last.metadata["spend"]["account"] == "owner"
    assert (await h.store.get_conversation(cid)).state == "idle"  # type: ignore[union-attr]
    finished = [f for f in h.bus.frames if isinstance(f, TurnFinished)]
    assert finished[-1].stop_reason == "spend_limit"


async def test_every_call_is_counted_for_its_owner_by_model_and_agent() -> None:
    h = harness(Budgets(), tool_step(("nothing", {})), text_step("done"))
    cid = await h.conversation()
    await h.runtime.run_turn(cid, "hello")
    day = utcnow().date().isoformat()
    (row,) = await h.store.usage_rows("", day, day)  # the harness' conversations have no owner
    assert (row.model, row.agent, row.calls, row.unpriced_calls) == (MODEL, "default", 2, 0)
    assert row.cost_usd > 0 and row.tokens_in > 0
    assert [h.amount for h in await h.store.spend_holds()] == [0.0]  # a tab, none reserved


async def test_a_model_with_no_price_is_counted_at_no_known_cost() -> None:
    prices.configure({})
    h = harness(Budgets(default=Limit(hard=0.05)), text_step("done"))
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "hello")).stop_reason == "end_turn"
    day = utcnow().date().isoformat()
    (row,) = await h.store.usage_rows("", day, day)
    assert (row.calls, row.unpriced_calls, row.cost_usd) == (1, 1, 0.0)


async def test_past_the_soft_limit_the_person_is_asked_and_agreeing_goes_on() -> None:
    h = harness(Budgets(default=Limit(soft=0.01, hard=1.0)), text_step("one"), text_step("two"))
    await spent_before(h, 0.0099)
    cid = await h.conversation()
    watcher = h.bus.subscribe(cid)
    task = asyncio.ensure_future(h.runtime.run_turn(cid, "hello"))
    frame = await asyncio.wait_for(requested(watcher), 2)
    assert frame.tool == SPEND and frame.risk == SPEND
    assert frame.input["question"].startswith("This will take you past $0.01 of today's $1.00")
    assert not h.model.requests  # the call waits for the answer
    await h.runtime.decide(cid, frame.approval_id, approve=True)
    assert (await asyncio.wait_for(task, 5)).stop_reason == "end_turn"
    (grant,) = await h.runtime.list_grants(cid)
    assert grant.tool == SPEND and grant.scope == "family"
    tomorrow = datetime.combine(utcnow().date() + timedelta(days=1), datetime.min.time(), UTC)
    assert grant.expires_at == tomorrow  # agreed for the rest of the day
    # the next turn is past the soft limit too: the grant answers, nobody is asked
    assert (await h.runtime.run_turn(cid, "again")).stop_reason == "end_turn"
    endings = [a.ending for a in await h.store.list_approvals(cid)]
    assert endings == [Ending.APPROVED, Ending.APPROVED]
    h.model.assert_consumed()


async def test_not_agreeing_to_pass_the_soft_limit_ends_the_turn() -> None:
    h = harness(Budgets(default=Limit(soft=0.01)))
    await spent_before(h, 0.0099)
    cid = await h.conversation()
    watcher = h.bus.subscribe(cid)
    task = asyncio.ensure_future(h.runtime.run_turn(cid, "hello"))
    frame = await asyncio.wait_for(requested(watcher), 2)
    await h.runtime.decide(cid, frame.approval_id, approve=False)
    result = await asyncio.wait_for(task, 5)
    assert result.stop_reason == "spend_limit" and not h.model.requests
    last = (await h.messages(cid))[-1]
    assert "so as not to go past today's soft limit of $0.01" in last.text
    assert last.metadata["spend"]["ending"] == "DECLINED"
    assert await h.runtime.list_grants(cid) == []


async def test_with_nobody_watching_the_soft_limit_stops_the_turn() -> None:
    h = harness(Budgets(default=Limit(soft=0.01)))
    await spent_before(h, 0.0099)
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "hello")
    assert result.stop_reason == "spend_limit"
    (approval,) = await h.store.list_approvals(cid)
    assert approval.tool == SPEND and approval.ending is Ending.UNREACHABLE


async def test_each_step_is_checked_so_a_turn_stops_between_steps() -> None:
    """The first step goes; a tool lowers the limit (as a reload would); the next step is
    not made, and the history stays valid."""
    gates: list[SpendGate] = []

    async def tighten() -> str:
        """Lower the budget."""
        gates[0].budgets = Budgets(default=Limit(hard=0.000001))
        return "lowered"

    tools = ToolRegistry([function_tool(tighten)])
    h = harness(Budgets(), tool_step(("tighten", {})), tools=tools)
    assert h.runtime.spend is not None
    gates.append(h.runtime.spend)
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "hello")
    assert result.stop_reason == "spend_limit"
    assert len(h.model.requests) == 1
    rows = await h.messages(cid)  # the call was answered before the turn stopped
    assert [r.role for r in rows] == ["user", "assistant", "tool", "assistant"]
    assert rows[-1].metadata["stop_reason"] == "spend_limit"


async def test_a_spend_card_left_by_a_crash_ends_unanswered() -> None:
    """The server stopped while the card waited: recovery closes the turn and the card."""
    h = harness(Budgets(default=Limit(soft=0.01)))
    await spent_before(h, 0.0099)
    cid = await h.conversation()
    watcher = h.bus.subscribe(cid)
    handle = await h.runtime.start_turn(cid, "hello")
    frame = await asyncio.wait_for(requested(watcher), 2)
    handle.task.cancel()  # as if the process stopped here: the turn stays running
    with contextlib.suppress(asyncio.CancelledError):
        await handle.task
    turn = await h.store.get_turn(handle.turn.id)
    assert turn is not None
    await h.store.write(StartTurn(dataclasses.replace(turn, status="running", id=new_id())))
    approval = await h.store.get_approval(frame.approval_id)
    assert approval is not None
    left = dataclasses.replace(approval, id=new_id(), status="pending", ending=None)
    running = next(t for t in await h.store.list_turns(cid) if t.status == "running")
    await h.store.write(CreateApproval(dataclasses.replace(left, turn_id=running.id)))
    assert await recover(h.store, h.runtime.tools) == [running.id]
    closed = await h.store.get_approval(left.id)
    assert closed is not None and closed.ending is Ending.UNANSWERED
    assert (await h.store.get_turn(running.id)).stop_reason == "interrupted"  # type: ignore[union-attr]


def writes_of(h: Harness, fail: type | None = None) -> list[tuple[type, ...]]:
    """The op types of each of the store's writes from now on; with ``fail``, the first
    write holding an op of that type is refused, as a store that fails would."""
    seen: list[tuple[type, ...]] = []
    write = h.store.write

    async def spy(*ops: WriteOp) -> list[object]:
        kinds = tuple(type(op) for op in ops)
        refused = fail in kinds and not any(fail in k for k in seen)
        seen.append(kinds)
        if refused:
            raise StoreError("refused")
        return await write(*ops)

    h.store.write = spy  # type: ignore[method-assign]
    return seen


@pytest.mark.parametrize("limit", [Limit(hard=5.0), None], ids=["limited", "counted"])
async def test_a_turns_calls_are_counted_with_their_replies_and_its_tab_kept_for_the_next(
    limit: Limit | None,
) -> None:
    """No transaction of its own a step: each call is counted on the turn's tab in the
    write that commits its reply (``TabSpend``); the turn's end parks the tab, the next
    turn goes on with it (no reservation, no new row), and it is charged when the server
    closes it (``CloseTab``). A limited turn reserves once, for several calls."""
    steps = (tool_step(("nothing", {})), text_step("done"), text_step("again"))
    h = harness(Budgets(default=limit), *steps)
    gate = h.runtime.spend
    assert isinstance(gate, SpendGate)
    cid = await h.conversation()
    writes = writes_of(h)
    alone: list[str] = []
    settle, reserve = h.store.settle_spend, h.store.reserve_spend

    async def settled(*args: Any) -> None:
        alone.append("settle")
        await settle(*args)

    async def reserved(*args: Any) -> Any:
        alone.append("reserve")
        return await reserve(*args)

    h.store.settle_spend = settled  # type: ignore[method-assign]
    h.store.reserve_spend = reserved  # type: ignore[method-assign]
    assert (await h.runtime.run_turn(cid, "hello")).stop_reason == "end_turn"
    assert (await h.runtime.run_turn(cid, "and again")).stop_reason == "end_turn"
    replies = [kinds for kinds in writes if TabSpend in kinds]
    assert len(replies) == 3 and all(AppendMessage in kinds for kinds in replies)
    assert not [kinds for kinds in writes if CloseTab in kinds]  # parked, not closed
    assert alone == (["reserve"] if limit is not None else [])
    (tab,) = await h.store.spend_holds()  # one tab for both turns
    assert tab.calls == 3 and len(gate.parking) == 1
    day = utcnow().date().isoformat()
    (row,) = await h.store.usage_rows("", day, day)  # read with the tab's calls in it
    assert row.calls == 3 and row.cost_usd > 0
    await gate.parking.close_all()  # the server stops
    assert await h.store.spend_holds() == []
    (charged,) = await h.store.usage_rows("", day, day)
    assert charged.calls == 3 and charged.cost_usd == pytest.approx(row.cost_usd)
    own = Account("owner", "", Limit(hard=5.0))
    (standing,) = await h.store.spend_standings((own,), utcnow())
    assert standing.reserved == 0.0 and standing.spent == pytest.approx(row.cost_usd)


async def test_a_reply_whose_write_fails_has_its_call_charged_alone() -> None:
    """The call was made: when its reply's row cannot be committed, it is counted on the
    tab in a write of its own; the tab, parked, is charged when the server closes it."""
    h = harness(Budgets(default=Limit(hard=5.0)), text_step("done"))
    cid = await h.conversation()
    writes = writes_of(h, fail=TabSpend)
    assert (await h.runtime.run_turn(cid, "hello")).stop_reason == "failed"
    assert (TabSpend,) in writes
    gate = h.runtime.spend
    assert isinstance(gate, SpendGate)
    await gate.parking.close_all()
    assert await h.store.spend_holds() == []
    day = utcnow().date().isoformat()
    (row,) = await h.store.usage_rows("", day, day)
    assert row.calls == 1 and row.cost_usd > 0
    own = Account("owner", "", Limit(hard=5.0))
    (standing,) = await h.store.spend_standings((own,), utcnow())
    assert standing.reserved == 0.0 and standing.spent == pytest.approx(row.cost_usd)
