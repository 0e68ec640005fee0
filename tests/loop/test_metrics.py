"""A turn's metrics block and timeline: every model call the turn caused is counted (the
router's classifier, a compaction summary, a sub-agent's calls, fact extraction after the
turn), broken down by model and purpose with an estimated cost; token counts say who
counted them, and a call whose provider sent no counts is estimated, never counted as
zero."""

from __future__ import annotations

from typing import Any

import pytest

from ostinato import observe
from ostinato.agents import AgentConfig
from ostinato.context.catalog import ContextCatalog
from ostinato.context.compaction import Compactor
from ostinato.messages import Message, TextBlock
from ostinato.models.assembly import complete
from ostinato.models.base import ModelRequest, Stop, TextDelta, Usage
from ostinato.models.scripted import ScriptedModel, Step, text_step, tool_step
from ostinato.observe import prices
from ostinato.observe.ledger import TurnLedger
from ostinato.runtime import Runtime
from ostinato.skills import Router, Skill
from ostinato.store.memory import MemoryStore
from ostinato.subagents import subagent_tools
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.registry import ToolRegistry
from tests.loop.harness import Harness

NO_USAGE = Step((TextDelta("Paris is the capital of France."), Stop("end_turn")))


async def test_a_call_without_usage_is_estimated_and_said_to_be() -> None:
    h = Harness(NO_USAGE)
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "What is the capital of France?")
    assert result.stop_reason == "end_turn"
    assert result.metrics["tokens_source"] == "estimate"
    assert result.metrics["tokens_in"] > 0 and result.metrics["tokens_out"] > 0
    rows = await h.messages(cid)
    assert rows[-1].metadata["metrics"]["tokens_source"] == "estimate"  # the stored block


async def test_counts_from_the_provider_say_so_and_name_the_model() -> None:
    h = Harness(text_step("Hi.", usage=Usage(12, 4)))
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "hi")
    metrics = result.metrics
    assert metrics["tokens_source"] == "provider"
    assert (metrics["tokens_in"], metrics["tokens_out"]) == (12, 4)
    assert metrics["model"] == "scripted:model"
    assert metrics["models"]["scripted:model"]["calls"] == 1
    assert metrics["cost_usd"] is None and metrics["unpriced"] == ["scripted:model"]
    rows = await h.messages(cid)
    [turn] = await h.store.list_turns(cid)
    # one block, made once: the final message, the record and the result carry the same
    assert rows[-1].metadata["metrics"] == turn.metrics == metrics


def call(model: str, usage: Usage | None, purpose: str = "step") -> observe.CallScope:
    scope = observe.CallScope(model, ModelRequest(system="", messages=()), purpose)
    scope.usage = usage
    return scope


def test_the_source_of_a_turn_with_several_calls() -> None:
    ledger = TurnLedger(0.0)
    assert ledger.snapshot()["tokens_source"] == "none"
    ledger.add(call("a:b", Usage(10, 2)), None, None)
    assert ledger.snapshot()["tokens_source"] == "provider"
    ledger.add(call("a:b", Usage(30, 5, source="estimate")), None, None)
    assert ledger.snapshot()["tokens_source"] == "mixed"
    only_estimates = TurnLedger(0.0)
    only_estimates.add(call("a:b", Usage(30, 5, source="estimate")), None, None)
    only_estimates.add(call("a:b", Usage(0, 0, source="unknown"), "summary"), None, None)
    assert only_estimates.snapshot()["tokens_source"] == "estimate"


@pytest.fixture
def priced() -> Any:
    prices.configure({"test:cheap": prices.Price(1.0, 2.0, cache_read=0.5)})
    yield
    prices.configure({})


@pytest.mark.usefixtures("priced")
def test_cost_is_estimated_per_model_and_never_guessed() -> None:
    ledger = TurnLedger(0.0)
    # 1M input of which 200k cached reads (inside the input, as OpenAI counts), 500k out
    ledger.add(call("test:cheap", Usage(1_000_000, 500_000, cache_read_tokens=200_000)), None, None)
    block = ledger.snapshot("test:cheap")
    assert block["models"]["test:cheap"]["cost_usd"] == pytest.approx(0.8 + 0.1 + 1.0)
    assert block["cost_usd"] == pytest.approx(1.9) and block["unpriced"] == []
    ledger.add(call("test:unknown", Usage(10, 10), "router"), None, None)
    block = ledger.snapshot("test:cheap")
    assert block["cost_usd"] is None and block["unpriced"] == ["test:unknown"]
    assert block["models"]["test:unknown"]["cost_usd"] is None
    assert block["models"]["test:cheap"]["cost_usd"] == pytest.approx(1.9)  # still said


def test_anthropic_counts_cached_tokens_apart_from_the_input() -> None:
    usage = Usage(1_000_000, 0, cache_read_tokens=1_000_000, cache_write_tokens=1_000_000)
    # sonnet 4.5: $3 input, $0.30 cache read, $3.75 cache write per million
    assert prices.cost("anthropic:claude-sonnet-4-5", usage) == pytest.approx(3 + 0.30 + 3.75)
    assert prices.cost("openai:gpt-4.1", Usage(1_000_000, 0, cache_read_tokens=500_000)) == (
        pytest.approx(0.5 * 2.0 + 0.5 * 0.5)
    )


# --- every call a turn causes --------------------------------------------------------

LEAD = Skill("lead", AgentConfig(name="lead", system_prompt="You lead."), tier="lead")
HELPER = Skill(
    "helper",
    AgentConfig(name="helper", system_prompt="You help."),
    tier="helper",
    description="does one small task",
)


def models(**named: ScriptedModel) -> dict[str, ScriptedModel]:
    return named


@pytest.mark.parametrize("timelines", [True, False], ids=["timelines", "no-timelines"])
async def test_a_turn_counts_its_router_summary_subagent_and_extraction_calls(
    timelines: bool,
) -> None:
    """With timelines off and nothing installed, the sub-agent's turn nests in the turn
    itself rather than in the tool call: its calls are counted all the same."""
    previous = observe.keep_timelines(timelines)
    try:
        await _counts_every_call(timelines)
    finally:
        observe.keep_timelines(previous)


async def _counts_every_call(timelines: bool) -> None:
    m = models(
        lead=ScriptedModel(name="test:lead"),
        helper=ScriptedModel([text_step("It is 4.", usage=Usage(7, 3))], name="test:helper"),
        router=ScriptedModel(name="test:router"),
        summary=ScriptedModel([text_step("They said hello.", usage=Usage(50, 5))], name="test:sum"),
        extract=ScriptedModel([text_step("[]", usage=Usage(9, 1))], name="test:extract"),
    )

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
    )
    cid = (await rt.create_conversation()).id
    for i in range(2):  # earlier turns, for compaction to summarise
        m["router"].add(text_step("lead", usage=Usage(1, 1)))
        m["lead"].add(text_step(f"reply {i}", usage=Usage(1, 1)))
        m["extract"].add(text_step("[]", usage=Usage(1, 1)))
        await rt.run_turn(cid, f"message {i} " + "words " * 300)
    await rt.settle()
    rt.compactor = Compactor(m["summary"], catalog=ContextCatalog({"test:lead": 1_714}))
    m["router"].add(text_step("lead", usage=Usage(20, 1)))
    m["lead"].add(
        tool_step(("delegate", {"agent": "helper", "task": "add 2 and 2"}), usage=Usage(100, 10)),
        text_step("The helper says 4.", usage=Usage(120, 8)),
    )
    result = await rt.run_turn(cid, "ask the helper")
    assert result.stop_reason == "end_turn"
    metrics = result.metrics
    assert metrics["model_calls"] == 5
    assert metrics["model_calls_by_purpose"] == {"router": 1, "summary": 1, "step": 3}
    assert metrics["model"] == "test:lead"
    assert {k: v["calls"] for k, v in metrics["models"].items()} == {
        "test:router": 1,
        "test:sum": 1,
        "test:lead": 2,
        "test:helper": 1,
    }
    assert (metrics["tokens_in"], metrics["tokens_out"]) == (
        20 + 50 + 100 + 7 + 120,
        1 + 5 + 10 + 3 + 8,
    )
    assert metrics["tools"] == {"delegate": 1}  # the turn's own calls
    assert metrics["route"]["skill"] == "lead"

    await rt.settle()  # the extraction after the turn is added to its record
    stored = next(t for t in await store.list_turns(cid) if t.id == result.turn_id)
    assert stored.metrics["model_calls"] == 6
    assert stored.metrics["model_calls_by_purpose"]["extraction"] == 1
    assert stored.metrics["route"]["skill"] == "lead"
    for model in m.values():
        model.assert_consumed()
    timeline = stored.timeline
    if not timelines:
        assert timeline is None
        return
    assert timeline is not None
    steps = timeline["steps"]
    assert [s["index"] for s in steps] == [0, 1, 2]
    assert [c["purpose"] for c in steps[0]["model_calls"]] == ["router"]
    first = steps[1]
    assert [(c["purpose"], c["model"]) for c in first["model_calls"]] == [
        ("summary", "test:sum"),
        ("step", "test:lead"),
        ("step", "test:helper"),
    ]
    delegate = first["tool_calls"][0]
    assert delegate["name"] == "delegate" and delegate["status"] == "ok"
    helper_call = first["model_calls"][2]
    assert helper_call["agent"] == "helper" and helper_call["under"] == delegate["id"]
    assert helper_call["start_s"] >= delegate["start_s"]
    assert [c["model"] for c in steps[2]["model_calls"]] == ["test:lead"]
    assert [c["purpose"] for c in timeline["after_turn"]] == ["extraction"]
    for step in steps:
        assert step["duration_s"] is not None and step["duration_s"] >= 0


async def test_work_after_a_turn_keeps_its_route_without_reading_the_turn_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lead = ScriptedModel([text_step("hello", usage=Usage(1, 1))], name="test:lead")
    extract = ScriptedModel([text_step("[]", usage=Usage(9, 1))], name="test:extract")
    router = ScriptedModel([text_step("lead", usage=Usage(1, 1))], name="test:router")

    async def after(**kw: Any) -> None:
        request = ModelRequest(system="x", messages=(Message("user", (TextBlock("y"),)),))
        await complete(extract, request, deadline=5.0, what="extraction")

    store = MemoryStore()
    rt = Runtime(
        store,
        model=lead,
        router=Router([LEAD, HELPER], default=LEAD, classifier=router),
        seed_recall=False,
        after_turn=after,
    )
    cid = (await rt.create_conversation()).id

    async def unread(turn_id: str) -> None:
        raise AssertionError("the turn was read back")

    monkeypatch.setattr(store, "get_turn", unread)
    result = await rt.run_turn(cid, "hi")
    await rt.settle()
    (stored,) = await store.list_turns(cid)
    assert stored.id == result.turn_id
    assert stored.metrics["model_calls_by_purpose"]["extraction"] == 1
    assert stored.metrics["route"] == result.metrics["route"]
    assert stored.metrics["route"]["skill"] == "lead"
