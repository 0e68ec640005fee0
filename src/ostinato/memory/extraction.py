"""After the turn: facts worth keeping are extracted from the finished exchange.

A cheap model call reads the user's message and the assistant's final answer and lists
the durable facts they contain about the user (preferences, people, plans). Each new one
is remembered in the conversation's memory scope; one already known (an identical text
among the top recall hits) is skipped. It writes memory only, never the conversation.

The runtime runs it in the background after a turn ends ``end_turn``, keeps a reference
to the task, and finishes or cancels it at shutdown. After a turn that took in content
from outside the conversation (a fetched page, a file, a tool's output) it reads the
user's message alone: the answer may repeat what that content said.
"""

from __future__ import annotations

import json
import logging
import re

from ostinato.errors import ModelError, OstinatoError
from ostinato.memory.facts import Memory, scope_for
from ostinato.messages import Message, TextBlock
from ostinato.models.assembly import complete
from ostinato.models.base import Model, ModelRequest
from ostinato.store.base import Conversation

log = logging.getLogger("ostinato.memory")

EXTRACT_PROMPT = (
    "You pick out facts worth remembering about the user from one exchange of a chat: "
    "lasting preferences, facts about them, the people and things in their life, their "
    "plans. Skip small talk, questions, and anything only true for this moment. Write "
    "each fact so it makes sense on its own, in the third person. Answer with a JSON "
    'array, e.g. [{"fact": "Ann prefers tea to coffee", "subject": "drinks"}], or [] '
    "when there is nothing worth keeping."
)
MAX_FACTS = 5


class FactExtractor:
    def __init__(self, model: Model, memory: Memory, *, timeout: float = 60.0) -> None:
        self.model = model
        self.memory = memory
        self.timeout = timeout

    async def __call__(
        self,
        *,
        conversation_id: str,
        owner: str | None,
        turn_id: str,
        user: Message,
        answer: Message | None,
        conversation: Conversation | None = None,  # not needed: the exchange is all it reads
    ) -> int:
        """Extract and store; returns how many facts were written. With no ``answer``
        (the turn took in content from outside the conversation), the user's message
        alone is read."""
        if not user.text.strip() or (answer is not None and not answer.text.strip()):
            return 0
        exchange = f"User: {user.text}"
        if answer is not None:
            exchange += f"\n\nAssistant: {answer.text}"
        request = ModelRequest(
            system=EXTRACT_PROMPT,
            messages=(Message("user", (TextBlock(exchange[:12_000]),)),),
            tool_choice="none",
            max_tokens=600,
        )
        try:
            reply = await complete(self.model, request, deadline=self.timeout, what="extraction")
            text = reply.message.text
        except ModelError as exc:
            log.info("fact extraction skipped: %s", exc)
            return 0
        scope = scope_for(owner, conversation_id)
        written = 0
        for fact, subject in parse_facts(text)[:MAX_FACTS]:
            known = await self.memory.recall(scope, fact, limit=3, use=False)
            if any(hit.fact.text.strip().lower() == fact.lower() for hit in known):
                continue
            try:
                await self.memory.remember(
                    scope, fact, subject=subject, conversation_id=conversation_id, turn_id=turn_id
                )
            except OstinatoError as exc:  # e.g. memory full: never evict, just stop
                log.info("fact extraction stopped: %s", exc)
                break
            written += 1
        return written


def parse_facts(text: str) -> list[tuple[str, str | None]]:
    """The facts of a model's answer: a JSON array of ``{fact, subject}`` (or strings),
    found even inside prose or a code fence; anything else gives none."""
    match = re.search(r"\[.*\]", text, re.DOTALL)
    if match is None:
        return []
    try:
        items = json.loads(match.group(0))
    except ValueError:
        return []
    facts: list[tuple[str, str | None]] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, str) and item.strip():
            facts.append((item.strip()[:2000], None))
        elif isinstance(item, dict) and isinstance(item.get("fact"), str) and item["fact"].strip():
            subject = item.get("subject")
            facts.append(
                (item["fact"].strip()[:2000], subject if isinstance(subject, str) else None)
            )
    return facts
