"""Every call is charged to the owner who caused it (``spend.gate``): the router's
classifier, a compaction summary, a sub-agent's calls, work after the turn and an
owner's memory jobs, each under the agent it ran for; a side call past a hard limit is
refused as a failed call, and its caller goes on without it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ostinato.agents import AgentConfig
from ostinato.background.jobs import JobRunner
from ostinato.background.registry import default_jobs
from ostinato.config.background import EpisodesSection, JobSection, JobsSection, LapseSection
from ostinato.context.catalog import ContextCatalog
from ostinato.context.compaction import Compactor
from ostinato.errors import SpendLimitReached
from ostinato.messages import Message, TextBlock
from ostinato.models.assembly import complete
from ostinato.models.base import ModelRequest, Usage
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.skills import Router, Skill
from ostinato.spend.gate import SpendGate
from ostinato.spend.limits import Budgets
from ostinato.spend.rule import Limit
from ostinato.spend.seam import GATE
from ostinato.store.base import utcnow
from ostinato.store.memory import MemoryStore
from ostinato.subagents import subagent_tools
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.registry import ToolRegistry

LEAD = Skill("lead", AgentConfig(name="lead", system_prompt="You lead."), tier="lead")
HELPER = Skill("helper", AgentConfig(name="helper", system_prompt="You help."), tier="helper")


def today() -> str:
    return utcnow().date().isoformat()


async def test_every_call_a_turn_causes_is_charged_to_its_owner() -> None:
    m = {
        "lead": ScriptedModel(name="test:lead"),
        "helper": ScriptedModel([text_step("It is 4.", usage=Usage(7, 3))], name="test:helper"),
        "router": ScriptedModel(name="test:router"),
        "summary": ScriptedModel([text_step("Hello.", usage=Usage(50, 5))], name="test:sum"),
        "extract": ScriptedModel(name="test:extract"),
    }

    async def extract(**kw: Any) -> None:  # stands in for the fact extraction
        request = ModelRequest(system="x", messages=(Message("user", (TextBlock("y"),)),))
        await complete(m["extract"], request, deadline=5.0, what="extraction")

    store = MemoryStore()
    rt = Runtime(
        store,
        model=m["lead"],
        tools=ToolRegistry([*builtin_tools(), *subagent_tools()]),
        router=Router([LEAD, HELPER], default=LEAD, classifier=m["router"]),
        models=lambda tier: m["lead"] if tier == "lead" else m["helper"],
        seed_recall=False,
        after_turn=extract,
        spend=SpendGate(store, Budgets()),
    )
    cid = (await rt.create_conversation(owner="ann")).id
    for i in range(2):  # earlier turns, for compaction to summarise
        m["router"].add(text_step("lead", usage=Usage(1, 1)))
        m["lead"].add(text_step(f"reply {i}", usage=Usage(1, 1)))
        m["extract"].add(text_step("[]", usage=Usage(1, 1)))
        await rt.run_turn(cid, f"message {i} " + "words " * 300)
    await rt.settle()
    rt.compactor = Compactor(m["summary"], catalog=ContextCatalog({"test:lead": 1_714}))
    m["router"].add(text_step("lead", usage=Usage(20, 1)))
    m["extract"].add(text_step("[]", usage=Usage(9, 1)))
    m["lead"].add(
        tool_step(("delegate", {"agent": "helper", "task": "add 2 and 2"}), usage=Usage(100, 10)),
        text_step("The helper says 4.", usage=Usage(120, 8)),
    )
    assert (await rt.run_turn(cid, "ask the helper")).stop_reason == "end_turn"
    await rt.settle()
    rows = await store.usage_rows("ann", today(), today())
    calls = {(r.model, r.agent): (r.calls, r.tokens_in, r.tokens_out) for r in rows}
    assert calls == {
        ("test:router", ""): (3, 22, 3),  # routing happens before an agent is chosen
        ("test:lead", "lead"): (4, 222, 20),
        ("test:sum", "lead"): (1, 50, 5),  # the summary is made inside lead's turn
        ("test:helper", "helper"): (1, 7, 3),  # the sub-agent's own calls
        ("test:extract", "lead"): (3, 11, 3),  # work after the turn, for lead's turn
    }
    assert await store.usage_rows("", today(), today()) == []  # nothing left unowned
    for model in m.values():
        model.assert_consumed()


async def test_a_memory_job_is_charged_to_the_owner_it_ran_for() -> None:
    store = MemoryStore()
    gate = SpendGate(store, Budgets())
    rt = Runtime(store, model=ScriptedModel([text_step("Noted.")]), spend=gate)
    cid = (await rt.create_conversation(owner="ann")).id
    await rt.run_turn(cid, "I must call the bank on Friday")
    settings = JobsSection(
        consolidate=JobSection(enabled=False),
        lapse=LapseSection(enabled=False),
        episodes=EpisodesSection(calls_per_day=3),
    )
    later = utcnow() + timedelta(minutes=16)
    model = ScriptedModel([text_step("Ann planned to call the bank.")], name="test:jobs")
    runner = JobRunner(
        store, default_jobs(settings), settings, model=model, clock=lambda: later, spend=gate
    )
    (run,) = await runner.tick()
    assert run.model_calls == 1
    rows = await store.usage_rows("ann", today(), later.date().isoformat())
    assert {(r.model, r.agent, r.calls) for r in rows} >= {("test:jobs", "", 1)}
    await rt.close()


async def test_a_side_call_past_a_hard_limit_is_refused_as_a_failed_call() -> None:
    store = MemoryStore()
    gate = SpendGate(store, Budgets(default=Limit(hard=0.0)))
    model = ScriptedModel([], name="anthropic:claude-haiku-4-5")  # a priced model
    request = ModelRequest(system="x", messages=(Message("user", (TextBlock("y"),)),))
    token = GATE.set(gate)
    try:
        try:
            await complete(model, request, deadline=5.0, what="router")
        except SpendLimitReached as exc:
            assert exc.code == "spend_limit" and "It resets at" in exc.message
        else:
            raise AssertionError("the call was made")
    finally:
        GATE.reset(token)
    assert not model.requests
