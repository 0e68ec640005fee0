"""Sub-agents: delegate, spawn_agents (parallel, capped), timeline frames, records, cancel."""

from __future__ import annotations

import asyncio

from ostinato.agents import AgentConfig
from ostinato.frames import AgentToken
from ostinato.models.base import Stop, TextDelta
from ostinato.models.scripted import ScriptedModel, Step, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.skills import Router, Skill
from ostinato.store.memory import MemoryStore
from ostinato.subagents import MAX_PARALLEL, subagent_tools
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry

LEAD = Skill("lead", AgentConfig(system_prompt="You lead."), tier="lead")
HELPER = Skill(
    "helper",
    AgentConfig(system_prompt="You help."),
    tier="helper",
    description="does one small task",
)


def runtime(lead: ScriptedModel, helper: ScriptedModel, *extra: object) -> Runtime:
    tools = ToolRegistry([*builtin_tools(), *subagent_tools(), *extra])  # type: ignore[list-item]
    return Runtime(
        MemoryStore(),
        model=lead,
        tools=tools,
        router=Router([LEAD, HELPER], default=LEAD),
        models=lambda tier: lead if tier == "lead" else helper,
        seed_recall=False,
    )


async def test_delegate_returns_the_answer_and_streams_a_timeline() -> None:
    lead = ScriptedModel(
        [
            tool_step(("delegate", {"agent": "helper", "task": "add 2 and 2"})),
            text_step("The helper says 4."),
        ]
    )
    helper = ScriptedModel(
        [tool_step(("calculator", {"expression": "2+2"})), text_step("It is 4.", chunks=3)]
    )
    rt = runtime(lead, helper)
    conversation = await rt.create_conversation()
    watcher = rt.bus.subscribe(conversation.id)
    result = await rt.run_turn(conversation.id, "ask the helper")
    assert result.stop_reason == "end_turn"
    rows = await rt.store.list_messages(conversation.id)
    assert rows[2].tool_results[0].text == "It is 4."
    assert [m.role for m in rows] == ["user", "assistant", "tool", "assistant"]  # no sub rows
    assert helper.requests[0].system == "You help."
    assert "delegate" not in {t.name for t in helper.requests[0].tools}  # cannot spawn
    tokens = []
    while True:
        try:
            frame = await watcher.get(within=0.01)
        except TimeoutError:
            break
        if isinstance(frame, AgentToken):
            tokens.append(frame)
    assert "".join(t.text for t in tokens) == "It is 4." and tokens[0].agent == "helper"
    records = {r.id: r for r in await rt.store.list_tool_calls(conversation.id)}
    parent = rows[1].tool_uses[0].id
    nested = [r for r in records if r.startswith(parent + "/")]
    assert len(nested) == 1 and records[nested[0]].name == "calculator"
    assert records[nested[0]].status == "ok"


async def test_an_unknown_agent_is_an_error_result() -> None:
    lead = ScriptedModel(
        [tool_step(("delegate", {"agent": "ghost", "task": "x"})), text_step("no such agent")]
    )
    rt = runtime(lead, ScriptedModel())
    conversation = await rt.create_conversation()
    await rt.run_turn(conversation.id, "go")
    result = (await rt.store.list_messages(conversation.id))[2].tool_results[0]
    assert result.is_error and "lead, helper" in result.text


async def test_spawn_runs_at_most_eight_at_once() -> None:
    active = peak = 0

    async def work(n: int) -> int:
        """Counts concurrency."""
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.02)
        active -= 1
        return n

    tasks = [{"agent": "helper", "task": f"job {i}"} for i in range(12)]
    lead = ScriptedModel([tool_step(("spawn_agents", {"tasks": tasks})), text_step("all done")])
    steps = []
    for i in range(12):
        steps += [tool_step(("work", {"n": i})), text_step(f"done {i}")]
    helper = _Shared(steps)
    rt = runtime(lead, helper, function_tool(work))  # type: ignore[arg-type]
    conversation = await rt.create_conversation()
    await rt.run_turn(conversation.id, "fan out")
    answers = (await rt.store.list_messages(conversation.id))[2].tool_results[0].text
    assert answers.count('"answer"') == 12
    assert peak == MAX_PARALLEL


async def test_cancelling_the_parent_cancels_the_sub_agents() -> None:
    lead = ScriptedModel([tool_step(("delegate", {"agent": "helper", "task": "talk"}))])
    slow = Step((*tuple(TextDelta("word ") for _ in range(500)), Stop("end_turn")), delay=0.01)
    helper = ScriptedModel([slow])
    rt = runtime(lead, helper)
    conversation = await rt.create_conversation()
    handle = await rt.start_turn(conversation.id, "go")
    for _ in range(400):  # until the helper's model call has begun
        if helper.requests:
            break
        await asyncio.sleep(0.005)
    outcome = await rt.cancel(conversation.id)
    assert outcome.cancelled_turn == handle.turn.id
    rows = await rt.store.list_messages(conversation.id)
    assert "interrupted" in rows[-1].tool_results[0].text


class _Shared(ScriptedModel):
    """One script shared by parallel sub-agents: each call takes the next step whose tool
    input matches its task number, so concurrent agents get coherent scripts."""

    async def stream(self, request):  # type: ignore[no-untyped-def,override]
        task = request.messages[0].text  # "job N"
        n = int(task.split()[-1])
        done = any(m.role == "tool" for m in request.messages)
        step = text_step(f"done {n}") if done else tool_step(("work", {"n": n}))
        self.requests.append(request)
        for event in step.events:
            yield event
