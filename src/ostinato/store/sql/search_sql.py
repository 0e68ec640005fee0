"""Search of conversations in SQL, for both engines: the rows of ``message_search``
(written by the write that stores each message and title) and the search itself.

A message with visible text (``search.visible_text``) gets a ``message_search`` row in
the same write that inserts it (``index_message``, run by ``ops._append``), a titled
conversation one with ``message_id`` NULL (``index_title``; a new title replaces it). The
engines index those rows themselves: on SQLite, triggers keep the FTS5 table
``message_fts`` in step within the writing transaction; on PostgreSQL the
``search_vector`` column is generated from the text as the row is inserted. So a search
sees exactly the committed messages.

The search (``SQLSearch.search_messages``) ranks the newest ``SEARCH_WINDOW`` matches of
the owner: the window's oldest row is found first (on SQLite by walking the match in
rowid order from the newest; on PostgreSQL by the ``(owner, num)`` index or the GIN
index, whichever the planner finds cheaper for the query's words, which is why that
statement is planned for its values: ``PostgresStore._fetch_planned``), then only the
rows in the window are ranked, and only the best ``limit`` get a snippet.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, Literal, TypeAlias

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ostinato.messages import Message
from ostinato.store.search import (
    MARK_END,
    MARK_START,
    SEARCH_LIMIT,
    SEARCH_WINDOW,
    SNIPPET_WORDS,
    MessageQuery,
    SearchHit,
    fts5_message_match,
    message_query,
    searchable,
    snippet_parts,
    tsquery_prefix,
    visible_text,
)
from ostinato.store.sql.rows import Row, TimeDecoder
from ostinato.store.sql.tables import conversations, message_search

SearchWriteName: TypeAlias = Literal["index_message", "index_title", "unindex_title"]


def search_statements(dialect: str) -> dict[Any, sa.Executable]:
    """The write statements that keep ``message_search``, by ``SearchWriteName``."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    cid = sa.bindparam("conversation_id", type_=conversations.c.id.type)
    text = sa.bindparam("text", type_=message_search.c.text.type)
    # The owner comes from the conversation's row: an unknown conversation inserts none.
    message_row = sa.select(
        conversations.c.owner,
        conversations.c.id,
        sa.bindparam("message_id", type_=message_search.c.message_id.type),
        text,
    ).where(conversations.c.id == cid)
    columns = ["owner", "conversation_id", "message_id", "text"]
    return {
        "index_message": insert(message_search).from_select(columns, message_row),
        "index_title": insert(message_search).values(
            owner=sa.bindparam("owner", type_=message_search.c.owner.type),
            conversation_id=cid,
            message_id=sa.null(),
            text=text,
        ),
        "unindex_title": sa.delete(message_search).where(
            message_search.c.conversation_id == cid, message_search.c.message_id.is_(None)
        ),
    }


def index_message(ex: Any, conversation_id: str, message_id: str, message: Message) -> None:
    """Index a message just inserted (nothing when it has no visible text)."""
    text = visible_text(message)
    if text.strip():
        params = {"conversation_id": conversation_id, "message_id": message_id, "text": text}
        ex.execute("index_message", params)


def index_title(ex: Any, conversation_id: str, owner: str | None, title: str | None) -> None:
    """Index a new conversation's title (nothing without one)."""
    if title and title.strip():
        params = {"conversation_id": conversation_id, "owner": owner, "text": searchable(title)}
        ex.execute("index_title", params)


def reindex_title(ex: Any, conversation_id: str, owner: str | None, title: str | None) -> None:
    """Replace a conversation's indexed title."""
    ex.execute("unindex_title", {"conversation_id": conversation_id})
    index_title(ex, conversation_id, owner, title)


# --- the search -------------------------------------------------------------------------

# Both statements end with the same columns, which ``_hit`` reads.
_HIT_COLUMNS = (
    "s.conversation_id, c.title, c.archived_at, s.message_id, m.seq, m.role, m.created_at"
)
_HIT_JOINS = (
    " JOIN conversations c ON c.id = s.conversation_id LEFT JOIN messages m ON m.id = s.message_id"
)


@cache
def sqlite_search(by_owner: bool) -> sa.TextClause:
    """``:match`` from ``search.fts5_message_match``; bm25 weighs the owner column 0.
    The window's rows are ranked by FTS5 itself (``ORDER BY rank``): it sorts them by
    rank first and makes a snippet only for the rows it returns (a snippet needs its
    row's match: made apart, each would evaluate the query again, a whole prefix's
    entries each time)."""
    owner = " AND s.owner = :owner" if by_owner else ""
    return sa.text(
        f"SELECT {_HIT_COLUMNS},"
        f" snippet(message_fts, 0, char(2), char(3), '…', {SNIPPET_WORDS}), -message_fts.rank"
        f" FROM message_fts JOIN message_search s ON s.num = message_fts.rowid{_HIT_JOINS}"
        " WHERE message_fts MATCH :match AND message_fts.rank MATCH 'bm25(1.0, 0.0)'"
        f"{owner} AND message_fts.rowid >= coalesce(("
        "SELECT rowid FROM message_fts WHERE message_fts MATCH :match"
        " ORDER BY rowid DESC LIMIT 1 OFFSET :window), 0)"
        " ORDER BY message_fts.rank LIMIT :limit"
    )


_HEADLINE = (
    f"StartSel={MARK_START}, StopSel={MARK_END}, MaxWords={SNIPPET_WORDS + 8},"
    f" MinWords={SNIPPET_WORDS // 2}, ShortWord=2, MaxFragments=1, FragmentDelimiter=…"
)


@cache
def postgres_search(by_owner: bool, prefixed: bool) -> sa.TextClause:
    """``:words`` for ``plainto_tsquery`` (which reads any text as words),
    ``:prefix`` from ``search.tsquery_prefix``."""
    query = "plainto_tsquery('english', :words)"
    if prefixed:
        query = f"({query} && (to_tsquery('simple', :prefix) || to_tsquery('english', :prefix)))"
    owner = "s.owner = :owner AND " if by_owner else ""
    return sa.text(
        "WITH newest AS (SELECT s.num FROM message_search s"
        f" WHERE {owner}s.search_vector @@ {query} ORDER BY s.num DESC LIMIT :window),"
        f" top AS (SELECT s.num, ts_rank(s.search_vector, {query}) AS rank"
        " FROM newest JOIN message_search s ON s.num = newest.num"
        " ORDER BY rank DESC, s.num DESC LIMIT :limit)"
        f" SELECT {_HIT_COLUMNS}, ts_headline('english', s.text, {query}, :headline), top.rank"
        f" FROM top JOIN message_search s ON s.num = top.num{_HIT_JOINS}"
        " ORDER BY top.rank DESC, top.num DESC"
    )


def search_params(
    dialect: str, query: MessageQuery, owner: str | None, limit: int
) -> tuple[sa.TextClause, dict[str, Any]]:
    """The statement and parameters of a search on ``dialect``."""
    limit = max(1, min(limit, SEARCH_LIMIT))
    by_owner = owner is not None
    params: dict[str, Any] = {"owner": owner, "limit": limit}
    if dialect == "postgresql":
        params |= {"words": " ".join(query.words), "window": SEARCH_WINDOW, "headline": _HEADLINE}
        if query.prefix is not None:
            params["prefix"] = tsquery_prefix(query.prefix)
        return postgres_search(by_owner, query.prefix is not None), params
    params |= {"match": fts5_message_match(query, owner), "window": SEARCH_WINDOW - 1}
    return sqlite_search(by_owner), params


def hit(row: Row, decode: TimeDecoder) -> SearchHit:
    cid, title, archived_at, message_id, seq, role, created_at, marked, score = row
    return SearchHit(
        conversation_id=cid,
        conversation_title=title,
        archived=archived_at is not None,
        message_id=message_id,
        seq=seq,
        role=role,
        created_at=None if created_at is None else decode(created_at),
        snippet=snippet_parts(marked or ""),
        score=float(score),
    )


# On SQLite FTS5 takes new ``message_search`` rows in batches (migration 0021): the rows
# after ``message_fts_mark`` are not in it yet. A search first indexes them.
_FTS_MARK = "(SELECT num FROM message_fts_mark WHERE one = 1)"
SQLITE_UNINDEXED = sa.text(f"SELECT 1 FROM message_search WHERE num > {_FTS_MARK} LIMIT 1")
SQLITE_INDEX_REST = (
    sa.text(
        "INSERT INTO message_fts(rowid, text, owner)"
        f" SELECT num, text, owner FROM message_search WHERE num > {_FTS_MARK}"
    ),
    sa.text(
        "UPDATE message_fts_mark SET num = max(num, coalesce("
        "(SELECT max(num) FROM message_search), 0)) WHERE one = 1"
    ),
)


class SQLSearch:
    """``search_messages`` of ``SQLReads``: an engine supplies ``_fetch_planned`` (a
    select planned for its parameters' values), ``_decode_time`` and ``_dialect``, and
    ``_search_ready`` when its index can lag its rows."""

    _decode_time: TimeDecoder
    _dialect: str

    async def _fetch_planned(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]:
        raise NotImplementedError

    async def _search_ready(self) -> None:
        """Bring the full-text index up to every committed row (nothing by default)."""

    async def search_messages(
        self, query: str, *, owner: str | None, limit: int = 20
    ) -> list[SearchHit]:
        parsed = message_query(query)
        if parsed is None or limit <= 0:
            return []
        stmt, params = search_params(self._dialect, parsed, owner, limit)
        await self._search_ready()
        found = await self._fetch_planned(stmt, params)
        return [hit(r, self._decode_time) for r in found]
