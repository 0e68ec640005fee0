"""Memories in the export file, on every engine: an owner's current facts go out (a page
at a time) only when asked, never another owner's or a forgotten one, and come back for
the importer in the same write as the conversations, keeping every field but the id (the
conversation and turn they were learned in become the imported ones). A bad memory entry
is refused by its place and stores nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from ostinato.store import Store
from ostinato.store.base import ForgetFact, MemoryFact, MemoryFull, RememberFact, utcnow
from ostinato.store.relations import RelateFacts
from ostinato.transfer import memories as memories_module
from ostinato.transfer.document import ImportRefused
from ostinato.transfer.exporting import export_json
from ostinato.transfer.importing import import_document, read_document
from tests.store.test_store_transfer import branched


async def facts_of_ann(store: Store, cid: str) -> list[MemoryFact]:
    """Four current facts of ann (one learned in ``cid``'s first turn, one in a
    conversation not exported, one related to another), one forgotten, one superseded,
    and one of bob's."""
    (turn, *_) = await store.list_turns(cid)
    then = utcnow() - timedelta(days=30)
    (old,) = await store.write(RememberFact("ann", "planted superseded coffee", subject="drinks"))
    (tea,) = await store.write(
        RememberFact("ann", "likes tea", subject="Drinks", valid_from=then, supersedes=old.id)
    )
    await store.write(RememberFact("ann", "lives in Lyon", conversation_id=cid, turn_id=turn.id))
    (far,) = await store.write(RememberFact("ann", "met in Oslo", conversation_id="elsewhere"))
    await store.write(RelateFacts("ann", far.id, "relates_to", tea.id))
    (gone,) = await store.write(RememberFact("ann", "planted forgotten okapi"))
    await store.write(ForgetFact("ann", gone.id))
    await store.write(RememberFact("ann", "has a cat named Miso", subject="pets"))
    await store.write(RememberFact("bob", "planted bob secret"))
    return await store.list_memories("ann")


async def export(store: Store, cid: str, *, memories: bool) -> str:
    conversation = await store.get_conversation(cid)
    assert conversation is not None
    pieces = export_json(store, [conversation], "ann", memories=memories)
    return "".join([piece async for piece in pieces])


def fields(fact: MemoryFact) -> tuple[Any, ...]:
    return (fact.text, fact.subject, fact.valid_from, fact.recorded_at, fact.current)


async def test_memories_go_out_when_asked_and_come_back(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memories_module, "PAGE", 2)  # four facts: three reads
    cid = await branched(store)
    before = await facts_of_ann(store, cid)
    assert "memories" not in json.loads(await export(store, cid, memories=False))
    text = await export(store, cid, memories=True)
    for planted in ("planted bob secret", "planted forgotten okapi", "planted superseded"):
        assert planted not in text
    rows = json.loads(text)["memories"]
    assert [r["text"] for r in rows] == [f.text for f in before]
    (copy,) = await import_document(store, read_document(text, "ann"), "ann")
    after = await store.list_memories("ann")
    made = [f for f in after if f.id not in {b.id for b in before}]
    assert [fields(f) for f in made] == [fields(f) for f in before]
    learned = next(f for f in made if f.text == "lives in Lyon")
    copied_turns = {t.id for t in await store.list_turns(copy)}
    assert learned.conversation_id == copy and learned.turn_id in copied_turns
    assert all(f.conversation_id is None for f in made if f is not learned)
    assert all(f.supersedes is None for f in made)
    assert [await store.memory_relations("ann", f.id) for f in made] == [[]] * len(made)
    assert [f.text for f in await store.list_memories("bob")] == ["planted bob secret"]


async def test_a_file_without_memories_stores_none(store: Store) -> None:
    cid = await branched(store)
    before = await facts_of_ann(store, cid)
    await import_document(
        store, read_document(await export(store, cid, memories=False), "ann"), "ann"
    )
    assert await store.list_memories("ann") == before


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda rows: rows[2].update(text="   "), "memories[2].text: a fact needs some text"),
        (lambda rows: rows[1].update(text="x" * 2_001), "memories[1].text: a fact is at most"),
        (lambda rows: rows[0].update(valid_from="soon"), "memories[0].valid_from"),
        (lambda rows: rows[0].update(colour="red"), "memories[0].colour"),
    ],
)
async def test_a_bad_memory_stores_nothing(store: Store, change: Any, where: str) -> None:
    cid = await branched(store)
    before = await facts_of_ann(store, cid)
    document = json.loads(await export(store, cid, memories=True))
    change(document["memories"])
    pattern = where.replace("[", r"\[").replace("]", r"\]")
    with pytest.raises(ImportRefused, match=pattern):
        await import_document(store, read_document(json.dumps(document), "ann"), "ann")
    assert [c.id for c in await store.list_conversations(owner="ann")] == [cid]
    assert await store.list_memories("ann") == before


async def test_memories_page_in_order(store: Store) -> None:
    for n in range(5):
        await store.write(RememberFact("ann", f"fact {n}"))
    first = await store.list_memories("ann", limit=2)
    second = await store.list_memories("ann", limit=2, before=first[-1])
    third = await store.list_memories("ann", limit=2, before=second[-1])
    assert [f.text for f in first + second + third] == [f"fact {n}" for n in range(4, -1, -1)]


async def test_memories_past_the_capacity_store_nothing(store: Store) -> None:
    cid = await branched(store)
    before = await facts_of_ann(store, cid)
    text = await export(store, cid, memories=True)
    with pytest.raises(MemoryFull):
        await import_document(store, read_document(text, "ann"), "ann", capacity=len(before) + 1)
    assert [c.id for c in await store.list_conversations(owner="ann")] == [cid]
    assert await store.list_memories("ann") == before
