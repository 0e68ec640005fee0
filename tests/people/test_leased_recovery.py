"""Recovery with leases: two servers on one store never take each other's live turns.

"Servers" here are runtimes on one ``MemoryStore`` in this process, each with a lease
of its own. A live one's lease names this very process, so its pid is alive; a gone
one is simulated by a lease row that expired, or that names a process that has ended.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta

from ostinato.approvals import Approval, Ending, arguments_hash
from ostinato.leases import Lease, this_machine
from ostinato.messages import Message, TextBlock, ToolUseBlock
from ostinato.models.scripted import ScriptedModel, Step, text_step, tool_step
from ostinato.recovery import UNKNOWN, recover
from ostinato.runtime import Runtime
from ostinato.store.base import (
    AppendMessage,
    CreateApproval,
    DecideApproval,
    Enqueue,
    FinishTurn,
    QueuedInput,
    SetConversationState,
    StartToolCall,
    StartTurn,
    ToolCallRecord,
    Turn,
    utcnow,
)
from ostinato.store.leases import ServerLease
from ostinato.store.memory import MemoryStore
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from tests.loop.harness import assert_history_valid

GATE = asyncio.Event()
RAN: list[str] = []


async def slow_send(to: str) -> str:
    """Not idempotent; waits for the test's gate."""
    await GATE.wait()
    RAN.append(to)
    return f"sent to {to}"


def tools() -> ToolRegistry:
    return ToolRegistry([function_tool(slow_send, idempotent=False, risk="safe")])


def server(store: MemoryStore, *steps: Step, ttl: float = 30.0) -> Runtime:
    runtime = Runtime(store, model=ScriptedModel(list(steps)), tools=tools(), seed_recall=False)
    runtime.lease = Lease(store, ttl=ttl)
    return runtime


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Wait for a condition (at most ~10 s), looking every 5 ms."""
    for _ in range(2000):
        if await check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"not within 10 s: {what}")


def ended_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(done.stdout)


async def gone_lease(store: MemoryStore, lease_id: str, *, expired: bool) -> None:
    """A lease whose process is gone: expired, or on this machine with an ended pid."""
    now = utcnow()
    pid = ended_pid()
    lease = ServerLease(lease_id, "h", this_machine(), pid, None, now, now, now)
    await store.acquire_lease(lease, 60)
    if expired:
        store._leases[lease_id] = ServerLease(
            lease_id, "h", "elsewhere", 1, None, now, now, now - timedelta(seconds=1)
        )


async def crashed_turn(store: MemoryStore, holder: str | None, turn_id: str = "t1") -> str:
    """What a server leaves when it dies while a non-idempotent call runs."""
    cid = (await Runtime(store, model=ScriptedModel([])).create_conversation()).id
    now = utcnow()
    call = ToolUseBlock("b", "slow_send", {"to": "x"})
    record = ToolCallRecord("b", cid, turn_id, "slow_send", call.input, "running", now)
    await store.write(
        AppendMessage(cid, Message("user", (TextBlock("send it"),)), turn_id),
        StartTurn(Turn(turn_id, cid, "r1", "running", now, holder=holder)),
        SetConversationState(cid, "running"),
        AppendMessage(cid, Message("assistant", (call,)), turn_id),
        StartToolCall(record),
    )
    return cid


async def test_a_second_server_leaves_a_live_servers_running_call_alone() -> None:
    GATE.clear()
    RAN.clear()
    store = MemoryStore()
    first = server(store, tool_step(("slow_send", {"to": "ann"})), text_step("sent"))
    await first.recover()
    cid = (await first.create_conversation()).id
    handle = await first.start_turn(cid, "send it")
    await until(lambda: _running_call(store, cid), "the call runs")
    assert handle.turn.holder == first.holder

    second = server(store, text_step("unused"))
    assert await second.recover() == []  # nothing of the live server's is touched
    assert (await store.get_turn(handle.turn.id)).status == "running"  # type: ignore[union-attr]

    GATE.set()
    result = await handle.result()
    assert result.stop_reason == "end_turn" and RAN == ["ann"]
    rows = await store.list_messages(cid)
    assert_history_valid(rows)
    assert [r.text for m in rows for r in m.tool_results] == ["sent to ann"]
    await second.close()
    await first.close()


async def _running_call(store: MemoryStore, cid: str) -> bool:
    return any(r.status == "running" for r in await store.list_tool_calls(cid))


async def test_at_start_a_server_recovers_what_a_gone_server_held() -> None:
    store = MemoryStore()
    await gone_lease(store, "dead-here", expired=False)  # its pid has ended
    await gone_lease(store, "expired", expired=True)
    here = await crashed_turn(store, "dead-here", "t1")
    there = await crashed_turn(store, "expired", "t2")
    legacy = await crashed_turn(store, None, "t3")  # written without a lease
    runtime = server(store, text_step("unused"))
    assert len(await runtime.recover()) == 3
    for cid in (here, there, legacy):
        rows = await store.list_messages(cid)
        assert [r.text for r in rows[-1].tool_results] == [UNKNOWN]
    assert {lease.id for lease in (await store.list_leases()).leases} == {runtime.holder}
    await runtime.close()


async def test_a_live_server_takes_over_a_gone_ones_turns_and_queue_later() -> None:
    """The failover path: the lease keeper's sweep, not only the start."""
    store = MemoryStore()
    runtime = server(store, text_step("the queued one ran"), ttl=0.15)
    await runtime.recover()
    await gone_lease(store, "crashed", expired=False)
    cid = await crashed_turn(store, "crashed")
    item = QueuedInput("q1", cid, Message("user", (TextBlock("next"),)), utcnow(), holder="crashed")
    await store.write(Enqueue(item))

    async def done() -> bool:
        conversation = await store.get_conversation(cid)
        rows = await store.list_messages(cid)
        return conversation is not None and conversation.state == "idle" and len(rows) == 5

    await until(done, "the sweep recovered the turn and ran the queued message")
    rows = await store.list_messages(cid)
    assert_history_valid(rows)
    assert [m.text for m in rows if m.role == "user"] == ["send it", "next"]
    assert rows[-1].text == "the queued one ran"
    assert (await store.get_turn("t1")).holder == runtime.holder  # type: ignore[union-attr]
    await runtime.close()


async def test_queued_messages_of_a_live_server_stay_with_it() -> None:
    store = MemoryStore()
    live = Lease(store)
    await live.acquire()
    cid = (await Runtime(store, model=ScriptedModel([])).create_conversation()).id
    item = QueuedInput(
        "q1",
        cid,
        Message(
            "user",
            (TextBlock("mine")),
        ),
        utcnow(),
        holder=live.id,
    )
    await store.write(Enqueue(item))
    other = server(store, text_step("unused"))
    await other.recover()
    assert not other.busy(cid)
    assert [q.holder for q in await store.list_queued(cid)] == [live.id]
    await other.close()


async def test_two_recoverers_close_a_turn_once() -> None:
    """Both judged the holder gone; the claim (compare-and-set) lets one act."""
    store = MemoryStore()
    cid = await crashed_turn(store, "gone")
    stale = await store.running_turns()
    assert await recover(store, tools(), holder="b") == ["t1"]

    async def as_read_before(*_: object) -> list[Turn]:
        return stale

    store.running_turns = as_read_before  # type: ignore[method-assign]
    assert await recover(store, tools(), holder="c") == []
    rows = await store.list_messages(cid)
    assert sum(len(m.tool_results) for m in rows) == 1


async def test_a_decision_in_a_live_servers_turn_is_left_to_it() -> None:
    store = MemoryStore()
    live = Lease(store)
    await live.acquire()
    cid = await crashed_turn(store, live.id)
    now = utcnow()
    approval = Approval(
        "ap1",
        cid,
        "t1",
        "b",
        "slow_send",
        {"to": "x"},
        arguments_hash("slow_send", {"to": "x"}),
        "exec",
        None,
        now,
    )
    await store.write(
        CreateApproval(approval),
        FinishTurn("t1", cid, "paused", now),
        DecideApproval("ap1", Ending.APPROVED, now, "user"),
    )
    other = server(store, text_step("unused"))
    await other.recover()
    assert not other.busy(cid)  # the live server acts on its own decision
    assert (await store.get_conversation(cid)).state == "paused"  # type: ignore[union-attr]
    await other.close()
