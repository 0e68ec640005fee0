"""Approvals: five endings, each an audit row; grants; a decision runs the tool once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from ostinato.approvals import ApprovalPolicy, Ending
from ostinato.errors import Conflict, InvalidRequest
from ostinato.frames import ApprovalRequested, Frame
from ostinato.models.scripted import text_step, tool_step
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from tests.loop.harness import Harness

RUNS: list[str] = []


async def deploy(target: str) -> str:
    """Deploy to a target.

    Args:
        target: Where to deploy.
    """
    RUNS.append(target)
    return f"deployed {target}"


def tools() -> ToolRegistry:
    return ToolRegistry(
        [function_tool(deploy, risk="exec", idempotent=False, family=lambda a: "deploy")]
    )


def harness(*steps: object, timeout: float = 5.0) -> Harness:
    RUNS.clear()
    h = Harness(*steps, tools=tools())  # type: ignore[arg-type]
    h.runtime.consent.policy = ApprovalPolicy(timeout=timeout)
    return h


async def requested(frames: AsyncIterator[Frame]) -> ApprovalRequested:
    async for frame in frames:
        if isinstance(frame, ApprovalRequested):
            return frame
    raise AssertionError("no approval.requested frame")


async def start(
    h: Harness, text: str = "ship it"
) -> tuple[str, asyncio.Task[object], ApprovalRequested]:
    cid = await h.conversation()
    watcher = h.bus.subscribe(cid)  # a surface is watching
    task = asyncio.ensure_future(h.runtime.run_turn(cid, text))
    frame = await asyncio.wait_for(requested(watcher), 2)
    return cid, task, frame  # type: ignore[return-value]


async def test_approved_runs_once_and_a_second_decision_is_a_conflict() -> None:
    h = harness(tool_step(("deploy", {"target": "prod"})), text_step("done"))
    cid, task, frame = await start(h)
    assert frame.tool == "deploy" and frame.risk == "exec" and frame.input == {"target": "prod"}
    approval = await h.runtime.decide(cid, frame.approval_id, approve=True)
    assert approval.ending is Ending.APPROVED and approval.decided_by == "user"
    with pytest.raises(Conflict):
        await h.runtime.decide(cid, frame.approval_id, approve=False)
    await task
    assert RUNS == ["prod"]
    rows = await h.messages(cid)
    assert rows[2].tool_results[0].text == "deployed prod"
    assert "approval.decided" in h.bus.types()


async def test_declined_is_told_to_the_model_and_audited() -> None:
    h = harness(tool_step(("deploy", {"target": "prod"})), text_step("ok, not deploying"))
    cid, task, frame = await start(h)
    await h.runtime.decide(cid, frame.approval_id, approve=False, who="alice")
    await task
    assert RUNS == []
    result = (await h.messages(cid))[2].tool_results[0]
    assert result.is_error and "declined" in result.text
    (audit,) = await h.store.list_approvals(cid)
    assert audit.ending is Ending.DECLINED and audit.decided_by == "alice"
    assert audit.arguments_hash and audit.tool == "deploy" and audit.decided_at is not None
    (record,) = await h.store.list_tool_calls(cid)
    assert record.status == "refused"


async def test_unreachable_when_no_surface_watches() -> None:
    h = harness(tool_step(("deploy", {"target": "prod"})), text_step("could not ask"))
    cid = await h.conversation()
    await h.runtime.run_turn(cid, "ship it")
    assert RUNS == []
    (audit,) = await h.store.list_approvals(cid)
    assert audit.ending is Ending.UNREACHABLE and audit.decided_by == "nobody"
    assert "no one was there to ask" in (await h.messages(cid))[2].tool_results[0].text


async def test_unanswered_after_the_deadline() -> None:
    h = harness(tool_step(("deploy", {"target": "prod"})), text_step("timed out"), timeout=0.05)
    cid, task, frame = await start(h)
    await task
    assert RUNS == []
    audit = await h.store.get_approval(frame.approval_id)
    assert audit is not None and audit.ending is Ending.UNANSWERED
    with pytest.raises(Conflict):  # too late
        await h.runtime.decide(cid, frame.approval_id, approve=True)


async def test_typing_instead_dismisses_the_approval_and_the_message_runs_next() -> None:
    h = harness(
        tool_step(("deploy", {"target": "prod"})),
        text_step("not deployed"),
        text_step("sure, the weather"),
    )
    cid, task, frame = await start(h)
    second = await h.runtime.submit(cid, "actually, what's the weather?")
    assert second.queued is not None  # stored at once
    await task
    result = await (await second.handle()).result()
    assert result.stop_reason == "end_turn" and RUNS == []
    audit = await h.store.get_approval(frame.approval_id)
    assert audit is not None and audit.ending is Ending.DISMISSED
    users = [m.text for m in await h.messages(cid) if m.role == "user"]
    assert users == ["ship it", "actually, what's the weather?"]


async def test_cancel_while_waiting_declines_and_releases_the_conversation() -> None:
    h = harness(tool_step(("deploy", {"target": "prod"})), text_step("next"))
    cid, task, frame = await start(h)
    outcome = await h.runtime.cancel(cid)
    assert outcome.cancelled_turn is not None
    with pytest.raises(asyncio.CancelledError):
        await task
    audit = await h.store.get_approval(frame.approval_id)
    assert audit is not None and audit.ending is Ending.DECLINED
    rows = await h.messages(cid)
    assert "interrupted" in rows[-1].tool_results[0].text
    assert (await h.store.get_conversation(cid)).state == "idle"  # type: ignore[union-attr]
    assert (await h.runtime.run_turn(cid, "hello")).stop_reason == "end_turn"


async def test_remembered_grants_exact_and_family_and_revoke() -> None:
    h = harness(
        tool_step(("deploy", {"target": "prod"})),
        text_step("one"),
        tool_step(("deploy", {"target": "prod"})),
        text_step("two"),
        tool_step(("deploy", {"target": "staging"})),
        text_step("three"),
    )
    cid, task, frame = await start(h)
    await h.runtime.decide(cid, frame.approval_id, approve=True, remember="exact")
    await task
    await h.runtime.run_turn(cid, "again")  # the exact grant approves it, nobody asked
    assert RUNS == ["prod", "prod"]
    audits = await h.store.list_approvals(cid)
    assert audits[-1].ending is Ending.APPROVED and audits[-1].decided_by.startswith("grant ")  # type: ignore[union-attr]
    watcher = h.bus.subscribe(cid)
    task = asyncio.ensure_future(h.runtime.run_turn(cid, "staging too"))  # other arguments: asks
    frame = await asyncio.wait_for(requested(watcher), 2)
    await h.runtime.decide(cid, frame.approval_id, approve=True, remember="family")
    await task
    grants = await h.runtime.list_grants(cid)
    assert sorted(g.scope for g in grants) == ["exact", "family"]
    for grant in grants:
        await h.runtime.revoke_grant(cid, grant.id)
    assert await h.runtime.list_grants(cid) == []


async def test_family_grant_needs_a_family() -> None:
    h = Harness(
        tool_step(("write_note", {"text": "x"})),
        text_step("ok"),
        tools=ToolRegistry(
            [function_tool(lambda text: text, name="write_note", description="d", risk="write")]
        ),
    )
    cid = await h.conversation()
    watcher = h.bus.subscribe(cid)
    task = asyncio.ensure_future(h.runtime.run_turn(cid, "note"))
    frame = await asyncio.wait_for(requested(watcher), 2)
    with pytest.raises(InvalidRequest, match="no family"):
        await h.runtime.decide(cid, frame.approval_id, approve=True, remember="family")
    await h.runtime.decide(cid, frame.approval_id, approve=True)
    await task
