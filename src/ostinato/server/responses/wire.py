"""The Responses API's wire format, as ``/v1/responses`` reads and writes it.

Read: the request (``ResponseRequest``): its ``input`` reduced to what a conversation
holds (``Said``: the text of user and assistant messages; system and developer
messages are instructions) and the approval answers it carries (``Answer``: an
``mcp_approval_response`` item). Items a stateless client sends back from earlier
output (``mcp_call``, ``mcp_approval_request``, ``mcp_list_tools``, ``reasoning``) are
what the conversation already holds and are passed over. What ostinato cannot do is
refused with a 400 naming the parameter (``REFUSED``, ``check``); the parameters in
``IGNORED`` tune a model's sampling or OpenAI's own service and are accepted and left
alone.

Written: the response object (``Envelope``) and errors in OpenAI's shape,
``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ostinato.messages import JSON
from ostinato.server.openai_error import OpenAIError
from ostinato.server.responses.events import SERVER_LABEL, Status

DEFAULT_AGENT = "ostinato"
IGNORED = frozenset(
    {
        "temperature",
        "top_p",
        "max_output_tokens",
        "parallel_tool_calls",
        "include",
        "user",
        "safety_identifier",
        "prompt_cache_key",
        "prompt_cache_retention",
        "service_tier",
        "truncation",
        "reasoning",
        "stream_options",
        "top_logprobs",
    }
)
REFUSED = {
    "prompt": "stored prompts are not supported: send input and instructions",
    "background_options": "background_options is not supported",
    "context_management": "context_management is not supported: the agent manages its "
    "own context (docs/context.md)",
    "max_tool_calls": "max_tool_calls is not supported: the agent's budget bounds its calls",
    "image": "image options are not supported",
    "moderation": "moderation is not supported",
    "access_programs": "access_programs is not supported",
    "prompt_cache_options": "prompt_cache_options is not supported",
}
ECHOES = frozenset({"mcp_call", "mcp_approval_request", "mcp_list_tools", "reasoning"})


class ResponsesError(OpenAIError):
    """An error of the Responses API, in OpenAI's shape."""


def bad(message: str, param: str | None = None, code: str | None = None) -> ResponsesError:
    return ResponsesError(400, message, code=code, param=param)


class ResponseRequest(BaseModel):
    """The fields this endpoint reads; the others are checked by ``check``."""

    model_config = ConfigDict(extra="allow")

    model: str = DEFAULT_AGENT
    input: str | list[Any] | None = None
    instructions: str | None = None
    previous_response_id: str | None = None
    conversation: str | dict[str, Any] | None = None
    stream: bool | None = False
    background: bool | None = False
    store: bool | None = True
    metadata: dict[str, str] | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    text: dict[str, Any] | None = None

    @classmethod
    def read(cls, raw: bytes) -> ResponseRequest:
        try:
            body = json.loads(raw or b"null")
        except (ValueError, UnicodeDecodeError) as exc:
            raise bad(f"the body is not valid JSON ({exc})") from None
        if not isinstance(body, dict):
            raise bad("the body must be a JSON object")
        try:
            request = cls.model_validate(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            param = ".".join(str(p) for p in first["loc"]) or None
            raise bad(f"{param}: {first['msg']}", param) from None
        request.check()
        return request

    @property
    def conversation_id(self) -> str | None:
        if isinstance(self.conversation, dict):
            found = self.conversation.get("id")
            if not isinstance(found, str):
                raise bad("conversation.id must be a string", "conversation")
            return found
        return self.conversation

    def check(self) -> None:
        extra = self.model_extra or {}
        for name, value in extra.items():
            if name in IGNORED or value is None:
                continue
            why = REFUSED.get(name)
            raise bad(why or f"unknown parameter {name!r}", name, "unsupported_parameter")
        if self.previous_response_id and self.conversation is not None:
            raise bad(
                "previous_response_id and conversation cannot both be given",
                "previous_response_id",
            )
        if self.background and self.store is False:
            raise bad("background responses must be stored (store: true)", "store")
        self._check_tools()
        fmt = (self.text or {}).get("format")
        if isinstance(fmt, dict) and fmt.get("type") not in (None, "text"):
            raise bad("structured output (text.format) is not supported", "text.format")
        if self.tool_choice not in (None, "auto"):
            raise bad(
                "tool_choice other than 'auto' is not supported: the agent chooses its tools",
                "tool_choice",
            )
        if self.input is None or self.input == "" or self.input == []:
            raise bad("input must not be empty", "input")

    def _check_tools(self) -> None:
        for i, tool in enumerate(self.tools or []):
            mine = isinstance(tool, dict) and tool.get("type") == "mcp"
            if mine and tool.get("server_label") == SERVER_LABEL:
                continue  # the agent's own tools, named the way a client can
            kind = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
            raise bad(
                f"tools.{i}: {kind!r} tools are not supported: the agent runs its own tools "
                f"on the server (name them as an 'mcp' tool with server_label "
                f"'{SERVER_LABEL}'; see docs/clients.md)",
                f"tools.{i}",
                "tools_not_supported",
            )


@dataclass(frozen=True, slots=True)
class Said:
    role: Literal["user", "assistant", "system"]
    text: str


@dataclass(frozen=True, slots=True)
class Answer:
    """An ``mcp_approval_response``: the approval its request item names, and the
    decision."""

    approval_item: str
    approve: bool


@dataclass(frozen=True, slots=True)
class Input:
    said: list[Said] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)

    @property
    def instructions(self) -> str | None:
        texts = [s.text for s in self.said if s.role == "system" and s.text.strip()]
        return "\n\n".join(texts) if texts else None

    @property
    def talk(self) -> list[Said]:
        return [s for s in self.said if s.role != "system"]


def read_input(value: str | list[Any] | None) -> Input:
    """The request's input (see the module's docstring); ``ResponsesError`` for an item
    a conversation cannot hold."""
    if isinstance(value, str):
        return Input([Said("user", value)])
    said: list[Said] = []
    answers: list[Answer] = []
    for i, item in enumerate(value or []):
        where = f"input.{i}"
        if not isinstance(item, dict):
            raise bad(f"{where} must be an object", where)
        kind = item.get("type")
        if kind == "mcp_approval_response":
            answers.append(_answer(item, where))
        elif kind in ECHOES:
            continue
        elif kind in (None, "message"):
            if answers:
                raise bad(f"{where}: send a new message in a request of its own", where)
            said.append(_message(item, where))
        else:
            code = "tools_not_supported" if kind and "call" in str(kind) else None
            raise bad(f"{where}: items of type {kind!r} are not supported", where, code)
    return Input(said, answers)


def _answer(item: dict[str, Any], where: str) -> Answer:
    request_id, approve = item.get("approval_request_id"), item.get("approve")
    if not isinstance(request_id, str) or not isinstance(approve, bool):
        raise bad(f"{where}: approval_request_id (a string) and approve (a bool) are needed", where)
    return Answer(request_id, approve)


def _message(item: dict[str, Any], where: str) -> Said:
    role = item.get("role")
    content = item.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in ("input_text", "output_text", "text"):
                raise bad(
                    f"{where}.content.{j}: only text parts are supported (got {kind!r})",
                    f"{where}.content",
                )
            parts.append(str(part.get("text", "")))
        text = "".join(parts)
    else:
        raise bad(f"{where}.content must be a string or a list of parts", f"{where}.content")
    if role in ("user", "assistant"):
        return Said(role, text)
    if role in ("system", "developer"):
        return Said("system", text)
    raise bad(f"{where}.role: unknown role {role!r}", f"{where}.role")


@dataclass(frozen=True, slots=True)
class Envelope:
    """What every copy of one response object shares; ``__call__`` makes it whole."""

    id: str
    model: str
    created_at: int
    conversation_id: str | None
    previous_response_id: str | None = None
    instructions: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    background: bool = False
    store: bool = True
    tools: list[Any] = field(default_factory=list)

    @classmethod
    def now(cls, response_id: str, request: ResponseRequest, cid: str | None) -> Envelope:
        return cls(
            response_id,
            request.model,
            int(time.time()),
            cid,
            request.previous_response_id,
            request.instructions,
            dict(request.metadata or {}),
            bool(request.background),
            request.store is not False,
            list(request.tools or []),
        )

    def to_json(self) -> JSON:
        return {
            "model": self.model,
            "created_at": self.created_at,
            "conversation_id": self.conversation_id,
            "previous_response_id": self.previous_response_id,
            "instructions": self.instructions,
            "metadata": self.metadata,
            "background": self.background,
            "store": self.store,
            "tools": self.tools,
        }

    @classmethod
    def of(cls, response_id: str, data: JSON) -> Envelope:
        return cls(response_id, **data)

    def __call__(self, status: Status, output: list[JSON], extra: JSON) -> JSON:
        done = status in ("completed", "failed", "cancelled", "incomplete")
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": self.background,
            "completed_at": int(time.time()) if status == "completed" else None,
            "conversation": {"id": self.conversation_id} if self.conversation_id else None,
            "error": extra.get("error"),
            "incomplete_details": None,
            "instructions": self.instructions,
            "max_output_tokens": None,
            "metadata": self.metadata,
            "model": self.model,
            "output": [dict(item) for item in output],
            "parallel_tool_calls": True,
            "previous_response_id": self.previous_response_id,
            "reasoning": {"effort": None, "summary": None},
            "store": self.store,
            "temperature": None,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": self.tools,
            "top_p": None,
            "truncation": "disabled",
            "usage": extra.get("usage") if done else None,
            "user": None,
        }
