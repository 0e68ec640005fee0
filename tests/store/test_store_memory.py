"""Long-term memory facts on every engine: bitemporal history, supersede, capacity,
conflicts, ranked full-text search that no query text can break, scope isolation."""

from __future__ import annotations

import asyncio

import pytest

from ostinato.errors import Conflict, InvalidRequest, NotFound
from ostinato.store import MemoryStore, Store
from ostinato.store.base import (
    MEMORY_TEXT_LIMIT,
    ForgetFact,
    MemoryFact,
    MemoryFull,
    RememberFact,
)
from ostinato.store.sql.sqlite import SQLiteStore


async def remember(store: Store, scope: str, text: str, **kw: object) -> MemoryFact:
    (fact,) = await store.write(RememberFact(scope, text, **kw))  # type: ignore[arg-type]
    assert isinstance(fact, MemoryFact)
    return fact


FILLER = [
    "The office is in Lisbon",
    "Ann's cat is called Miso",
    "The project deadline is in March",
    "Ann runs on Sunday mornings",
]


async def test_a_fact_is_stored_and_read_back(store: Store) -> None:
    fact = await remember(
        store, "ann", "  Ann prefers green tea  ", subject="  Drinks  Ann ", conversation_id="c1"
    )
    assert fact.text == "Ann prefers green tea"
    assert fact.subject == "drinks ann"
    assert fact.current and fact.valid_to is None and fact.valid_from == fact.recorded_at
    assert fact.conversation_id == "c1"
    assert await store.get_memory(fact.id) == fact
    assert await store.list_memories("ann") == [fact]
    assert await store.get_memory("nope") is None


async def test_text_must_be_present_and_short_enough(store: Store) -> None:
    with pytest.raises(InvalidRequest, match="needs some text"):
        await remember(store, "ann", "   ")
    with pytest.raises(InvalidRequest, match="at most 2,000 characters"):
        await remember(store, "ann", "x" * (MEMORY_TEXT_LIMIT + 1))
    assert len((await remember(store, "ann", "y" * MEMORY_TEXT_LIMIT)).text) == MEMORY_TEXT_LIMIT
    assert len(await store.list_memories("ann", include_closed=True)) == 1


async def test_forget_closes_a_fact_and_keeps_it_as_history(store: Store) -> None:
    kept = await remember(store, "ann", "Ann likes jazz")
    gone = await remember(store, "ann", "Ann likes techno")
    (closed,) = await store.write(ForgetFact("ann", gone.id))
    assert closed.id == gone.id and closed.valid_to is not None and not closed.current
    assert closed.valid_to >= gone.valid_from
    assert await store.get_memory(gone.id) == closed
    assert await store.list_memories("ann") == [kept]
    assert await store.list_memories("ann", include_closed=True) == [closed, kept]
    assert [h.fact.id for h in await store.search_memories("ann", "likes")] == [kept.id]
    # forgetting again returns the closed fact unchanged
    assert await store.write(ForgetFact("ann", gone.id)) == [closed]


async def test_forget_refuses_unknown_facts_and_other_scopes(store: Store) -> None:
    fact = await remember(store, "ann", "Ann likes jazz")
    with pytest.raises(NotFound, match="no memory"):
        await store.write(ForgetFact("ann", "missing"))
    with pytest.raises(NotFound, match="no memory"):
        await store.write(ForgetFact("bob", fact.id))
    assert (await store.get_memory(fact.id)) == fact


async def test_supersede_closes_and_links_in_one_write(store: Store) -> None:
    old = await remember(store, "ann", "Ann lives in Porto", subject="home")
    new = await remember(store, "ann", "Ann lives in Lisbon", subject="home", supersedes=old.id)
    closed = await store.get_memory(old.id)
    assert closed is not None and closed.valid_to == new.valid_from
    assert closed.superseded_by == new.id and new.supersedes == old.id
    assert await store.list_memories("ann") == [new]
    # a closed fact cannot be superseded again; nothing is written
    with pytest.raises(Conflict, match="already closed"):
        await remember(store, "ann", "Ann lives in Faro", supersedes=old.id)
    with pytest.raises(NotFound):
        await remember(store, "ann", "Ann lives in Faro", supersedes="missing")
    assert len(await store.list_memories("ann", include_closed=True)) == 2


async def test_supersede_of_another_scopes_fact_is_not_found(store: Store) -> None:
    bobs = await remember(store, "bob", "Bob lives in Rome")
    with pytest.raises(NotFound):
        await remember(store, "ann", "Ann lives in Rome", supersedes=bobs.id)
    assert await store.get_memory(bobs.id) == bobs
    assert await store.list_memories("ann", include_closed=True) == []


async def test_a_failed_write_undoes_the_supersede(store: Store) -> None:
    """The supersede and the new fact commit together or not at all."""
    old = await remember(store, "ann", "Ann's car is red")
    with pytest.raises(InvalidRequest):
        await store.write(
            RememberFact("ann", "Ann's car is blue", supersedes=old.id),
            RememberFact("ann", ""),
        )
    assert await store.get_memory(old.id) == old
    assert await store.list_memories("ann", include_closed=True) == [old]


async def test_a_full_scope_refuses_writes_and_never_evicts(store: Store) -> None:
    facts = [await remember(store, "ann", f"fact {i}", capacity=3) for i in range(3)]
    with pytest.raises(MemoryFull, match="memory is full: 3 of 3 facts; forget some first"):
        await remember(store, "ann", "one too many", capacity=3)
    assert sorted(f.id for f in await store.list_memories("ann")) == sorted(f.id for f in facts)
    # other scopes are counted apart
    await remember(store, "bob", "bob's fact", capacity=3)
    # a supersede replaces one current fact with another: allowed when full
    newer = await remember(store, "ann", "fact 0, revised", supersedes=facts[0].id, capacity=3)
    assert len(await store.list_memories("ann")) == 3
    # forgetting makes room
    await store.write(ForgetFact("ann", newer.id))
    await remember(store, "ann", "fits now", capacity=3)
    with pytest.raises(MemoryFull):
        await remember(store, "ann", "full again", capacity=3)


async def test_capacity_holds_under_concurrent_writers(store: Store) -> None:
    results = await asyncio.gather(
        *(remember(store, "ann", f"fact {i}", capacity=5) for i in range(12)),
        return_exceptions=True,
    )
    stored = [r for r in results if isinstance(r, MemoryFact)]
    refused = [r for r in results if isinstance(r, MemoryFull)]
    assert len(stored) == 5 and len(refused) == 7
    assert len(await store.list_memories("ann")) == 5


async def test_conflicts_are_current_facts_sharing_a_subject(store: Store) -> None:
    a = await remember(store, "ann", "Ann's birthday is 3 May", subject="Birthday")
    b = await remember(store, "ann", "Ann's birthday is 5 May", subject="birthday")
    await remember(store, "ann", "Ann has a sister", subject="family")
    await remember(store, "ann", "Ann likes tea", subject="drinks")
    await remember(store, "ann", "Ann likes tea", subject="drinks")  # a duplicate, not a clash
    await remember(store, "bob", "Bob's birthday is 1 June", subject="birthday")
    (conflict,) = await store.memory_conflicts("ann")
    assert conflict.subject == "birthday"
    assert [f.id for f in conflict.facts] == [a.id, b.id]
    # resolving it by superseding leaves no conflict
    await remember(store, "ann", "Ann's birthday is 5 May", subject="birthday", supersedes=a.id)
    await store.write(ForgetFact("ann", b.id))
    assert await store.memory_conflicts("ann") == []
    assert await store.memory_conflicts("nobody") == []


async def test_search_ranks_the_better_match_first(store: Store) -> None:
    for text in FILLER:
        await remember(store, "ann", text)
    tea = await remember(store, "ann", "Ann drinks tea at work")
    green = await remember(store, "ann", "Ann drinks green tea every morning")
    hits = await store.search_memories("ann", "green tea")
    assert [h.fact.id for h in hits] == [green.id, tea.id]
    assert hits[0].score > hits[1].score
    assert [h.fact.id for h in await store.search_memories("ann", "green tea", limit=1)] == [
        green.id
    ]
    assert await store.search_memories("ann", "volcano") == []


async def test_search_weighs_the_subject(store: Store) -> None:
    for text in FILLER:
        await remember(store, "ann", text)
    body = await remember(store, "ann", "The dentist appointment moved, see the diary notes")
    about = await remember(store, "ann", "Tuesday at nine", subject="dentist")
    hits = await store.search_memories("ann", "dentist")
    assert [h.fact.id for h in hits] == [about.id, body.id]


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '"unbalanced',
        "*",
        "tea*",
        "NEAR(",
        "NEAR(tea, 2)",
        "-tea",
        "tea -",
        "subject:tea",
        ":",
        "tea AND OR NOT",
        "or",
        "()",
        "^tea",
        "tea & | ! <->",
        "",
        "   ",
        "\x00",
        "'; DROP TABLE memories; --",
    ],
)
async def test_no_query_text_breaks_the_search(store: Store, query: str) -> None:
    await remember(store, "ann", "Ann drinks tea")
    await remember(store, "ann", "Ann drinks coffee")
    hits = await store.search_memories("ann", query)
    assert all(h.fact.text == "Ann drinks tea" for h in hits)
    assert len(await store.list_memories("ann")) == 2


async def test_operators_are_words_not_syntax(store: Store) -> None:
    await remember(store, "ann", "Ann drinks tea")
    assert [h.fact.text for h in await store.search_memories("ann", '-tea "coffee')] == [
        "Ann drinks tea"
    ]
    assert await store.search_memories("ann", "NOT AND") == []


async def test_search_leaves_out_closed_facts_and_other_scopes(store: Store) -> None:
    for text in FILLER:
        await remember(store, "ann", text)
    old = await remember(store, "ann", "Ann's bike is blue")
    new = await remember(store, "ann", "Ann's bike is green", supersedes=old.id)
    forgotten = await remember(store, "ann", "Ann's other bike is red")
    await store.write(ForgetFact("ann", forgotten.id))
    await remember(store, "bob", "Bob's bike is black")
    await remember(store, "conversation:c1", "a bike in a conversation scope")
    assert [h.fact.id for h in await store.search_memories("ann", "bike")] == [new.id]
    assert [h.fact.text for h in await store.search_memories("bob", "bike")] == [
        "Bob's bike is black"
    ]
    assert [f.text for f in await store.list_memories("bob")] == ["Bob's bike is black"]
    assert await store.list_memories("carol") == []


async def test_sqlite_searches_a_scope_without_current_facts_by_its_index_alone(
    sqlite_store: SQLiteStore,
) -> None:
    """A scope with no current fact (none, or only forgotten ones) is answered without an
    FTS5 query, which reloads its index's structure after every write; one with facts
    still gets the ranked search."""
    await remember(sqlite_store, "bob", "Bob's bike is black")
    forgotten = await remember(sqlite_store, "ann", "Ann's bike is red")
    await sqlite_store.write(ForgetFact("ann", forgotten.id))
    made: list[str] = []
    sqlite_store._reader().set_trace_callback(made.append)
    try:
        assert await sqlite_store.search_memories("ann", "bike") == []
        assert await sqlite_store.search_memories("carol", "bike") == []
        assert not [s for s in made if "memories_fts" in s]
        hits = await sqlite_store.search_memories("bob", "bike")
    finally:
        sqlite_store._reader().set_trace_callback(None)
    assert [h.fact.text for h in hits] == ["Bob's bike is black"]
    assert [s for s in made if "memories_fts MATCH" in s]


async def test_listing_is_newest_first_and_limited(store: Store) -> None:
    facts = [await remember(store, "ann", f"fact number {i}") for i in range(5)]
    listed = await store.list_memories("ann", limit=3)
    assert [f.id for f in listed] == [f.id for f in reversed(facts)][:3]


async def test_the_memory_store_scores_by_word_overlap() -> None:
    store = MemoryStore()
    await remember(store, "ann", "Ann drinks tea")
    (hit,) = await store.search_memories("ann", "TEA, please")
    assert hit.score > 1


async def test_nul_characters_never_reach_the_database(store: Store) -> None:
    with pytest.raises(InvalidRequest, match="NUL"):
        await remember(store, "ann", "a\x00b")
    with pytest.raises(InvalidRequest, match="unpaired surrogate"):
        await remember(store, "ann", "a\ud800b")
    assert (await remember(store, "ann", "odd subject", subject="x\ud800")).subject == "x?"
    fact = await remember(store, "ann", "tabs", subject="home\x00\tcity\n")
    assert fact.subject == "home city"
    with pytest.raises(NotFound):
        await store.write(ForgetFact("ann", "x\x00"))
    with pytest.raises(NotFound):
        await remember(store, "ann", "y", supersedes="x\x00")
