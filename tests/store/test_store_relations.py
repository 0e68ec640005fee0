"""Relations between memory facts and resolving conflicts, on every engine."""

from __future__ import annotations

import pytest

from ostinato.errors import Conflict, InvalidRequest, NotFound
from ostinato.store import Store
from ostinato.store.base import ForgetFact, MemoryFact, RememberFact
from ostinato.store.relations import MemoryRelation, RelateFacts, ResolveConflict


async def remember(store: Store, scope: str, text: str, **kw: object) -> MemoryFact:
    (fact,) = await store.write(RememberFact(scope, text, **kw))  # type: ignore[arg-type]
    assert isinstance(fact, MemoryFact)
    return fact


async def relate(store: Store, scope: str, source: str, kind: str, target: str) -> MemoryRelation:
    (made,) = await store.write(RelateFacts(scope, source, kind, target))
    assert isinstance(made, MemoryRelation)
    return made


async def test_facts_relate_and_each_end_reads_the_relation(store: Store) -> None:
    maya = await remember(store, "ann", "Ann's daughter is Maya")
    birthday = await remember(store, "ann", "Maya was born on 3 May 2019", subject="birthday")
    school = await remember(store, "ann", "Maya goes to Escola Azul")
    about = await relate(store, "ann", birthday.id, "about", maya.id)
    assert (about.source, about.relation, about.target, about.scope) == (
        birthday.id,
        "about",
        maya.id,
        "ann",
    )
    part = await relate(store, "ann", school.id, "part_of", maya.id)
    assert await store.memory_relations("ann", maya.id) == [about, part]
    assert await store.memory_relations("ann", birthday.id) == [about]
    assert await store.memory_relations("bob", maya.id) == []
    # Relating the same two facts the same way again keeps the first relation.
    assert await relate(store, "ann", birthday.id, "about", maya.id) == about
    assert await store.memory_relations("ann", maya.id) == [about, part]


async def test_a_relation_needs_two_current_facts_of_the_scope(store: Store) -> None:
    a = await remember(store, "ann", "fact a")
    b = await remember(store, "ann", "fact b")
    other = await remember(store, "bob", "bob's fact")
    with pytest.raises(InvalidRequest, match="unknown relation 'likes'"):
        await relate(store, "ann", a.id, "likes", b.id)
    with pytest.raises(InvalidRequest, match="cannot relate to itself"):
        await relate(store, "ann", a.id, "about", a.id)
    # the target is a field of the request (422), the source the fact acted on (404)
    with pytest.raises(InvalidRequest, match=f"target: no memory '{other.id}'"):
        await relate(store, "ann", a.id, "about", other.id)
    with pytest.raises(InvalidRequest, match="target: no memory 'nope'"):
        await relate(store, "ann", a.id, "about", "nope")
    with pytest.raises(NotFound):
        await relate(store, "ann", "nope", "about", b.id)
    await store.write(ForgetFact("ann", b.id))
    with pytest.raises(Conflict, match="closed"):
        await relate(store, "ann", a.id, "relates_to", b.id)
    assert await store.memory_relations("ann", a.id) == []


async def test_a_write_that_fails_relates_nothing(store: Store) -> None:
    a = await remember(store, "ann", "fact a")
    b = await remember(store, "ann", "fact b")
    with pytest.raises(NotFound):
        await store.write(RelateFacts("ann", a.id, "about", b.id), ForgetFact("ann", "nope"))
    assert await store.memory_relations("ann", a.id) == []


async def test_resolving_keeps_one_fact_and_closes_the_others_as_history(store: Store) -> None:
    one = await remember(store, "ann", "Maya was born on 3 May", subject="birthday")
    two = await remember(store, "ann", "Maya was born on 5 May", subject="birthday")
    three = await remember(store, "ann", "Maya was born in May", subject="birthday")
    (closed,) = await store.write(ResolveConflict("ann", one.id, (two.id, three.id, two.id)))
    assert [f.id for f in closed] == [two.id, three.id]
    assert all(not f.current and f.superseded_by == one.id for f in closed)
    assert [f.id for f in await store.list_memories("ann")] == [one.id]
    history = await store.list_memories("ann", include_closed=True)
    assert {f.id for f in history} == {one.id, two.id, three.id}
    # Resolving again closes nothing more.
    assert await store.write(ResolveConflict("ann", one.id, (two.id,))) == [[]]


async def test_resolving_refuses_what_it_cannot_do_and_writes_nothing(store: Store) -> None:
    one = await remember(store, "ann", "it is red", subject="colour")
    two = await remember(store, "ann", "it is blue", subject="colour")
    other = await remember(store, "bob", "it is green", subject="colour")
    with pytest.raises(InvalidRequest, match="cannot also be"):
        await store.write(ResolveConflict("ann", one.id, (one.id, two.id)))
    with pytest.raises(NotFound):
        await store.write(ResolveConflict("ann", one.id, (two.id, other.id)))
    with pytest.raises(NotFound):
        await store.write(ResolveConflict("ann", other.id, (two.id,)))
    assert {f.id for f in await store.list_memories("ann")} == {one.id, two.id}
    await store.write(ForgetFact("ann", one.id))
    with pytest.raises(Conflict, match="closed"):
        await store.write(ResolveConflict("ann", one.id, (two.id,)))
    assert (await store.get_memory(two.id)) == two
