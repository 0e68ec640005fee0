"""A turn that causes every kind of observed work: a router call, a compaction summary,
a tool call running a sub-agent (its own model call), and fact extraction after the turn
(background work). Shared by the traces and metrics tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ostinato.agents import AgentConfig
from ostinato.context.catalog import ContextCatalog
from ostinato.context.compaction import Compactor
from ostinato.loop.driver import TurnResult
from ostinato.messages import Message, TextBlock
from ostinato.models.assembly import complete
from ostinato.models.base import ModelRequest, Usage
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.skills import Router, Skill
from ostinato.store.memory import MemoryStore
from ostinato.subagents import subagent_tools
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.registry import ToolRegistry

LEAD = Skill("lead", AgentConfig(name="lead", system_prompt="You lead."), tier="lead")
HELPER = Skill(
    "helper",
    AgentConfig(name="helper", system_prompt="You help."),
    tier="helper",
    description="does one small task",
)


@dataclass
class Ran:
    runtime: Runtime
    conversation_id: str
    result: TurnResult


async def run_scenario() -> Ran:
    """Two plain turns, then the observed one (``Ran.result``); settled."""
    lead = ScriptedModel(name="test:lead")
    helper = ScriptedModel([text_step("It is 4.", usage=Usage(7, 3))], name="test:helper")
    router = ScriptedModel(name="test:router")
    summary = ScriptedModel([text_step("They said hello.", usage=Usage(50, 5))], name="test:sum")
    extractor = ScriptedModel(name="test:extract")

    async def extract(**kw: Any) -> None:
        request = ModelRequest(system="x", messages=(Message("user", (TextBlock("y"),)),))
        await complete(extractor, request, deadline=5.0, what="extraction")

    rt = Runtime(
        MemoryStore(),
        model=lead,
        tools=ToolRegistry([*builtin_tools(), *subagent_tools()]),
        router=Router([LEAD, HELPER], default=LEAD, classifier=router),
        models=lambda tier: lead if tier == "lead" else helper,
        seed_recall=False,
        after_turn=extract,
    )
    cid = (await rt.create_conversation()).id
    for i in range(2):  # earlier turns, for compaction to summarise
        router.add(text_step("lead", usage=Usage(1, 1)))
        lead.add(text_step(f"reply {i}", usage=Usage(1, 1)))
        extractor.add(text_step("[]", usage=Usage(1, 1)))
        await rt.run_turn(cid, f"message {i} " + "words " * 300)
    await rt.settle()
    rt.compactor = Compactor(summary, catalog=ContextCatalog({"test:lead": 1_714}))
    router.add(text_step("lead", usage=Usage(20, 1)))
    lead.add(
        tool_step(("delegate", {"agent": "helper", "task": "add 2 and 2"}), usage=Usage(100, 10)),
        text_step("The helper says 4.", usage=Usage(120, 8)),
    )
    extractor.add(text_step("[]", usage=Usage(9, 1)))
    result = await rt.run_turn(cid, "ask the helper")
    await rt.settle()
    return Ran(rt, cid, result)
