"""Conversation titles: made once, after the first answer, unless the person gave one.

``Titler`` is after-turn work (``loop.begin.AfterTurn``). When a turn ends with an answer
in a conversation whose title is still automatic, it asks a model for one (the
conversation's own, or a small one: ``[data] titles``). A title is automatic when there
is none, or when it is the first line of the conversation's first message (what a client
such as the chat page names a new conversation by, until a better title is made). Without
a model (``titles = "off"``, or the offline model, which only echoes), or when the model
fails, a conversation with no title at all is named by the first words of the person's
message (``first_words``); one the client named keeps its name. A title is written only
if the conversation's title is still the one read
(``UpdateConversation(expect_title=...)``), so a rename made meanwhile is never
overwritten, and a title once made by the model is not automatic any more: it is made
once. The title read is the one the turn began with (``AfterTurn``'s ``conversation``;
not read again: that write is the check), so a rename made during the turn wins too; at
worst, a model is asked for a title that is then not written. ``AfterTurns`` runs
several after-turn works one after another.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from ostinato.errors import OstinatoError
from ostinato.loop.opening import AfterTurn
from ostinato.messages import Message, TextBlock
from ostinato.models.assembly import complete
from ostinato.models.base import Model, ModelRequest
from ostinato.store.accounts import UpdateConversation
from ostinato.store.base import Conversation, Store

OFFLINE = "offline:"  # the offline model's name (models.offline): it makes no titles
log = logging.getLogger(__name__)

TITLE_CHARS = 80  # the longest title made
FIRST_WORDS = 8  # of the person's first message, when no model titles it
TITLE_PROMPT = (
    "Write a title for the conversation below: at most six words, in the language the "
    "person wrote in, naming what it is about. Answer with the title alone: no quotes, "
    "no full stop, no preface."
)
_PREFACE = re.compile(r"^\s*(title\s*:\s*)", re.IGNORECASE)
_QUOTES = "\"'*#`\u201c\u201d\u2018\u2019"  # and curly quotes, around a title


def first_words(text: str, words: int = FIRST_WORDS) -> str | None:
    """The first ``words`` words of ``text`` (its first line), at most ``TITLE_CHARS``
    characters; None when it has none."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    title = " ".join(line.split()[:words])
    if len(title) > TITLE_CHARS:
        title = title[: TITLE_CHARS - 1].rstrip() + "…"
    return title or None


def cleaned(answer: str) -> str | None:
    """A model's answer as a title: its first line without quotes, a "Title:" preface or
    a final full stop, at most ``TITLE_CHARS`` characters; None when nothing is left."""
    line = next((ln for ln in answer.splitlines() if ln.strip()), "")
    line = _PREFACE.sub("", line).strip().strip(_QUOTES).strip()
    line = line.removesuffix(".").strip()
    line = "".join(ch for ch in line if ch >= " " and ch != "\x7f")
    if len(line) > TITLE_CHARS:
        line = line[: TITLE_CHARS - 1].rstrip() + "…"
    return line or None


ModelFor = Callable[[Conversation], Model]


class Titler:
    """Titles an untitled conversation after a turn that answered (``AfterTurn``).

    ``model_for`` picks the model that writes the title (None: the first words only).
    """

    def __init__(
        self, store: Store, model_for: ModelFor | None = None, *, timeout: float = 30.0
    ) -> None:
        self.store = store
        self.model_for = model_for
        self.timeout = timeout

    async def __call__(
        self,
        *,
        conversation_id: str,
        owner: str | None,
        turn_id: str,
        user: Message,
        answer: Message | None,
        conversation: Conversation | None = None,
    ) -> str | None:
        """The title written, or None (the title is not automatic, or there is nothing
        to make one of). ``conversation``: the row the turn began with, whose title the
        title is made against (read here when not given)."""
        if conversation is None or conversation.id != conversation_id:
            conversation = await self.store.get_conversation(conversation_id)
        if conversation is None or not await self._automatic(conversation):
            return None
        title = await self._asked(conversation, user, answer)
        if title is None and conversation.title is None:
            title = first_words(user.text)
        if title is None or title == conversation.title:
            return None
        op = UpdateConversation(
            conversation_id, title=title, expect_title=conversation.title, made=True
        )
        (written,) = await self.store.write(op)
        return title if written.title == title else None

    async def _automatic(self, conversation: Conversation) -> bool:
        if conversation.title is None:
            return True
        if self.model_for is None:
            return False
        first = await self.store.list_messages(conversation.id, limit=4, include_hidden=False)
        said = next((m.text for m in first if m.role == "user"), "")
        line = next((ln for ln in said.splitlines() if ln.strip()), "").strip()
        return bool(line) and conversation.title.strip() == line[:TITLE_CHARS].strip()

    async def _asked(
        self, conversation: Conversation, user: Message, answer: Message | None
    ) -> str | None:
        if self.model_for is None or not user.text.strip():
            return None
        exchange = f"Person: {user.text[:4000]}"
        if answer is not None and answer.text.strip():
            exchange += f"\n\nAssistant: {answer.text[:4000]}"
        request = ModelRequest(
            system=TITLE_PROMPT,
            messages=(Message("user", (TextBlock(exchange),)),),
            tool_choice="none",
            max_tokens=40,
        )
        try:
            model = self.model_for(conversation)
            if str(getattr(model, "name", "")).startswith(OFFLINE):
                return None  # it echoes what it is sent: the first words are a better title
            reply = await complete(model, request, deadline=self.timeout, what="title")
        except OstinatoError as exc:
            log.info("title left to the first words: %s", exc)
            return None
        return cleaned(reply.message.text)


class AfterTurns:
    """Several after-turn works, run one after another; one that fails is logged and the
    next still runs. Returns what each returned (None for one that failed)."""

    def __init__(self, works: Sequence[AfterTurn]) -> None:
        self.works = tuple(works)

    async def __call__(self, **kw: Any) -> list[Any]:
        done: list[Any] = []
        for work in self.works:
            try:
                done.append(await work(**kw))
            except Exception:
                log.exception("after-turn work %r failed", type(work).__name__)
                done.append(None)
        return done
