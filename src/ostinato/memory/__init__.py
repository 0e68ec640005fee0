"""Long-term memory: facts a model keeps about its user across conversations.

- ``facts``: ``Memory`` (remember, recall, forget, conflicts over any ``Store``) and
  ``scope_for`` (an owner's facts, or a conversation's own).
- ``ranking``: the ``Ranker`` protocol, embedding + full-text fusion, and the optional
  local ``SentenceTransformerRanker``.
- ``tools``: ``memory_tools(store, ranker=None)``, the tools a model calls.

The facts themselves (``MemoryFact``, the ``RememberFact`` / ``ForgetFact`` ops and the
reads) are part of the store contract, ``ostinato.store.base``.
"""

from ostinato.memory.facts import Memory, scope_for
from ostinato.memory.ranking import (
    Ranker,
    SentenceTransformerRanker,
    default_ranker,
    hybrid_search,
)
from ostinato.memory.tools import memory_tools

__all__ = [
    "Memory",
    "Ranker",
    "SentenceTransformerRanker",
    "default_ranker",
    "hybrid_search",
    "memory_tools",
    "scope_for",
]
