"""Ownership: a thing of another owner is answered exactly like a missing one.

Every route that names a conversation gets it through ``owned``: the same ``NotFound``
(404, same body) whether the conversation does not exist or belongs to someone else, so
an id never tells a caller that it exists.
"""

from __future__ import annotations

from ostinato.errors import NotFound
from ostinato.runtime import Runtime
from ostinato.server.auth.caller import Caller
from ostinato.store.base import Conversation


def missing(conversation_id: str) -> NotFound:
    """The error for an unknown conversation (the runtime's own wording)."""
    return NotFound(f"no conversation with id {conversation_id!r}")


async def owned(runtime: Runtime, caller: Caller, conversation_id: str) -> Conversation:
    """The conversation, if ``caller`` owns it; else ``missing``. An id with a NUL in it
    names none (PostgreSQL cannot even compare it)."""
    if "\x00" in conversation_id:
        raise missing(conversation_id)
    found = await runtime.store.get_conversation(conversation_id)
    if found is None or not caller.owns(found):
        raise missing(conversation_id)
    return found
