"""A family grant for a program covers its ordinary calls, never a stretched one.

Through the loop, with the real ``shell`` tool and a real ``git``: once a person approves
``git`` and remembers the family, ``git status`` runs without asking, and each of the
reproductions of issue 10 item 4 asks again (and, declined, runs nothing).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from ostinato.approvals import ApprovalPolicy, Ending
from ostinato.bus import Subscription
from ostinato.frames import ApprovalRequested
from ostinato.models.scripted import ScriptedModel, Step, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.store.memory import MemoryStore
from ostinato.tools.registry import ToolRegistry
from ostinato.tools.system import workdir_tools
from tests.loop.harness import CheckingBus

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def shell(command: str) -> Step:
    return tool_step(("shell", {"command": command}))


async def requested(frames: Subscription) -> ApprovalRequested:
    async for frame in frames:
        if isinstance(frame, ApprovalRequested):
            return frame
    raise AssertionError("no approval.requested frame")


@pytest.mark.parametrize(
    "stretched",
    [
        "git -c alias.x='!touch {pwned}' x",
        "git -c core.pager='touch {pwned}' log",
        "git --exec-path={outside} status",
        "git status --output={pwned}",
    ],
)
async def test_a_git_family_grant_does_not_cover_a_stretched_call(
    tmp_path: Path, stretched: str
) -> None:
    pwned = tmp_path / "pwned"
    command = stretched.format(pwned=pwned, outside=tmp_path)
    store = MemoryStore()
    bus = CheckingBus(store)
    model = ScriptedModel(
        [
            shell("git init -q"),
            text_step("a repository"),
            shell("git status --short"),
            text_step("clean"),
            shell(command),
            text_step("it was not allowed"),
        ]
    )
    runtime = Runtime(
        store,
        model=model,
        tools=ToolRegistry(workdir_tools()),
        bus=bus,
        data_dir=tmp_path / "data",
        approvals=ApprovalPolicy(timeout=5.0),
    )
    cid = (await runtime.create_conversation()).id
    watcher = bus.subscribe(cid)
    turn = asyncio.ensure_future(runtime.run_turn(cid, "make a repository"))
    first = await asyncio.wait_for(requested(watcher), 5)
    assert first.family == "git"
    await runtime.decide(cid, first.approval_id, approve=True, remember="family")
    await turn

    # the grant covers an ordinary git call: it runs and nobody is asked
    result = await runtime.run_turn(cid, "status?")
    assert result.stop_reason == "end_turn"
    audit = (await store.list_approvals(cid))[-1]
    assert audit.ending is Ending.APPROVED and (audit.decided_by or "").startswith("grant ")

    # the stretched call asks again, with no family to remember, and declined runs nothing
    turn = asyncio.ensure_future(runtime.run_turn(cid, "now this"))
    frame = await asyncio.wait_for(requested(watcher), 5)
    assert frame.input == {"command": command} and frame.family is None
    await runtime.decide(cid, frame.approval_id, approve=False)
    assert (await turn).stop_reason == "end_turn"
    assert not pwned.exists()
    rows = await store.list_messages(cid)
    assert "declined" in rows[-2].tool_results[0].text
    model.assert_consumed()
    watcher.close()
