"""Crash recovery: a turn left running is closed, its calls answered by what is known."""

from __future__ import annotations

import asyncio

from ostinato.approvals import Approval, Ending, arguments_hash
from ostinato.frames import ApprovalRequested
from ostinato.messages import Message, TextBlock, ToolUseBlock
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.recovery import INTERRUPTED, NOT_STARTED, UNKNOWN
from ostinato.store.base import (
    AppendMessage,
    CreateApproval,
    Enqueue,
    QueuedInput,
    SetConversationState,
    StartToolCall,
    StartTurn,
    ToolCallRecord,
    Turn,
    utcnow,
)
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from tests.loop.harness import Harness

RAN: list[str] = []


async def lookup(key: str) -> str:
    """Idempotent."""
    return key


async def send_email(to: str) -> str:
    """Not idempotent."""
    RAN.append(to)
    return f"sent to {to}"


def registry() -> ToolRegistry:
    return ToolRegistry(
        [
            function_tool(lookup),
            function_tool(send_email, idempotent=False, risk="exec"),
        ]
    )


async def crashed(h: Harness, *, approval: bool = False) -> tuple[str, Turn]:
    """Write what a turn leaves behind when the server dies in the middle of its tools."""
    cid = await h.conversation()
    turn = Turn("t1", cid, "r1", "running", utcnow())
    calls = (
        ToolUseBlock("a", "lookup", {"key": "k"}),
        ToolUseBlock("b", "send_email", {"to": "x@example.com"}),
        ToolUseBlock("c", "lookup", {"key": "never started"}),
    )
    now = utcnow()
    ops = [
        AppendMessage(cid, Message("user", (TextBlock("do it"),)), "t1"),
        StartTurn(turn),
        SetConversationState(cid, "running"),
        AppendMessage(cid, Message("assistant", calls), "t1"),
        StartToolCall(ToolCallRecord("a", cid, "t1", "lookup", {"key": "k"}, "running", now)),
        StartToolCall(ToolCallRecord("b", cid, "t1", "send_email", {"to": "x"}, "running", now)),
    ]
    if approval:
        ops.append(
            CreateApproval(
                Approval(
                    "ap1",
                    cid,
                    "t1",
                    "b",
                    "send_email",
                    {"to": "x@example.com"},
                    arguments_hash("send_email", {"to": "x@example.com"}),
                    "exec",
                    None,
                    now,
                )
            )
        )
    await h.store.write(*ops)
    return cid, turn


async def test_recovery_answers_every_open_call_by_what_is_known() -> None:
    h = Harness(text_step("after the crash"), tools=registry())
    cid, _turn = await crashed(h)
    assert await h.runtime.recover() == ["t1"]
    rows = await h.messages(cid)
    results = {r.tool_use_id: r.text for r in rows[-1].tool_results}
    assert results == {"a": INTERRUPTED, "b": UNKNOWN, "c": NOT_STARTED}
    statuses = {r.id: r.status for r in await h.store.list_tool_calls(cid)}
    assert statuses == {"a": "interrupted", "b": "unknown"}
    assert (await h.store.get_turn("t1")).stop_reason == "interrupted"  # type: ignore[union-attr]
    conversation = await h.store.get_conversation(cid)
    assert conversation is not None and conversation.state == "idle"
    # the conversation accepts a new message, and the email is never re-sent by itself
    RAN.clear()
    assert (await h.runtime.run_turn(cid, "status?")).stop_reason == "end_turn"
    assert RAN == []


async def test_a_pending_approval_survives_and_its_decision_continues_the_turn() -> None:
    h = Harness(text_step("sent it"), tools=registry())
    cid, _ = await crashed(h, approval=True)
    await h.runtime.recover()
    conversation = await h.store.get_conversation(cid)
    assert conversation is not None and conversation.state == "paused"
    (pending,) = await h.store.list_approvals(cid, pending_only=True)
    assert pending.id == "ap1"  # the same id as before the crash
    assert {r.tool_use_id for r in (await h.store.list_messages(cid))[-1].tool_results} == {
        "a",
        "c",
    }
    RAN.clear()
    await h.runtime.decide(cid, "ap1", approve=True)
    for _ in range(200):
        if (await h.store.get_conversation(cid)).state == "idle":  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.005)
    assert RAN == ["x@example.com"]  # ran exactly once, after the decision
    rows = await h.messages(cid)
    assert rows[-1].text == "sent it"
    turns = {t.kind: t.stop_reason for t in await h.store.list_turns(cid)}
    assert turns == {"user": "paused", "approval": "end_turn"}
    (record,) = [r for r in await h.store.list_tool_calls(cid) if r.id == "b"]
    assert record.status == "ok"
    assert (await h.store.get_approval("ap1")).ending is Ending.APPROVED  # type: ignore[union-attr]


async def test_typing_after_a_restart_dismisses_the_surviving_approval() -> None:
    h = Harness(text_step("ok"), tools=registry())
    cid, _ = await crashed(h, approval=True)
    await h.runtime.recover()
    RAN.clear()
    await h.runtime.run_turn(cid, "forget it")
    assert RAN == []
    assert (await h.store.get_approval("ap1")).ending is Ending.DISMISSED  # type: ignore[union-attr]
    await h.messages(cid)  # history valid


async def test_recovery_picks_up_queued_messages() -> None:
    h = Harness(text_step("queued one answered"), tools=registry())
    cid = await h.conversation()
    await h.store.write(
        Enqueue(QueuedInput("q1", cid, Message("user", (TextBlock("waiting"),)), utcnow()))
    )
    await h.runtime.recover()
    for _ in range(200):
        rows = await h.store.list_messages(cid)
        if len(rows) == 2:
            break
        await asyncio.sleep(0.005)
    assert [m.text for m in rows] == ["waiting", "queued one answered"]
    assert await h.store.list_queued(cid) == []
    assert ApprovalRequested  # imported for the frame names used above


async def test_a_decision_saved_just_before_a_crash_is_acted_on_after_the_restart() -> None:
    from ostinato.runtime import Runtime
    from ostinato.store.base import DecideApproval

    h = Harness(text_step("unused"), tools=registry())
    cid, _ = await crashed(h, approval=True)
    await h.runtime.recover()  # first restart: the approval survives, the turn is paused
    # the decision is saved, then the server dies before the turn that acts on it starts
    await h.store.write(DecideApproval("ap1", Ending.APPROVED, utcnow(), "user"))
    RAN.clear()
    model = ScriptedModel([text_step("sent it after all")])
    again = Runtime(h.store, model=model, tools=registry(), seed_recall=False)
    await again.recover()  # second restart
    for _ in range(200):
        if (await h.store.get_conversation(cid)).state == "idle":  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.005)
    assert RAN == ["x@example.com"]  # acted on, once
    rows = await h.messages(cid)
    assert rows[-1].text == "sent it after all"
    await again.recover()  # a third start finds nothing left to do
    assert RAN == ["x@example.com"]


async def test_a_decision_after_a_restart_is_answered_once_its_turn_has_begun() -> None:
    """Whoever reads the conversation after the decision's answer finds the continuation
    running (or done), never the conversation still ``paused`` as if nothing happened."""
    h = Harness(text_step("sent it"), tools=registry())
    cid, _ = await crashed(h, approval=True)
    await h.runtime.recover()
    RAN.clear()
    await h.runtime.decide(cid, "ap1", approve=True)
    conversation = await h.store.get_conversation(cid)
    assert conversation is not None and conversation.state != "paused"
    kinds = [t.kind for t in await h.store.list_turns(cid)]
    assert kinds == ["user", "approval"]
