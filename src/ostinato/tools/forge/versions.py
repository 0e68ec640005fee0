"""Which version of each forged tool a conversation mounts: the one it started with.

An edit of a tool is a new version. A conversation that is going on is not changed under
its feet by an edit made elsewhere (another conversation, ``/v1/tools/forged``): its
turns keep mounting the version it started with, and a new conversation gets the newest.
What the conversation does itself counts, from its next turn on: a version its own
``create_tool`` call saved (the model fixing its tool) replaces the one it started with.
A removed tool is gone from every conversation from the next turn on; made again, it is
a new tool.

``mounted_version`` is the rule, pure, over one tool's stored versions and the starts of
the conversation's turns; each step in the order it is checked:

1. Only the tool's current life counts: the versions after its newest removed one.
2. The version the conversation started with: the newest version when it first met the
   tool, which is the first of its turns that began after the tool existed (this turn,
   when none did), or its own first version of the tool, if it saved one before that.
3. A version saved in this conversation that is newer than that one wins: the newest
   such.

Everything it reads is stored (versions with their time and conversation, turns with
their start), so the answer is the same after a restart and on every server.
``conversation_versions`` reads what the rule needs, skipping the reads whenever the
newest version is the answer (made in this conversation, or before it began).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ostinato.store.base import Store, utcnow
from ostinato.store.forged import ForgedTool


def mounted_version(
    versions: Sequence[ForgedTool],
    conversation_id: str,
    turn_starts: Sequence[datetime],
    now: datetime,
) -> ForgedTool | None:
    """The version of one tool that ``conversation_id`` mounts (``versions`` oldest
    first, ``turn_starts`` the starts of its turns so far, ``now`` this turn's); None
    when the tool is removed."""
    removed = [i for i, v in enumerate(versions) if v.removed_at is not None]
    life = list(versions[removed[-1] + 1 :] if removed else versions)
    if not life:
        return None
    born = life[0].created_at
    own = [v for v in life if v.conversation_id == conversation_id]
    met = min((t for t in turn_starts if t >= born), default=now)
    if own:
        met = min(met, own[0].created_at)
    started = [v for v in life if v.created_at <= met] or life[:1]
    chosen = started[-1]
    if own and own[-1].version > chosen.version:
        chosen = own[-1]
    return chosen


async def conversation_versions(store: Store, owner: str, conversation_id: str) -> list[ForgedTool]:
    """The version of each of ``owner``'s tools that ``conversation_id`` mounts."""
    newest = await store.forged_tools(owner)
    if not newest:
        return []
    conversation = await store.get_conversation(conversation_id)
    created = conversation.created_at if conversation is not None else None
    now = utcnow()
    starts: list[datetime] | None = None
    chosen: list[ForgedTool] = []
    for tool in newest:
        if tool.conversation_id == conversation_id or (
            created is not None and tool.created_at <= created
        ):
            chosen.append(tool)  # what the rule would say, without reading more
            continue
        if starts is None:
            starts = [t.started_at for t in await store.list_turns(conversation_id)]
        versions = await store.forged_tool_versions(owner, tool.name)
        version = mounted_version(versions, conversation_id, starts, now)
        if version is not None:
            chosen.append(version)
    return chosen
