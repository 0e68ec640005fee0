"""Full-text search of memory facts: user text into queries no engine can misread.

A query is reduced to its words (``search_terms``), and each engine gets them in a form
where they can only be words: FTS5 gets each one as a quoted string joined by ``OR``,
PostgreSQL gets them joined by ``or`` for ``websearch_to_tsquery`` (which never raises a
syntax error). Operators a user typed (``"``, ``*``, ``NEAR(``, ``-``, ``:``, ``AND``)
are therefore plain text. A fact matches when it has any of the words; the engines rank
facts with more (and rarer) matching words first.
"""

from __future__ import annotations

import re

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
