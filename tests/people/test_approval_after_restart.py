"""An approval decided after a restart: the model sees the call answered once.

Found by the crash test (tests/e2e/test_fault_injection.py): the turn that runs the
approved call rebuilt its history with ``repair``, which gave the still-open call a
synthetic "no result" answer, and then the real result was added too, so the model's
request answered the call twice (a 400 from OpenAI's Chat Completions API).
"""

from __future__ import annotations

import asyncio

from ostinato.loop.history import MISSING_RESULT, repair
from ostinato.messages import Message, TextBlock, ToolUseBlock
from ostinato.models.scripted import text_step
from tests.loop.harness import Harness, assert_history_valid
from tests.people.test_recovery import RAN, crashed, registry


def test_repair_leaves_a_call_about_to_run_unanswered() -> None:
    history = [
        Message("user", (TextBlock("do it"),)),
        Message("assistant", (ToolUseBlock("a", "x", {}), ToolUseBlock("b", "y", {}))),
    ]
    repaired, _ = repair(history, running={"b"})
    assert [(r.tool_use_id, r.text) for r in repaired[-1].tool_results] == [("a", MISSING_RESULT)]
    assert repair(history, running={"a", "b"})[0] == history


async def test_the_approved_call_is_answered_once_in_the_models_request() -> None:
    h = Harness(text_step("sent it"), tools=registry())
    cid, _ = await crashed(h, approval=True)
    await h.runtime.recover()
    RAN.clear()
    await h.runtime.decide(cid, "ap1", approve=True)
    for _ in range(200):
        if (await h.store.get_conversation(cid)).state == "idle":  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.005)
    assert RAN == ["x@example.com"]
    (request,) = h.model.requests
    assert_history_valid(list(request.messages))
    answers = [r for m in request.messages for r in m.tool_results if r.tool_use_id == "b"]
    assert [a.text for a in answers] == ["sent to x@example.com"]
