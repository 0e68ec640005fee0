"""Full-text search of memory facts and of conversations: user text into queries no
engine can misread.

A query is reduced to its words (``search_terms``), and each engine gets them in a form
where they can only be words: FTS5 gets each one as a quoted string joined by ``OR``,
PostgreSQL gets them joined by ``or`` for ``websearch_to_tsquery`` (which never raises a
syntax error). Operators a user typed (``"``, ``*``, ``NEAR(``, ``-``, ``:``, ``AND``)
are therefore plain text. A fact matches when it has any of the words; the engines rank
facts with more (and rarer) matching words first.

A search of conversations (``message_query``) wants every word instead, the last one as
a prefix while it is being typed; the same quoting keeps it plain words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from ostinato.messages import Message, TextBlock

MAX_TERMS = 32  # words of a query that count; the rest are ignored
_WORD = re.compile(r"[^\W_]+")  # letters and digits (underscore separates, as in FTS5)


def search_terms(query: str) -> list[str]:
    """The distinct lower-case words of ``query``, in order, at most ``MAX_TERMS``."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        seen.setdefault(word, None)
        if len(seen) == MAX_TERMS:
            break
    return list(seen)


def fts5_query(terms: list[str]) -> str:
    """An FTS5 ``MATCH`` expression: any of ``terms``, each a quoted string."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def websearch_query(terms: list[str]) -> str:
    """Text for PostgreSQL's ``websearch_to_tsquery``: any of ``terms``.

    ``or`` is the one word ``websearch_to_tsquery`` treats as an operator; as a search
    word it is a stop word anyway, so it is left out.
    """
    return " or ".join(term for term in terms if term != "or")


def words(text: str) -> set[str]:
    """The lower-case words of ``text``, as ``search_terms`` splits a query."""
    return set(_WORD.findall(text.lower()))


def overlap_score(terms: list[str], text: str, subject: str | None) -> float:
    """The memory store's ranking: one point per query word the fact has (two for a word
    of its subject), plus a fraction that favours shorter facts among equals. Zero for no
    match."""
    body = words(text)
    about = words(subject) if subject else set()
    matched = 0.0
    for term in terms:
        if term in about:
            matched += 2.0
        elif term in body:
            matched += 1.0
    if not matched:
        return 0.0
    return matched + 1.0 / (len(body) + len(about) + 1)


# --- search of conversations ----------------------------------------------------------

SEARCH_WINDOW = 1000  # a query's newest matches that are ranked (``search_messages``)
SEARCH_LIMIT = 100  # the most hits one search returns
SNIPPET_WORDS = 16  # about how many words of a message a hit shows
PREFIX_LEAST = 3  # characters of the last word before it is matched as a prefix
MARK_START, MARK_END = "\x02", "\x03"  # around matches in a snippet, never in the text
_LAST_WORD = re.compile(r"([^\W_]+)$")


@dataclass(frozen=True, slots=True)
class MessageQuery:
    """What a search looks for: every one of ``words``, and a word starting with
    ``prefix`` (the word being typed) when there is one."""

    words: tuple[str, ...]
    prefix: str | None = None


def message_query(query: str) -> MessageQuery | None:
    """The words of ``query`` (at most ``MAX_TERMS``); its last word is a prefix when
    the text ends in it (nothing typed after it yet) and it has ``PREFIX_LEAST``
    characters or more. None when it has no words."""
    terms = search_terms(query)
    if not terms:
        return None
    typed = _LAST_WORD.search(query.lower())
    if typed is None or len(typed.group(1)) < PREFIX_LEAST or typed.group(1) not in terms:
        return MessageQuery(tuple(terms))
    last = typed.group(1)
    return MessageQuery(tuple(t for t in terms if t != last), last)


def searchable(text: str) -> str:
    """Text as it is indexed: a NUL (which PostgreSQL text cannot hold) becomes U+FFFD
    and the snippet marks become spaces."""
    if "\x00" in text or MARK_START in text or MARK_END in text:
        text = text.replace("\x00", "\ufffd").replace(MARK_START, " ").replace(MARK_END, " ")
    return text


def visible_text(message: Message) -> str:
    """What a search finds in a message: its text blocks, unless it is hidden."""
    if message.hidden:
        return ""
    texts = [b.text for b in message.blocks if isinstance(b, TextBlock)]
    return searchable("\n".join(texts)) if texts else ""  # (a tool row has none)


def fts5_message_match(query: MessageQuery, owner: str | None) -> str:
    """An FTS5 ``MATCH`` expression on ``message_fts``: every word in the text column
    (the prefix as a prefix query), and the owner's words in the owner column, so the
    index finds one owner's rows (an owner with no word of its own is left to the
    caller's filter). Each word is a quoted string: nothing in it is an operator."""
    quoted = [_quoted(w) for w in query.words]
    if query.prefix is not None:
        quoted.append(_quoted(query.prefix) + "*")
    match = "text : (" + " AND ".join(quoted) + ")"
    if owner is not None and _WORD.search(owner):
        match = f"owner : {_quoted(owner)} AND {match}"
    return match


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def tsquery_prefix(prefix: str) -> str:
    """``to_tsquery`` text matching words that start with ``prefix`` (one quoted operand,
    so nothing in it is an operator)."""
    return "'" + prefix.replace("'", "''").replace("\\", "\\\\") + "':*"


@dataclass(frozen=True, slots=True)
class SnippetPart:
    text: str
    match: bool = False


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One message (or title, when ``message_id`` is None) that a search found: where it
    is, a snippet of it with the matching words marked, and its rank (higher is better)."""

    conversation_id: str
    conversation_title: str | None
    archived: bool
    message_id: str | None
    seq: int | None
    role: str | None
    created_at: datetime | None
    snippet: tuple[SnippetPart, ...]
    score: float


def snippet_parts(marked: str) -> tuple[SnippetPart, ...]:
    """A snippet whose matches the engine put between ``MARK_START`` and ``MARK_END``,
    as parts."""
    parts: list[SnippetPart] = []
    for i, piece in enumerate(re.split(f"{MARK_START}|{MARK_END}", marked)):
        if piece:
            parts.append(SnippetPart(piece, match=i % 2 == 1))
    return tuple(parts)


class SearchReads(Protocol):
    """The search a ``Store`` offers over conversations."""

    async def search_messages(
        self, query: str, *, owner: str | None, limit: int = 20
    ) -> list[SearchHit]:
        """Messages (and titles) of ``owner``'s conversations (every owner's when None)
        with every word of ``query`` (``message_query``), best first: ranked by the
        engine (bm25 on SQLite, ``ts_rank`` on PostgreSQL) among the newest
        ``SEARCH_WINDOW`` matches. Any text is a valid query; one with no words finds
        nothing."""
        ...
