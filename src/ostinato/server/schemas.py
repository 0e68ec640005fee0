"""The request and response bodies of the HTTP API, as pydantic models.

They describe the wire shapes for validation and for ``/openapi.json``; the JSON of a
message and of a frame is made by ``ostinato.messages`` and ``ostinato.frames`` (one
serializer each), so a row looks the same in ``/messages``, in a turn's response and in a
``message`` frame.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    field_validator,
    model_validator,
)
from pydantic.config import JsonDict

from ostinato.approvals import Approval, Grant
from ostinato.frames import FRAME_TYPES
from ostinato.messages import Message as StoredMessage
from ostinato.messages import message_to_json

_TIME: JsonDict = {"format": "date-time"}


# --- requests ----------------------------------------------------------------------


NO_NUL = r"^[^\x00]*$"  # a NUL cannot be stored in a text column (PostgreSQL refuses it)
# White space as ``str.strip`` sees it, spelled out (regex engines disagree on ``\s``).
SPACE = r"\t\n\x0b\x0c\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
NOT_BLANK: JsonDict = {"pattern": f"[^{SPACE}]"}  # some text besides white space
SEQ_MAX = 2**31 - 1  # a row's seq is a 32-bit column: no seq is larger
GRANT_SECONDS_MAX = 10 * 366 * 24 * 3600  # a remembered grant lasts ten years at most


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    return value


PlainText = Annotated[
    StrictStr, AfterValidator(_no_nul), Field(json_schema_extra={"pattern": NO_NUL})
]


def not_null(extra: JsonDict | None = None) -> Callable[[JsonDict], None]:
    """A field's ``json_schema_extra`` for an optional field that may be left out but not
    sent as null: the schema keeps only the non-null type (plus ``extra``). The field
    refuses an explicit null with a ``mode="before"`` validator."""

    def edit(schema: JsonDict) -> None:
        options = schema.pop("anyOf", None)
        if isinstance(options, list):
            for option in options:
                if isinstance(option, dict) and option.get("type") != "null":
                    schema.update(option)
        schema.pop("default", None)
        schema.update(extra or {})

    return edit


def refuse_null(value: object) -> object:
    if value is None:  # a null that was sent: the field is to be left out instead
        raise ValueError("must not be null (leave it out)")
    return value


Policy = Literal["queue", "supersede", "reject", "steer"]
Remember = Literal["none", "exact", "family"]

_CLIENT_MESSAGE_ID: Any = Field(
    default=None,
    max_length=200,
    description="An id the client chose; stored in the user row's metadata and echoed "
    "on its `message` frame, so a client can match its optimistic bubble.",
)
_POLICY: Any = Field(
    default="queue",
    description="What happens when a turn is already running: `queue` (run after it), "
    "`supersede` (cancel it, then run), `reject` (409) or `steer` (the running turn takes "
    "the message at its next step, before its next model call; if it makes none, the "
    "message runs after it as with `queue`).",
)


def _not_blank(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise ValueError("must not be empty")
    return value


class ToolResponse(BaseModel):
    """The answer to a question card (an `input.requested` frame)."""

    model_config = ConfigDict(extra="forbid")

    tool_use_id: StrictStr = Field(min_length=1, max_length=200)
    result: Any = Field(description="Any JSON: the card's answer, as the tool's result.")


_WITH_TOOL_RESPONSE = ("text", "client_message_id", "policy", "agent", "instructions")


class TurnRequest(BaseModel):
    """A user message (`text`) or the answer to a question card (`tool_response`)."""

    model_config = ConfigDict(
        extra="forbid",
        # The rules of _one_input, for clients that validate against the schema.
        json_schema_extra={
            "oneOf": [
                {"required": ["text"], "not": {"required": ["tool_response"]}},
                {
                    "required": ["tool_response"],
                    "not": {"anyOf": [{"required": [name]} for name in _WITH_TOOL_RESPONSE]},
                },
            ]
        },
    )

    text: StrictStr | None = Field(
        default=None, description="The user's message.", json_schema_extra=not_null(NOT_BLANK)
    )
    tool_response: ToolResponse | None = Field(
        default=None,
        description="Answer the question card that waits, and resume.",
        json_schema_extra=not_null(),
    )
    client_message_id: PlainText | None = _CLIENT_MESSAGE_ID
    policy: Policy = _POLICY
    agent: PlainText | None = Field(
        default=None,
        max_length=200,
        description="The agent (skill id or persona) that answers, instead of the "
        "router's pick; an unknown one is a 404.",
    )
    instructions: PlainText | None = Field(
        default=None,
        max_length=20_000,
        description="Added to the agent's system prompt for this turn, if the agent's "
        "`request_instructions` allows it (else ignored).",
    )
    cancel_on_disconnect: StrictBool = Field(
        default=False,
        description="With `Accept: text/event-stream`: cancel this turn when the client "
        "goes away. By default a turn runs on without its client.",
    )

    _not_null = field_validator("text", "tool_response", mode="before")(refuse_null)

    @field_validator("text")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        return _not_blank(value)

    @model_validator(mode="after")
    def _one_input(self) -> TurnRequest:
        if self.text is None and self.tool_response is None:
            raise ValueError("text is required (or tool_response, to answer a question card)")
        if self.text is not None and self.tool_response is not None:
            raise ValueError("send either text or tool_response, not both")
        if self.tool_response is not None:
            for name in ("client_message_id", "policy", "agent", "instructions"):
                if name in self.model_fields_set:
                    raise ValueError(f"{name} goes with text, not with tool_response")
        return self


class DecisionRequest(BaseModel):
    """A person's decision on an approval (an `approval.requested` frame)."""

    decision: Literal["approve", "decline"]
    remember: Remember = Field(
        default="none",
        description="With `approve`: also allow this exact call (`exact`) or every call of "
        "its family (`family`) from now on.",
    )
    expires_in_s: float | None = Field(
        default=None,
        gt=0,
        le=GRANT_SECONDS_MAX,
        description="The remembered grant expires after this many seconds.",
    )
    model_config = ConfigDict(
        extra="forbid",
        # The rules of _remember_an_approval, for clients that validate against the schema.
        json_schema_extra={
            "allOf": [
                {
                    "if": {"properties": {"decision": {"const": "decline"}}},
                    "then": {"properties": {"remember": {"const": "none"}}},
                },
                {
                    "if": {
                        "anyOf": [
                            {"not": {"required": ["remember"]}},
                            {"properties": {"remember": {"const": "none"}}},
                        ]
                    },
                    "then": {"properties": {"expires_in_s": {"type": "null"}}},
                },
            ]
        },
    )

    @model_validator(mode="after")
    def _remember_an_approval(self) -> DecisionRequest:
        if self.remember != "none" and self.decision != "approve":
            raise ValueError("remember goes with decision 'approve'")
        if self.expires_in_s is not None and self.remember == "none":
            raise ValueError("expires_in_s goes with remember 'exact' or 'family'")
        return self


# --- responses ---------------------------------------------------------------------


class SiblingRef(BaseModel):
    seq: int = Field(description="The first row of this version.")
    leaf: int = Field(description="Its newest leaf: where a switch to it goes.")
    current: bool = Field(default=False, description="It is on the current branch.")


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
    parent_seq: int | None = Field(
        default=None,
        description="The row this one follows in the conversation's tree (0: none, it is a "
        "first row); the row before it unless a branch was moved there (docs/api.md).",
    )
    siblings: list[SiblingRef] | None = Field(
        default=None,
        description="In `/messages` only, where the conversation forks: the versions of "
        "this point of the conversation, oldest first (this row's own branch among them), "
        "each a row and the leaf a switch to it goes to (`PUT .../branch`).",
    )

    @classmethod
    def of(cls, message: StoredMessage) -> MessageOut:
        return cls.model_validate(message_to_json(message))


class TurnOut(BaseModel):
    turn_id: str
    run_id: str
    stop_reason: str
    messages: list[MessageOut] = Field(
        description="Every row the turn committed, starting with the user message (or, "
        "for a card's answer, the tool row that carries it)."
    )
    metrics: dict[str, Any]
    error: str | None = None
    queued_position: int | None = Field(
        default=None,
        description="When the message waited behind another turn: its place in the "
        "conversation's queue when it arrived; null when it ran at once.",
    )


def _time(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


class ApprovalOut(BaseModel):
    """One approval: a request for consent and, once decided, how it ended."""

    id: str
    conversation_id: str
    turn_id: str
    tool_use_id: str
    tool: str
    arguments: dict[str, Any]
    arguments_hash: str
    risk: str
    family: str | None
    status: Literal["pending", "decided"]
    ending: Literal["APPROVED", "DECLINED", "UNANSWERED", "UNREACHABLE", "DISMISSED"] | None
    requested_at: str = Field(json_schema_extra=_TIME)
    decided_at: str | None = Field(json_schema_extra=_TIME)
    decided_by: str | None
    remember: Remember

    @classmethod
    def of(cls, approval: Approval) -> ApprovalOut:
        return cls(
            id=approval.id,
            conversation_id=approval.conversation_id,
            turn_id=approval.turn_id,
            tool_use_id=approval.tool_use_id,
            tool=approval.tool,
            arguments=approval.arguments,
            arguments_hash=approval.arguments_hash,
            risk=approval.risk,
            family=approval.family,
            status=approval.status,
            ending=approval.ending.value if approval.ending is not None else None,
            requested_at=approval.requested_at.isoformat(),
            decided_at=_time(approval.decided_at),
            decided_by=approval.decided_by,
            remember=approval.remember,
        )


class ApprovalList(BaseModel):
    approvals: list[ApprovalOut] = Field(description="Oldest first: the audit trail.")


class GrantOut(BaseModel):
    """A remembered approval: one exact call, or a tool's family of calls."""

    id: str
    owner: str | None
    conversation_id: str | None
    tool: str
    scope: Literal["exact", "family"]
    key: str = Field(description="The arguments hash (`exact`) or the family (`family`).")
    created_at: str = Field(json_schema_extra=_TIME)
    expires_at: str | None = Field(json_schema_extra=_TIME)
    approval_id: str | None

    @classmethod
    def of(cls, grant: Grant) -> GrantOut:
        return cls(
            id=grant.id,
            owner=grant.owner,
            conversation_id=grant.conversation_id,
            tool=grant.tool,
            scope=grant.scope,
            key=grant.key,
            created_at=grant.created_at.isoformat(),
            expires_at=_time(grant.expires_at),
            approval_id=grant.approval_id,
        )


class GrantList(BaseModel):
    grants: list[GrantOut] = Field(description="The active grants, oldest first.")


class CancelOut(BaseModel):
    cancelled_turn: str | None = Field(description="The running turn that was cancelled.")
    dismissed: list[str] = Field(
        description="The tool_use ids of the cards and approvals a paused conversation "
        "was waiting on, now resolved (cards dismissed, approvals declined)."
    )


class ErrorDetail(BaseModel):
    code: str
    message: str
    details: list[dict[str, Any]] | None = Field(
        default=None,
        description="On validation errors: each problem and where it is; on "
        "`model_not_allowed`, `[{choosable: [...]}]`.",
    )
    limit_bytes: int | None = Field(
        default=None, description="On `too_large`: the limit the body was over."
    )
    kind: Literal["message", "metadata", "upload", "import"] | None = Field(
        default=None, description="On `too_large`: which kind of body, and so which limit."
    )


class ErrorBody(BaseModel):
    error: ErrorDetail


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such conversation."},
    422: {"model": ErrorBody, "description": "The request is malformed."},
}
MODEL_NOT_ALLOWED: dict[int | str, dict[str, Any]] = {
    403: {"model": ErrorBody, "description": "A model callers may not choose here."}
}
CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorBody, "description": "The request clashes with the current state."}
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
                    "contentSchema": {"$ref": "#/components/schemas/Frame"},
                },
                "id": {"type": "string", "description": "The row's seq; `message` only."},
            },
        },
        "example": 'event: text.delta\ndata: {"type":"text.delta","run_id":"...","seq":3,'
        '"text":"Hello"}\n\n',
    }
}
