"""Conversation trees in SQL, for both engines: the statements, ``MoveBranch``, and the
reads that follow a branch (``store.tree`` says what a branch and a run are).

A branch's rows are read range by range, each range a backward (or forward) walk of the
``(conversation_id, seq)`` index, so a conversation that never branched is read by the
one statement it always was. The shape of the tree comes from the run starts alone:
``ix_messages_run_starts`` is a partial index holding only the rows whose parent is not
the row before them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import cache
from typing import Any, Literal, TypeAlias

import sqlalchemy as sa

from ostinato.errors import NotFound
from ostinato.messages import Message
from ostinato.store.base import HistoryWindow
from ostinato.store.branches import MoveBranch, moved
from ostinato.store.sql import rows
from ostinato.store.sql.conversation_sql import conversation_columns
from ostinato.store.sql.rows import Row, TimeDecoder
from ostinato.store.sql.tables import conversations, messages, summaries
from ostinato.store.tree import SEQ_END, WHOLE, Branch, Tree

TreeWriteName: TypeAlias = Literal["run_starts", "newest_seq", "move_branch"]

_CID = sa.bindparam("conversation_id", type_=messages.c.conversation_id.type)
_AFTER = sa.bindparam("after_seq", type_=messages.c.seq.type)
_UPTO = sa.bindparam("upto", type_=messages.c.seq.type)
_LIMIT = sa.bindparam("limit", type_=sa.Integer)


@cache
def list_messages(include_hidden: bool, limited: bool) -> sa.Select[Any]:
    """Rows with ``after_seq < seq <= upto`` in seq order (a range of a branch)."""
    stmt = sa.select(messages).where(
        messages.c.conversation_id == _CID, messages.c.seq > _AFTER, messages.c.seq <= _UPTO
    )
    if not include_hidden:
        stmt = stmt.where(messages.c.hidden == sa.bindparam("hidden", type_=sa.Boolean))
    stmt = stmt.order_by(messages.c.seq)
    return stmt.limit(_LIMIT) if limited else stmt


@cache
def window_rows() -> sa.Select[Any]:
    """The newest rows with ``after_seq < seq <= upto`` (summary rows left out), newest
    first: a backward walk of the ``(conversation_id, seq)`` index that stops at
    ``limit``."""
    is_summary = (
        sa.select(summaries.c.message_seq)
        .where(
            summaries.c.conversation_id == messages.c.conversation_id,
            summaries.c.message_seq == messages.c.seq,
        )
        .exists()
    )
    return (
        sa.select(messages)
        .where(
            messages.c.conversation_id == _CID,
            messages.c.seq > _AFTER,
            messages.c.seq <= _UPTO,
            ~is_summary,
        )
        .order_by(messages.c.seq.desc())
        .limit(_LIMIT)
    )


@cache
def run_starts() -> sa.Select[Any]:
    """``(seq, parent_seq)`` of each row that starts a run (the partial index's rows)."""
    return (
        sa.select(messages.c.seq, messages.c.parent_seq)
        .where(messages.c.conversation_id == _CID, messages.c.parent_seq.is_not(None))
        .order_by(messages.c.seq)
    )


@cache
def newest_seq() -> sa.Select[Any]:
    return sa.select(sa.func.max(messages.c.seq)).where(messages.c.conversation_id == _CID)


@cache
def branch_of() -> sa.Select[Any]:
    """A conversation's branch columns (no row: no such conversation)."""
    return sa.select(conversations.c.branch_ranges, conversations.c.branch_since).where(
        conversations.c.id == _CID
    )


def _summary_join() -> sa.Join:
    return summaries.join(
        messages,
        sa.and_(
            messages.c.conversation_id == summaries.c.conversation_id,
            messages.c.seq == summaries.c.message_seq,
        ),
    )


@cache
def branch_and_summary() -> sa.Select[Any]:
    """A conversation's branch columns, the latest summary's ``through_seq`` and its
    message row (NULLs when it has none): one row, or none for an unknown conversation."""
    made = summaries.alias("made")
    latest = (
        sa.select(sa.func.max(made.c.message_seq))
        .where(made.c.conversation_id == conversations.c.id)
        .correlate(conversations)
        .scalar_subquery()
    )
    joined = conversations.outerjoin(
        _summary_join(),
        sa.and_(
            summaries.c.conversation_id == conversations.c.id,
            summaries.c.message_seq == latest,
        ),
    )
    return (
        sa.select(
            conversations.c.branch_ranges,
            conversations.c.branch_since,
            summaries.c.through_seq,
            messages,
        )
        .select_from(joined)
        .where(conversations.c.id == _CID)
    )


@cache
def all_summaries() -> sa.Select[Any]:
    """Every summary of a conversation, newest first: its ``through_seq``, then its row."""
    return (
        sa.select(summaries.c.through_seq, messages)
        .select_from(_summary_join())
        .where(summaries.c.conversation_id == _CID)
        .order_by(summaries.c.message_seq.desc())
    )


@cache
def opening_head() -> sa.Select[Any]:
    """``branch_and_summary`` with the whole conversation row (``get_conversation``'s
    columns) in place of its branch columns."""
    joined = branch_and_summary().get_final_froms()[0]
    return (
        sa.select(*conversation_columns(), summaries.c.through_seq, messages)
        .select_from(joined)
        .where(conversations.c.id == _CID)
    )


@cache
def window_in_one(conversation: bool = False) -> sa.CompoundSelect[Any]:
    """The head row (``part`` 0: ``branch_and_summary``'s, or ``opening_head``'s with
    ``conversation``) and, when the conversation never branched, the newest ``limit``
    rows after its latest summary (``part`` 1, after as many NULLs as the head has
    columns before its row; summary rows left out; the same backward walk of the
    ``(conversation_id, seq)`` index as ``window_rows``): a never-branched
    conversation's window in one round trip."""
    head = (opening_head() if conversation else branch_and_summary()).cte("head")
    through = sa.select(sa.func.coalesce(head.c.through_seq, 0)).scalar_subquery()
    never = sa.or_(head.c.branch_ranges.is_(None), head.c.branch_since.is_(None))
    whole = sa.exists(sa.select(sa.literal(1)).select_from(head).where(never))
    walk = window_rows().where(whole, messages.c.seq > through)
    newest = walk.with_only_columns(*messages.c).subquery("newest")
    before_row = list(head.c)[: len(head.c) - len(messages.c)]
    blank = [sa.cast(sa.null(), column.type) for column in before_row]
    return sa.union_all(
        sa.select(sa.literal(0, sa.Integer).label("part"), *head.c),
        sa.select(sa.literal(1, sa.Integer), *blank, *newest.c),
    )


def tree_statements() -> dict[Any, sa.Executable]:
    """The statements ``move_branch`` runs, by ``TreeWriteName`` (both engines)."""
    return {
        "run_starts": run_starts(),
        "newest_seq": newest_seq(),
        "move_branch": sa.update(conversations)
        .where(conversations.c.id == sa.bindparam("b_id", type_=conversations.c.id.type))
        .values(
            {
                name: sa.bindparam(name, type_=conversations.c[name].type)
                for name in ("branch_ranges", "branch_since", "branch_tip")
            }
        ),
    }


def move_branch(ex: Any, op: MoveBranch, now: Any) -> Branch:
    """``MoveBranch``: the conversation's row is locked first (PostgreSQL), so no append
    to it runs between reading its tree and moving its branch."""
    cid = op.conversation_id
    if ex.row("lock_conversation", {"b_id": cid}) is None:
        raise NotFound(f"no conversation {cid!r}")
    params = {"conversation_id": cid}
    found = ex.row("newest_seq", params)
    newest = int(found[0] or 0) if found is not None else 0
    starts = [(int(s), int(p)) for s, p in ex.rows("run_starts", params)]
    branch = moved(Tree.of(starts, newest), op)
    ex.execute("move_branch", {"b_id": cid, **branch.columns()})
    return branch


class SQLTreeReads(ABC):
    """The reads that follow a branch, for ``SQLReads``. ``_window_in_one``: a
    never-branched conversation's window is one statement (``window_in_one``), where
    a round trip costs more than the statement (PostgreSQL)."""

    _window_in_one = False

    _decode_time: TimeDecoder
    _message_cache: rows.MessageCache

    @abstractmethod
    async def _fetch(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]: ...

    async def tree(self, conversation_id: str) -> Tree | None:
        params = {"conversation_id": conversation_id}
        found = await self._fetch(branch_of(), params)
        if not found:
            return None
        newest = (await self._fetch(newest_seq(), params))[0][0] or 0
        starts = [(int(s), int(p)) for s, p in await self._fetch(run_starts(), params)]
        return Tree.of(starts, int(newest), Branch.stored(found[0][0], found[0][1]))

    async def _branch(self, conversation_id: str) -> Branch:
        found = await self._fetch(branch_of(), {"conversation_id": conversation_id})
        return Branch.stored(found[0][0], found[0][1]) if found else WHOLE

    async def list_messages(
        self,
        conversation_id: str,
        *,
        after_seq: int = 0,
        limit: int | None = None,
        include_hidden: bool = True,
        branch: Branch | None = None,
    ) -> list[Message]:
        """The branch's rows in seq order after ``after_seq``: a forward walk of the
        ``(conversation_id, seq)`` index per range of the branch."""
        if branch is None:
            branch = await self._branch(conversation_id)
        stmt = list_messages(include_hidden, limit is not None)
        found: list[Row] = []
        for lo, hi in branch.spans(after_seq):
            if limit is not None and len(found) >= limit:
                break
            params = {
                "conversation_id": conversation_id,
                "after_seq": lo - 1,
                "upto": hi,
                "hidden": False,
                "limit": None if limit is None else limit - len(found),
            }
            found.extend(await self._fetch(stmt, params))
        return self._message_cache.messages(found, self._decode_time)

    async def window(
        self, conversation_id: str, *, limit: int, branch: Branch | None = None
    ) -> HistoryWindow:
        """Two index reads for a branch of one range (every conversation that never
        branched): the branch and its latest summary, then a backward walk of the
        ``(conversation_id, seq)`` index for ``limit + 1`` rows; one more per range (with
        ``_window_in_one``, both in one statement for a conversation that never branched)."""
        if branch is None and self._window_in_one:
            return (await self._in_one(conversation_id, limit, conversation=False))[1]
        params = {"conversation_id": conversation_id}
        found = await self._fetch(branch_and_summary(), params)
        if not found:
            return HistoryWindow(None, [], False)
        return await self._window_after(conversation_id, found[0], branch, limit, None)

    async def _in_one(
        self, conversation_id: str, limit: int, *, conversation: bool
    ) -> tuple[Row | None, HistoryWindow]:
        """``window_in_one``: the conversation's row (with ``conversation``) and its
        window; for a conversation that branched, its ranges are read after."""
        params = {"conversation_id": conversation_id, "limit": max(limit, 0) + 1, **_EVERY_SEQ}
        found = await self._fetch(window_in_one(conversation), params)
        heads = [row[1:] for row in found if row[0] == 0]
        if not heads:
            return None, HistoryWindow(None, [], False)
        first = heads[0]
        row, head = None, first
        if conversation:  # its branch columns in place, as ``branch_and_summary`` has them
            row = first[:_CONVERSATION]
            head = (row[_RANGES], row[_SINCE], *first[_CONVERSATION:])
        newest = None
        if Branch.stored(head[0], head[1]) == WHOLE:  # its rows came with it
            skip = 1 + len(first) - len(messages.c)
            newest = sorted((r[skip:] for r in found if r[0] == 1), key=_seq, reverse=True)
        return row, await self._window_after(conversation_id, head, None, limit, newest)

    async def _window_after(
        self,
        conversation_id: str,
        head: Row,
        branch: Branch | None,
        limit: int,
        newest: list[Row] | None,
    ) -> HistoryWindow:
        """The window from its head row (``branch_and_summary``'s) and, when they were
        read with it, the newest rows (newest first)."""
        if branch is None:
            branch = Branch.stored(head[0], head[1])
        summary, through = None, 0
        if head[2] is not None:
            summary, through = await self._summary(conversation_id, branch, head[2:])
        if newest is None:
            newest = await self._newest_rows(conversation_id, branch, through, max(limit, 0) + 1)
        if limit <= 0:
            return HistoryWindow(summary, [], bool(newest))
        picked = self._message_cache.messages(newest[:limit], self._decode_time)
        picked.reverse()
        return HistoryWindow(summary, picked, len(newest) > limit)

    async def _summary(
        self, conversation_id: str, branch: Branch, latest: Row
    ) -> tuple[Message | None, int]:
        """The latest summary of a part of ``branch`` (through one of its rows) and the
        seq it summarises through; ``latest`` is the conversation's latest summary."""
        candidates: Sequence[Row] = [latest]
        if latest[0] not in branch:
            candidates = await self._fetch(all_summaries(), {"conversation_id": conversation_id})
        for row in candidates:
            if row[0] in branch:
                message = self._message_cache.messages([row[1:]], self._decode_time)[0]
                return message, int(row[0])
        return None, 0

    async def _newest_rows(
        self, conversation_id: str, branch: Branch, after: int, limit: int
    ) -> list[Row]:
        """Up to ``limit`` of the branch's rows after ``after`` (summaries left out),
        newest first."""
        out: list[Row] = []
        for lo, hi in reversed(branch.spans(after)):
            if len(out) >= limit:
                break
            params = {
                "conversation_id": conversation_id,
                "after_seq": lo - 1,
                "upto": hi,
                "limit": limit - len(out),
            }
            out.extend(await self._fetch(window_rows(), params))
        return out


_SEQ = list(messages.c.keys()).index("seq")
_EVERY_SEQ = {"after_seq": 0, "upto": SEQ_END}  # ``window_in_one``'s walk: every row
_CONVERSATION = len(conversations.c)  # ``opening_head``'s conversation columns
_RANGES = list(conversations.c.keys()).index("branch_ranges")
_SINCE = list(conversations.c.keys()).index("branch_since")


def _seq(row: Row) -> int:
    return int(row[_SEQ])
