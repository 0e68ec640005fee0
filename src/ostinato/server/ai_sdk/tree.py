"""The AI SDK's chat requests that move the conversation's tree (docs/api.md,
"Conversations are trees"):

- ``regenerate()`` (trigger ``regenerate-message``; the messages end at the question):
  a new answer in place of the stored one to that question, on a new branch. A question
  with no stored answer (its turn failed) is asked again, as a new version of itself.
- ``sendMessage({text, messageId})`` (trigger ``submit-message``; the messages end at
  the user message ``messageId``, which is already stored): a new version of that
  message, answered on a new branch; sent with the stored text, a new answer to it.

The stored user row is found by the UI message's id (stored as the row's
``client_message_id``), or else by its place among the user messages. Nothing is
appended: the branch left behind keeps its rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ostinato.errors import InvalidRequest
from ostinato.messages import Message
from ostinato.runtime import Runtime
from ostinato.submissions import Submission


class Asked(Protocol):
    """A UI message, as the route reads it."""

    @property
    def id(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def text(self) -> str: ...


def moves_tree(trigger: str, message_id: str | None, last: Asked) -> bool:
    """Whether the request edits a stored message or asks for an answer again."""
    if trigger == "regenerate-message":
        return True
    return last.role == "user" and message_id is not None and message_id == last.id


async def tree_turn(runtime: Runtime, cid: str, messages: Sequence[Asked]) -> Submission:
    """Start the turn an edit or a regenerate asks for (the messages end at the user
    message concerned)."""
    users = [m for m in messages if m.role == "user" and m.text.strip()]
    if not users:
        raise InvalidRequest("there is no user message to answer")
    asked = users[-1]
    rows = await runtime.store.list_messages(cid, include_hidden=False)
    stored = [r for r in rows if r.role == "user"]
    row = _match(stored, asked, len(users) - 1)
    if row is None or row.seq is None:
        raise InvalidRequest("the message to answer again is not in this conversation")
    answer = _answer_to(rows, row)
    if asked.text.strip() != row.text.strip() or answer is None:
        return await runtime.edit(cid, row.seq, asked.text)
    return await runtime.regenerate(cid, answer)


def _match(stored: list[Message], asked: Asked, place: int) -> Message | None:
    by_id = [r for r in stored if asked.id and r.metadata.get("client_message_id") == asked.id]
    if by_id:
        return by_id[-1]
    return stored[place] if place < len(stored) else None


def _answer_to(rows: list[Message], question: Message) -> int | None:
    """The seq of the last answer a person sees to ``question`` on the branch."""
    found: int | None = None
    after = False
    for row in rows:
        if row is question:
            after = True
        elif after and row.role == "user":
            break
        elif after and row.role == "assistant":
            found = row.seq
    return found
