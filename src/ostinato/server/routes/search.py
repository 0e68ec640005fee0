"""``/v1/search``: the caller's conversations searched, as the person types.

Every word of `q` must be in a message (or a conversation's title); the last word, while
it is still being typed (nothing after it), may be the start of a word. Hits are ranked
by the database's full-text engine (``Store.search_messages``) and carry where they are
(`conversation_id`, `seq`), so a client can open the conversation at the row.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from ostinato.server.auth import CurrentCaller
from ostinato.server.context import Context
from ostinato.server.conversation_schemas import SearchHitOut, SearchResults
from ostinato.server.schemas import ERROR_RESPONSES
from ostinato.store.search import SEARCH_LIMIT

router = APIRouter(prefix="/v1/search", tags=["search"])


@router.get("", response_model=SearchResults, responses={422: ERROR_RESPONSES[422]})
async def search(
    context: Context,
    caller: CurrentCaller,
    q: Annotated[
        str,
        Query(
            max_length=1000,
            description="Any text: its words are searched (operators and quotes are"
            " plain text). No words, no hits.",
        ),
    ],
    limit: Annotated[int, Query(ge=1, le=SEARCH_LIMIT)] = 20,
) -> SearchResults:
    """Messages and titles of the caller's conversations (archived ones too) with every
    word of `q`, best first (ranked among the newest 1,000 that match), each with a
    snippet whose matching words are marked."""
    owner = None if caller.sees_everything else caller.owner
    hits = await context.runtime.store.search_messages(q, owner=owner, limit=limit)
    return SearchResults(hits=[SearchHitOut.of(h) for h in hits])
