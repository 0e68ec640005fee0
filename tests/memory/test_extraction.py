"""After the turn: facts extracted from the exchange, written to memory only."""

from __future__ import annotations

from ostinato.errors import ProviderUnavailable
from ostinato.memory.extraction import FactExtractor, parse_facts
from ostinato.memory.facts import Memory
from ostinato.messages import Message, TextBlock
from ostinato.models.scripted import ScriptedModel, error_step, text_step
from ostinato.runtime import Runtime
from ostinato.store.memory import MemoryStore
from ostinato.tools.registry import ToolRegistry

FACTS = '[{"fact": "Ann prefers tea to coffee", "subject": "drinks"}, "Ann lives in Lyon"]'


def test_parse_facts_finds_the_array_in_prose_or_fences() -> None:
    assert parse_facts(f"Sure!\n```json\n{FACTS}\n```") == [
        ("Ann prefers tea to coffee", "drinks"),
        ("Ann lives in Lyon", None),
    ]
    assert parse_facts("nothing to keep") == []
    assert parse_facts("[not json") == []
    assert parse_facts('[{"subject": "x"}, 3, ""]') == []


async def test_a_finished_turn_feeds_memory_in_the_background_and_skips_known_facts() -> None:
    store = MemoryStore()
    memory = Memory(store)
    extractor_model = ScriptedModel([text_step(FACTS), text_step(FACTS)])
    runtime = Runtime(
        store,
        model=ScriptedModel([text_step("Noted, tea it is."), text_step("Lyon is lovely.")]),
        tools=ToolRegistry(),
        after_turn=FactExtractor(extractor_model, memory),
        seed_recall=False,
    )
    conversation = await runtime.create_conversation(owner="ann")
    await runtime.run_turn(conversation.id, "I'm Ann, I prefer tea, I live in Lyon")
    await runtime.settle()
    facts = await memory.list_facts("ann")
    assert sorted(f.text for f in facts) == ["Ann lives in Lyon", "Ann prefers tea to coffee"]
    assert "User: I'm Ann" in extractor_model.requests[0].messages[0].text
    await runtime.run_turn(conversation.id, "Tell me about Lyon")
    await runtime.settle()
    assert len(await memory.list_facts("ann")) == 2  # the same facts are not written twice
    rows = await store.list_messages(conversation.id)
    assert len(rows) == 4  # memory only: the conversation got no rows from it
    await runtime.close()


async def test_a_failed_extraction_is_quiet() -> None:
    store = MemoryStore()
    extractor = FactExtractor(
        ScriptedModel([error_step(ProviderUnavailable("down"))]), Memory(store)
    )
    runtime = Runtime(
        store,
        model=ScriptedModel([text_step("ok")]),
        tools=ToolRegistry(),
        after_turn=extractor,
        seed_recall=False,
    )
    conversation = await runtime.create_conversation()
    assert (await runtime.run_turn(conversation.id, "hello there")).stop_reason == "end_turn"
    await runtime.close()  # finishes (or cancels) the background work
    assert await Memory(store).list_facts(f"conversation:{conversation.id}") == []


async def test_without_the_answer_only_the_users_words_are_read() -> None:
    # After a turn that took in outside content the answer is not read: it may repeat it.
    store = MemoryStore()
    memory = Memory(store)
    model = ScriptedModel([text_step(FACTS)])
    extractor = FactExtractor(model, memory)
    user = Message("user", (TextBlock("I'm Ann, I prefer tea"),))
    written = await extractor(conversation_id="c", owner="ann", turn_id="t", user=user, answer=None)
    assert written == 2
    assert model.requests[0].messages[0].text == "User: I'm Ann, I prefer tea"
