"""Which conversation a completion continues.

A completion names its conversation, first found wins:

1. the header ``X-Ostinato-Conversation-Id``;
2. the body's ``conversation_id`` (what the ``openai`` SDKs send for
   ``extra_body={"conversation_id": ...}``);
3. ``conversation_id`` nested in a body field named ``extra_body``, ``custom_llm_extra_body``
   or ``ostinato`` (clients that can only nest their own fields);
4. ``metadata.conversation_id``;
5. ``user``, when it is the id of one of the caller's conversations (``user`` usually
   names a person, so any other value is ignored).

A named conversation (1-4) that is not the caller's answers 404, as a missing one does.
With a conversation, its stored history is the truth: only the request's newest user
message is new, and the history the client sends again is not stored twice. Without one,
a new conversation is opened and the messages before the newest are stored in it (user
and assistant text), so the agent sees what the client says was said.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ostinato.messages import Message, TextBlock
from ostinato.runtime import Runtime
from ostinato.server.auth import Caller, owned
from ostinato.server.openai_compat.wire import CONVERSATION_HEADER, ChatRequest, Said
from ostinato.store.base import AppendMessage

NESTS = ("extra_body", "custom_llm_extra_body", "ostinato")


def named_conversation(
    headers: Mapping[str, str], body: ChatRequest
) -> tuple[str | None, str | None]:
    """The conversation id the request names and where it came from, else ``(None,
    None)``."""
    header = headers.get(CONVERSATION_HEADER.lower())
    if header and header.strip():
        return header.strip(), "header"
    if body.conversation_id:
        return body.conversation_id, "body"
    extra: dict[str, Any] = body.model_extra or {}
    for nest in NESTS:
        value = extra.get(nest)
        if isinstance(value, Mapping) and isinstance(value.get("conversation_id"), str):
            return str(value["conversation_id"]), nest
    if body.metadata and isinstance(body.metadata.get("conversation_id"), str):
        return str(body.metadata["conversation_id"]), "metadata"
    if body.user:
        return body.user, "user"
    return None, None


async def conversation_for(
    runtime: Runtime,
    caller: Caller,
    headers: Mapping[str, str],
    body: ChatRequest,
    history: Sequence[Said],
    newest: Said,
) -> str:
    """The conversation this completion continues, or a new one holding ``history``."""
    named, source = named_conversation(headers, body)
    if named is not None and source == "user":
        found = await runtime.store.get_conversation(named)
        if found is not None and caller.owns(found):
            return named
    elif named is not None:
        return (await owned(runtime, caller, named)).id
    title = " ".join(newest.text.split())[:80] or None
    conversation = await runtime.create_conversation(
        owner=caller.owner, title=title, metadata={"surface": "openai"}
    )
    rows = [
        AppendMessage(conversation.id, Message(said.role, (TextBlock(said.text),)))
        for said in history
        if said.text.strip()
    ]
    if rows:
        await runtime.store.write(*rows)
    return conversation.id
