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

A client that resends a history which lacks a message the conversation's current branch
holds has edited it (``edited_row``): the newest message is a new version of the first
such stored message, answered on a new branch, instead of being appended after it. Only
the user messages are compared, in order: a client resends several assistant messages
joined as one and sends answers to approvals (``yes``) that are never rows, so a resent
user message the branch does not hold is passed over. A history that holds none of the
branch's first message (none at all, or only its last part) is not an edit.
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


async def edited_row(runtime: Runtime, cid: str, history: Sequence[Said]) -> int | None:
    """The seq of the first user row of the current branch that the resent ``history``
    lacks, when it holds the ones before it (else ``None``: the newest is appended)."""
    resent = [said.text.strip() for said in history if said.role == "user"]
    if not resent:
        return None
    rows = await runtime.store.list_messages(cid, include_hidden=False)
    stored = [row for row in rows if row.role == "user" and row.text.strip()]
    at = 0
    for matched, row in enumerate(stored):
        while at < len(resent) and resent[at] != row.text.strip():
            at += 1
        if at == len(resent):
            return row.seq if matched else None
        at += 1
    return None
