"""The bodies of ``/v1/conversations`` and ``/v1/search``: a conversation, a page of them,
what creating or changing one takes, and what a search finds."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator
from pydantic.config import JsonDict

from ostinato.server.schemas import PlainText, not_null, refuse_null
from ostinato.store.base import Conversation
from ostinato.store.search import SearchHit

_TIME: JsonDict = {"format": "date-time"}


class CreateConversationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: PlainText | None = Field(default=None, max_length=500)
    metadata: dict[str, Any] | None = None


class UpdateConversationRequest(BaseModel):
    """The settings to change; a field left out stays as it is, `null` clears it
    (`pinned` and `archived` are true or false, never null)."""

    model_config = ConfigDict(extra="forbid")

    title: PlainText | None = Field(default=None, max_length=500)
    metadata: dict[str, Any] | None = None
    persona: PlainText | None = Field(
        default=None, max_length=64, description="The persona its turns are routed to."
    )
    model: PlainText | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="A tier or a `provider:model` id that answers its turns.",
    )
    pinned: StrictBool | None = Field(
        default=None,
        description="Kept at the top of the list (`pinned` in the list's answers).",
        json_schema_extra=not_null(),
    )
    archived: StrictBool | None = Field(
        default=None,
        description="Out of the default list (`GET /v1/conversations?archived=true` lists"
        " these); false brings it back.",
        json_schema_extra=not_null(),
    )

    _not_null = field_validator("pinned", "archived", mode="before")(refuse_null)


class ConversationOut(BaseModel):
    id: str
    state: Literal["idle", "running", "paused", "failed"]
    created_at: str = Field(json_schema_extra=_TIME)
    updated_at: str = Field(json_schema_extra=_TIME)
    owner: str | None = None
    title: str | None = None
    persona: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    pinned: bool = False
    archived_at: str | None = Field(
        default=None, description="When it was archived; null if it is not."
    )

    @classmethod
    def of(cls, conversation: Conversation) -> ConversationOut:
        archived = conversation.archived_at
        return cls(
            id=conversation.id,
            state=conversation.state,
            created_at=conversation.created_at.isoformat(),
            updated_at=conversation.updated_at.isoformat(),
            owner=conversation.owner,
            title=conversation.title,
            persona=conversation.persona,
            metadata=conversation.metadata,
            pinned=conversation.pinned,
            archived_at=None if archived is None else archived.isoformat(),
        )


class ConversationPage(BaseModel):
    conversations: list[ConversationOut]
    next: str | None = Field(
        description="Pass as `before` to get the next (older) page; null on the last page."
    )


class SnippetPartOut(BaseModel):
    text: str
    match: bool = Field(description="Whether this part is a word the search matched.")


class SearchHitOut(BaseModel):
    """A message (or, with `seq` null, the title) of one of the caller's conversations."""

    conversation_id: str
    conversation_title: str | None
    archived: bool = Field(description="Whether the conversation is archived.")
    message_id: str | None = Field(description="Null when the title matched.")
    seq: int | None = Field(description="The row's `seq`: where to open the conversation.")
    role: str | None
    created_at: str | None = Field(json_schema_extra=_TIME)
    snippet: list[SnippetPartOut] = Field(
        description="Words around the matches; joined, the parts are the snippet's text."
    )
    score: float = Field(description="The engine's rank; higher is better.")

    @classmethod
    def of(cls, hit: SearchHit) -> SearchHitOut:
        return cls(
            conversation_id=hit.conversation_id,
            conversation_title=hit.conversation_title,
            archived=hit.archived,
            message_id=hit.message_id,
            seq=hit.seq,
            role=hit.role,
            created_at=None if hit.created_at is None else hit.created_at.isoformat(),
            snippet=[SnippetPartOut(text=p.text, match=p.match) for p in hit.snippet],
            score=hit.score,
        )


class SearchResults(BaseModel):
    hits: list[SearchHitOut]
