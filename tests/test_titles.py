"""Conversation titles: made once after the first answer, by a model when one is set and
by the first words otherwise; a title the person gave is never replaced."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from ostinato.config import load_config
from ostinato.config.settings import ConfigError
from ostinato.messages import user_text
from ostinato.models.scripted import ScriptedModel, error_step, text_step
from ostinato.runtime import Runtime
from ostinato.store import MemoryStore
from ostinato.store.accounts import UpdateConversation
from ostinato.store.base import Conversation, Store
from ostinato.titles import AfterTurns, Titler, cleaned, first_words


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    yield MemoryStore()


async def run(
    store: Store, titler: Titler, *turns: str, title: str | None = None
) -> tuple[Runtime, str]:
    answers = ScriptedModel([text_step(f"answer {i}") for i in range(len(turns))])
    runtime = Runtime(store, model=answers, after_turn=titler, seed_recall=False)
    conversation = await runtime.create_conversation(owner="ann", title=title)
    for text in turns:
        await runtime.run_turn(conversation.id, text)
        await runtime.settle(5)
    await runtime.close()
    return runtime, conversation.id


async def title_of(store: Store, cid: str) -> str | None:
    conversation = await store.get_conversation(cid)
    assert conversation is not None
    return conversation.title


async def test_without_a_model_the_first_words_name_an_untitled_conversation(
    store: Store,
) -> None:
    _, cid = await run(store, Titler(store), "Plan a three day walk along the coast of Portugal")
    assert await title_of(store, cid) == "Plan a three day walk along the coast"


async def test_a_model_titles_it_once_and_a_client_named_first_line_counts_as_unnamed(
    store: Store,
) -> None:
    model = ScriptedModel([text_step('Title: "Coastal walk in Portugal."')])
    titler = Titler(store, lambda conversation: model)
    first = "Plan a walk along the coast\nthree days, easy"
    _, cid = await run(
        store, titler, first, "and a fourth day?", title="Plan a walk along the coast"
    )
    assert await title_of(store, cid) == "Coastal walk in Portugal"
    model.assert_consumed()  # one title call: the second turn found it titled
    asked = model.requests[0]
    assert "Plan a walk along the coast" in asked.messages[0].text
    assert "answer 0" in asked.messages[0].text and asked.tool_choice == "none"


async def test_a_title_the_person_gave_is_kept(store: Store) -> None:
    model = ScriptedModel([])
    titler = Titler(store, lambda conversation: model)
    _, cid = await run(store, titler, "hello there", title="My own name")
    assert await title_of(store, cid) == "My own name"
    assert model.requests == []


async def test_a_failing_model_leaves_the_first_words(store: Store) -> None:
    from ostinato.errors import ModelError

    model = ScriptedModel([error_step(ModelError("provider down"))])
    _, cid = await run(store, Titler(store, lambda c: model), "tell me about tides")
    assert await title_of(store, cid) == "tell me about tides"


async def test_the_offline_model_is_not_asked_for_a_title(store: Store) -> None:
    from ostinato.models.offline import OfflineModel

    asked: list[object] = []

    class Watched(OfflineModel):  # the offline model, counting what it is sent
        async def stream(self, request: Any) -> Any:
            asked.append(request)
            async for event in super().stream(request):
                yield event

    _, cid = await run(store, Titler(store, lambda c: Watched()), "/say hello stranger")
    assert await title_of(store, cid) == "/say hello stranger"  # not its echo of the prompt
    assert asked == []
    _, named = await run(store, Titler(store, lambda c: Watched()), "hi", title="hi")
    assert await title_of(store, named) == "hi"  # the page's first line stays


async def test_a_rename_while_the_title_is_made_wins(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    titler = Titler(store, lambda c: ScriptedModel([]))

    async def asked(conversation: Any, user: Any, answer: Any) -> str:
        await store.write(UpdateConversation(conversation.id, title="Renamed by hand"))
        return "Made by the model"

    monkeypatch.setattr(titler, "_asked", asked)
    _, cid = await run(store, titler, "some question")
    assert await title_of(store, cid) == "Renamed by hand"


async def test_the_title_is_made_against_the_row_the_turn_began_with_not_read_again(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    given: list[Conversation | None] = []

    class Seen(Titler):
        async def __call__(self, **kw: Any) -> str | None:
            given.append(kw.get("conversation"))
            return await super().__call__(**kw)

    reads: list[str] = []
    read = store.get_conversation

    async def counted(conversation_id: str) -> Conversation | None:
        reads.append(conversation_id)
        return await read(conversation_id)

    runtime = Runtime(store, model=ScriptedModel([text_step("an answer")]), seed_recall=False)
    runtime.after_turn = Seen(store)
    made = await runtime.create_conversation(owner="ann")
    await runtime.start_turn(made.id, "Plan a walk along the coast")
    monkeypatch.setattr(store, "get_conversation", counted)  # from the turn's start on
    await runtime.settle(5)
    await runtime.close()
    assert [c.id if c else None for c in given] == [made.id] and reads == []
    assert await title_of(store, made.id) == "Plan a walk along the coast"


async def test_a_rename_after_the_turn_began_still_wins(store: Store) -> None:
    runtime = Runtime(store, model=ScriptedModel([]), seed_recall=False)
    made = await runtime.create_conversation(owner="ann")
    began = await store.get_conversation(made.id)  # the row as the turn read it
    await store.write(UpdateConversation(made.id, title="Mine"))
    titled = await Titler(store)(
        conversation_id=made.id,
        owner="ann",
        turn_id="t",
        user=user_text("Plan a walk"),
        answer=None,
        conversation=began,
    )
    assert titled is None and await title_of(store, made.id) == "Mine"
    await runtime.close()


async def test_after_turns_run_each_work_even_after_one_fails() -> None:
    seen: list[str] = []

    async def broken(**kw: Any) -> None:
        raise RuntimeError("boom")

    async def kept(**kw: Any) -> str:
        seen.append(kw["conversation_id"])
        return "done"

    works = AfterTurns([broken, kept])
    assert await works(conversation_id="c1") == [None, "done"]
    assert seen == ["c1"]


def test_a_models_answer_made_a_title() -> None:
    assert cleaned('  "Trip to Lisbon."  \nsecond line') == "Trip to Lisbon"
    assert cleaned("Title: **Budget review**") == "Budget review"
    assert cleaned("\u201cSmart quotes\u201d") == "Smart quotes"
    assert cleaned("   \n  ") is None
    assert cleaned("x" * 200) == "x" * 79 + "…"
    assert first_words("\n\n  one two\nthree") == "one two"
    assert first_words("   ") is None


def test_the_titles_setting_names_a_known_model(tmp_path: Any) -> None:
    good = tmp_path / "good.toml"
    good.write_text('[data]\ntitles = "minuet"\n')
    assert load_config(good, env={})[0].data.titles == "minuet"
    bad = tmp_path / "bad.toml"
    bad.write_text('[data]\ntitles = "tiny"\n')
    with pytest.raises(ConfigError, match=r"data\.titles: unknown tier 'tiny'"):
        load_config(bad, env={})


async def test_the_titlers_write_is_marked_as_the_servers_own() -> None:
    """It answers no client, so SQLite does not wait for an fsync for it
    (``UpdateConversation.made``; tests/store/test_sqlite_durable.py)."""
    ops: list[Any] = []

    class Watched(MemoryStore):
        async def write(self, *written: Any) -> list[Any]:
            ops.extend(written)
            return await super().write(*written)

    store = Watched()
    model = ScriptedModel([text_step("Coastal walk")])
    _, cid = await run(store, Titler(store, lambda conversation: model), "Plan a walk")
    assert await title_of(store, cid) == "Coastal walk"
    (titled,) = [op for op in ops if isinstance(op, UpdateConversation)]
    assert titled.made and titled.title == "Coastal walk"
