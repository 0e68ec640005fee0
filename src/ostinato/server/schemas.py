"""The request and response bodies of the HTTP API, as pydantic models.

They describe the wire shapes for validation and for ``/openapi.json``; the JSON of a
message and of a frame is made by ``ostinato.messages`` and ``ostinato.frames`` (one
serializer each), so a row looks the same in ``/messages``, in a turn's response and in a
``message`` frame.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator
from pydantic.config import JsonDict

from ostinato.frames import FRAME_TYPES
from ostinato.messages import Message as StoredMessage
from ostinato.messages import message_to_json
from ostinato.store.base import Conversation

_TIME: JsonDict = {"format": "date-time"}


# --- requests ----------------------------------------------------------------------


class CreateConversationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: StrictStr | None = Field(default=None, max_length=500)
    metadata: dict[str, Any] | None = None


class TurnRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: StrictStr = Field(description="The user's message.")
    client_message_id: StrictStr | None = Field(
        default=None,
        max_length=200,
        description="An id the client chose; stored in the user row's metadata and echoed "
        "on its `message` frame, so a client can match its optimistic bubble.",
    )

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value


# --- responses ---------------------------------------------------------------------


class ConversationOut(BaseModel):
    id: str
    state: Literal["idle", "running", "paused", "failed"]
    created_at: str = Field(json_schema_extra=_TIME)
    updated_at: str = Field(json_schema_extra=_TIME)
    owner: str | None = None
    title: str | None = None
    persona: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, conversation: Conversation) -> ConversationOut:
        return cls(
            id=conversation.id,
            state=conversation.state,
            created_at=conversation.created_at.isoformat(),
            updated_at=conversation.updated_at.isoformat(),
            owner=conversation.owner,
            title=conversation.title,
            persona=conversation.persona,
            metadata=conversation.metadata,
        )


class ConversationPage(BaseModel):
    conversations: list[ConversationOut]
    next: str | None = Field(
        description="Pass as `before` to get the next (older) page; null on the last page."
    )


class MessageOut(BaseModel):
    """A stored row. Blocks are canonical content blocks (see docs/api.md)."""

    id: str | None
    seq: int | None
    role: Literal["user", "assistant", "tool", "system"]
    blocks: list[dict[str, Any]]
    hidden: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    turn_id: str | None = None
    created_at: str | None = Field(json_schema_extra=_TIME)

    @classmethod
    def of(cls, message: StoredMessage) -> MessageOut:
        return cls.model_validate(message_to_json(message))


class MessagePage(BaseModel):
    messages: list[MessageOut]
    next_after_seq: int | None = Field(
        description="When the page was cut by `limit`, pass as `after_seq` for the next page."
    )


class TurnOut(BaseModel):
    turn_id: str
    run_id: str
    stop_reason: str
    messages: list[MessageOut] = Field(
        description="Every row the turn committed, starting with the user message."
    )
    metrics: dict[str, Any]
    error: str | None = None


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    store: str
    detail: str | None = None


class ModelOut(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(description="A `provider:model` id.")
    object: Literal["model"] = "model"
    owned_by: str
    ostinato: dict[str, Any] = Field(
        default_factory=dict, description="`default` and its `reason`, or the `tier` it serves."
    )


class ModelList(BaseModel):
    """OpenAI's list shape, so OpenAI clients can read it; the default model comes first."""

    object: Literal["list"] = "list"
    data: list[ModelOut]

    @classmethod
    def of_default(cls, model_id: str) -> ModelList:
        owner = model_id.split(":", 1)[0]
        return cls(data=[ModelOut(id=model_id, owned_by=owner, ostinato={"default": True})])


class ErrorDetail(BaseModel):
    code: str
    message: str
    details: list[dict[str, Any]] | None = None


class ErrorBody(BaseModel):
    error: ErrorDetail


class FrameOut(BaseModel):
    """The `data:` of one Server-Sent Event; more fields depend on `type`."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(json_schema_extra={"enum": list(FRAME_TYPES)})
    run_id: str
    seq: int


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such conversation."},
    422: {"model": ErrorBody, "description": "The request is malformed."},
}

SSE_RESPONSE: dict[str, Any] = {
    "text/event-stream": {
        # The shape FastAPI gives its own SSE routes (OpenAPI 3.2's itemSchema).
        "itemSchema": {
            "type": "object",
            "required": ["event", "data"],
            "properties": {
                "event": {"type": "string", "enum": list(FRAME_TYPES)},
                "data": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": FrameOut.model_json_schema(),
                },
                "id": {"type": "string", "description": "The row's seq; `message` only."},
            },
        },
        "example": 'event: text.delta\ndata: {"type":"text.delta","run_id":"...","seq":3,'
        '"text":"Hello"}\n\n',
    }
}
