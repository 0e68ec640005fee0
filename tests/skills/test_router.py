"""The router: slash command, sticky persona, classifier, default; recorded on the turn."""

from __future__ import annotations

from ostinato.agents import AgentConfig
from ostinato.errors import ProviderUnavailable
from ostinato.frames import TurnStarted
from ostinato.models.scripted import ScriptedModel, error_step, text_step
from ostinato.runtime import Runtime
from ostinato.skills import Router, Skill
from ostinato.store.memory import MemoryStore
from ostinato.tools.builtins import default_registry

WRITER = Skill(
    "writer",
    AgentConfig(system_prompt="You write."),
    persona="Quill",
    tier="forte",
    description="drafts and edits prose",
)
COUNTER = Skill(
    "counter",
    AgentConfig(system_prompt="You count."),
    persona="Abacus",
    tier="minuet",
    description="arithmetic and numbers",
)
EDITOR = Skill(
    "editor", AgentConfig(system_prompt="You edit."), persona="Quill", description="fixes grammar"
)


async def test_slash_command_names_a_skill_or_persona() -> None:
    classifier = ScriptedModel([text_step("writer")])
    router = Router([WRITER, COUNTER], classifier=classifier)
    assert (await router.route("/counter 2+2")).skill is COUNTER
    route = await router.route("/abacus how many?")
    assert route.skill is COUNTER and route.reason == "slash"
    not_a_skill = await router.route("/tool calculator {}")
    assert not_a_skill.reason == "classifier"  # /tool names no skill: the classifier picks
    classifier.assert_consumed()


async def test_classifier_picks_by_description_and_falls_back_on_failure() -> None:
    classifier = ScriptedModel(
        [text_step("counter"), text_step("no idea"), error_step(ProviderUnavailable("down"))]
    )
    router = Router([WRITER, COUNTER], classifier=classifier)
    route = await router.route("what is 17*3?")
    assert route.skill is COUNTER and route.reason == "classifier"
    assert "counter: arithmetic and numbers" in classifier.requests[0].system
    assert classifier.requests[0].tool_choice == "none"
    unclear = await router.route("hmm")
    assert unclear.skill is WRITER and unclear.reason == "default"
    failed = await router.route("hmm")
    assert failed.skill is WRITER and "classifier_error" in failed.record


async def test_sticky_persona_is_preferred() -> None:
    classifier = ScriptedModel([text_step("editor")])
    router = Router([WRITER, COUNTER, EDITOR], classifier=classifier)
    assert (await router.route("more", sticky_persona="Abacus")).skill is COUNTER
    route = await router.route("fix this", sticky_persona="Quill")  # two skills: classify
    assert route.skill is EDITOR and route.reason == "sticky"
    assert "counter" not in classifier.requests[0].system  # only the persona's skills


async def test_the_route_is_recorded_on_the_turn_and_sticks() -> None:
    models = {
        "forte": ScriptedModel([text_step("drafted")]),
        "minuet": ScriptedModel([text_step("4"), text_step("5")]),
    }
    runtime = Runtime(
        MemoryStore(),
        model=ScriptedModel(),
        tools=default_registry(workdir=False),
        router=Router([WRITER, COUNTER], classifier=ScriptedModel([text_step("writer")])),
        models=lambda tier: models[tier],
        seed_recall=False,
    )
    conversation = await runtime.create_conversation()
    frames = [f async for f in runtime.stream_turn(conversation.id, "/counter 2+2")]
    started = frames[0]
    assert isinstance(started, TurnStarted)
    assert (started.skill, started.persona, started.tier) == ("counter", "Abacus", "minuet")
    assert models["minuet"].requests[0].system == "You count."
    rows = await runtime.store.list_messages(conversation.id)
    assert rows[0].metadata["route"]["reason"] == "slash"
    (turn,) = await runtime.store.list_turns(conversation.id)
    assert turn.metrics["route"]["skill"] == "counter"
    # the next message sticks with the persona, no classifier call needed
    result = await runtime.run_turn(conversation.id, "and 2+3?")
    assert result.metrics["route"] == {
        "skill": "counter",
        "persona": "Abacus",
        "tier": "minuet",
        "reason": "sticky",
    }
