"""The messages a WebSocket client sends (``routes/websocket.py``), as pydantic models:
a user message, a card's answer, an approval's decision, a cancel."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, TypeAdapter, field_validator

from ostinato.server.schemas import (
    _CLIENT_MESSAGE_ID,
    _POLICY,
    NOT_BLANK,
    DecisionRequest,
    PlainText,
    Policy,
    ToolResponse,
    _not_blank,
)


class WsMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["message"]
    text: StrictStr = Field(json_schema_extra=NOT_BLANK)
    client_message_id: PlainText | None = _CLIENT_MESSAGE_ID
    policy: Policy = _POLICY

    @field_validator("text")
    @classmethod
    def _text(cls, value: str) -> str:
        _not_blank(value)
        return value


class WsToolResponse(ToolResponse):
    type: Literal["tool_response"]


class WsApproval(DecisionRequest):
    type: Literal["approval"]
    approval_id: StrictStr = Field(min_length=1, max_length=200)


class WsCancel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["cancel"]


ClientMessage = Annotated[
    WsMessage | WsToolResponse | WsApproval | WsCancel, Field(discriminator="type")
]
CLIENT_MESSAGE: TypeAdapter[WsMessage | WsToolResponse | WsApproval | WsCancel] = TypeAdapter(
    ClientMessage
)
