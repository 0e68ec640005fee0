"""``/v1/conversations/{id}/messages``: the stored rows of the current branch, in seq
order."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from ostinato.server.auth import CurrentCaller, owned
from ostinato.server.context import Context
from ostinato.server.schemas import ERROR_RESPONSES, SEQ_MAX, MessageOut, SiblingRef
from ostinato.store.base import Store

router = APIRouter(prefix="/v1/conversations", tags=["messages"])


class MessagePage(BaseModel):
    messages: list[MessageOut]
    next_after_seq: int | None = Field(
        description="When the page was cut by `limit`, pass as `after_seq` for the next page."
    )
    older: bool = Field(
        default=False,
        description="With `newest`: whether rows older than these exist (read them with "
        "`after_seq`).",
    )


@router.get("/{conversation_id}/messages", response_model=MessagePage, responses=ERROR_RESPONSES)
async def list_messages(
    context: Context,
    caller: CurrentCaller,
    conversation_id: str,
    after_seq: Annotated[
        int, Query(ge=0, le=SEQ_MAX, description="Only rows with a larger seq.")
    ] = 0,
    limit: Annotated[int | None, Query(ge=1, le=1000)] = None,
    include_hidden: Annotated[
        bool, Query(description="Include rows hidden from the chat (e.g. notes).")
    ] = False,
    newest: Annotated[
        int | None,
        Query(
            ge=1,
            le=1000,
            description="The newest rows (after `after_seq`, if given), at most this many "
            "(and none from before the latest compaction summary), in seq order; `older` "
            "says whether there are older ones (after `after_seq`).",
        ),
    ] = None,
) -> MessagePage:
    """The rows of the conversation's current branch after `after_seq` (or the newest
    ones), in seq order. Where the branch forks, a row carries `siblings`: the versions
    of that point (docs/api.md, "Conversations are trees")."""
    conversation = await owned(context.runtime, caller, conversation_id)
    if newest is not None:
        page = await _newest(context, conversation_id, newest, after_seq, include_hidden)
    else:
        rows = await context.runtime.store.list_messages(
            conversation_id, after_seq=after_seq, limit=limit, include_hidden=include_hidden
        )
        cut = limit is not None and len(rows) == limit
        page = MessagePage(
            messages=[MessageOut.of(row) for row in rows],
            next_after_seq=rows[-1].seq if cut and rows else None,
        )
    if not conversation.branch.whole and page.messages:
        await _versions(context.runtime.store, conversation_id, page.messages, after_seq)
    return page


async def _versions(store: Store, conversation_id: str, shown: list[MessageOut], low: int) -> None:
    """Give each row where the branch forks its ``siblings`` (``Tree.versions``)."""
    tree = await store.tree(conversation_id)
    last = shown[-1].seq
    if tree is None or last is None:
        return
    path = [s for s in tree.ancestors(last) if s > low]
    path.reverse()
    found = tree.versions(path, {m.seq for m in shown if m.seq is not None})
    on = set(path)
    for message in shown:
        versions = found.get(message.seq or 0)
        if versions is not None:
            message.siblings = [
                SiblingRef(seq=s, leaf=tree.newest_under(s), current=s in on) for s in versions
            ]


async def _newest(
    context: Context, conversation_id: str, newest: int, after_seq: int, include_hidden: bool
) -> MessagePage:
    """The newest rows (after ``after_seq``), and whether older ones (after it) exist."""
    window = await context.runtime.store.window(conversation_id, limit=newest)
    kept = [row for row in window.rows if (row.seq or 0) > after_seq]
    cut = len(kept) < len(window.rows)  # older rows are all at or before after_seq
    gap = not kept or (kept[0].seq or 0) > after_seq + 1
    older = (window.more or window.summary is not None) and not cut and gap
    tail = [row for row in kept if include_hidden or not row.hidden]
    return MessagePage(
        messages=[MessageOut.of(row) for row in tail], next_after_seq=None, older=older
    )
