"""The in-memory store's search of conversations: the reference semantics of
``Store.search_messages`` without an index (every message is read), words matched as
they are written (the SQL engines also match other forms of a word: Porter stemming on
SQLite, English stemming and stop words on PostgreSQL)."""

from __future__ import annotations

import math
import re
from datetime import datetime

from ostinato.store.base import Conversation
from ostinato.store.memory_tables import MemoryTables
from ostinato.store.search import (
    SEARCH_LIMIT,
    SEARCH_WINDOW,
    SNIPPET_WORDS,
    MessageQuery,
    SearchHit,
    SnippetPart,
    message_query,
    searchable,
    visible_text,
)

_WORD = re.compile(r"[^\W_]+")
_Found = tuple[tuple[datetime, int], float, SearchHit]


def search(t: MemoryTables, query: str, owner: str | None, limit: int) -> list[SearchHit]:
    parsed = message_query(query)
    if parsed is None or limit <= 0:
        return []
    found: list[_Found] = []
    for conversation in t._conversations.values():
        if owner is None or conversation.owner == owner:
            found += _in_conversation(t, conversation, parsed)
    found.sort(key=lambda f: f[0], reverse=True)  # newest first
    window = found[:SEARCH_WINDOW]
    window.sort(key=lambda f: f[1], reverse=True)  # stable: newer first among equals
    return [hit for _, _, hit in window[: min(limit, SEARCH_LIMIT)]]


def _in_conversation(t: MemoryTables, c: Conversation, query: MessageQuery) -> list[_Found]:
    found: list[_Found] = []
    archived = c.archived_at is not None
    if c.title and (scored := _match(searchable(c.title), query)) is not None:
        score, snippet = scored
        hit = SearchHit(c.id, c.title, archived, None, None, None, None, snippet, score)
        found.append(((c.created_at, 0), score, hit))
    for m in t._messages.get(c.id, []):
        if (scored := _match(visible_text(m), query)) is not None:
            score, snippet = scored
            when = m.created_at or c.created_at
            hit = SearchHit(c.id, c.title, archived, m.id, m.seq, m.role, when, snippet, score)
            found.append(((when, m.seq or 0), score, hit))
    return found


def _match(text: str, query: MessageQuery) -> tuple[float, tuple[SnippetPart, ...]] | None:
    """The score and snippet of ``text`` if it has every word of ``query``, else None."""
    spans = [(w.group(0).lower(), w.start(), w.end()) for w in _WORD.finditer(text)]
    tokens = {word for word, _, _ in spans}
    if not all(word in tokens for word in query.words):
        return None
    prefix = query.prefix
    if prefix is not None and not any(word.startswith(prefix) for word in tokens):
        return None

    def matches(word: str) -> bool:
        return word in query.words or (prefix is not None and word.startswith(prefix))

    hits = [i for i, (word, _, _) in enumerate(spans) if matches(word)]
    score = len(hits) / math.sqrt(len(spans))
    return score, _snippet(text, spans, hits)


def _snippet(
    text: str, spans: list[tuple[str, int, int]], hits: list[int]
) -> tuple[SnippetPart, ...]:
    """About ``SNIPPET_WORDS`` words from a little before the first match, the matches
    marked; "…" where text was left out."""
    first = max(0, min(hits[0] - SNIPPET_WORDS // 4, len(spans) - SNIPPET_WORDS))
    last = min(len(spans), first + SNIPPET_WORDS) - 1
    at = spans[first][1] if first > 0 else 0
    end = spans[last][2] if last < len(spans) - 1 else len(text)
    parts: list[SnippetPart] = []
    for i in hits:
        _, start, stop = spans[i]
        if first <= i <= last:
            parts += [SnippetPart(text[at:start]), SnippetPart(text[start:stop], match=True)]
            at = stop
    parts.append(SnippetPart(text[at:end]))
    if first > 0:
        parts.insert(0, SnippetPart("…"))
    if end < len(text):
        parts.append(SnippetPart("…"))
    return tuple(part for part in parts if part.text)
