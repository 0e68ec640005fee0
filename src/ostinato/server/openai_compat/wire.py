"""OpenAI's Chat Completions wire format, as this endpoint reads and writes it.

Read: the request body (``ChatRequest``; unknown fields are kept, since clients nest their
own ids in fields of their own) and its messages, reduced to what a conversation holds:
text of user and assistant messages, and system messages as instructions.

Written: a ``chat.completion`` (not streaming), ``chat.completion.chunk`` events
(streaming: the first carries ``role``, each later one a ``content`` or
``reasoning_content`` delta, the last a ``finish_reason``; with
``stream_options.include_usage`` every chunk has ``usage: null`` and one more chunk with
no choices carries the usage), then ``data: [DONE]``. Errors are OpenAI's shape,
``{"error": {"message", "type", "param", "code"}}``, with its statuses (400 for a bad
request, 404 for an unknown model or conversation).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ostinato.messages import JSON
from ostinato.server.openai_error import TYPES, OpenAIError

CONVERSATION_HEADER = "X-Ostinato-Conversation-Id"
PROGRESS_HEADER = "X-Ostinato-Progress"
DEFAULT_AGENT = "ostinato"


class CompletionError(OpenAIError):
    """An error of Chat Completions, in OpenAI's shape (404 and 409 named as such)."""

    types = TYPES | {404: "not_found_error", 409: "conflict_error"}


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatRequest(BaseModel):
    """The fields this endpoint reads; any other field is accepted and left alone."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[dict[str, Any]]
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[Any] | None = None
    functions: list[Any] | None = None
    metadata: dict[str, Any] | None = None
    user: str | None = None
    conversation_id: str | None = None
    n: int | None = None

    @classmethod
    def read(cls, raw: bytes) -> ChatRequest:
        try:
            body = json.loads(raw or b"null")
        except (ValueError, UnicodeDecodeError) as exc:
            raise CompletionError(400, f"the body is not valid JSON ({exc})") from None
        if not isinstance(body, dict):
            raise CompletionError(400, "the body must be a JSON object")
        try:
            request = cls.model_validate(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            param = ".".join(str(p) for p in first["loc"]) or None
            raise CompletionError(400, f"{param}: {first['msg']}", param=param) from None
        request.check()
        return request

    def check(self) -> None:
        if self.tools or self.functions:
            raise CompletionError(
                400,
                "client-supplied tools are not supported: the agent runs its own tools on the "
                "server and answers in text (see docs/clients.md)",
                param="tools" if self.tools else "functions",
                code="tools_not_supported",
            )
        if self.n not in (None, 1):
            raise CompletionError(400, "only n=1 is supported", param="n")
        if not self.messages:
            raise CompletionError(400, "messages must not be empty", param="messages")


@dataclass(frozen=True, slots=True)
class Said:
    """One message of the request, as a conversation holds it."""

    role: Literal["user", "assistant", "system"]
    text: str


def message_text(message: dict[str, Any], index: int) -> Said:
    """The role and text of one request message; ``CompletionError`` for what a
    conversation cannot hold (a tool message, an image, a malformed entry)."""
    role = message.get("role")
    where = f"messages.{index}"
    if role == "tool" or role == "function":
        raise CompletionError(
            400,
            f"{where}: tool messages are not supported (the agent's tools run on the server)",
            param=where,
            code="tools_not_supported",
        )
    if role == "user" or role == "assistant":
        return Said(role, _content(message.get("content"), where))
    if role == "system" or role == "developer":
        return Said("system", _content(message.get("content"), where))
    raise CompletionError(400, f"{where}.role: unknown role {role!r}", param=f"{where}.role")


def _content(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise CompletionError(
                    400,
                    f"{where}.content.{j}: only text parts are supported (got {kind!r})",
                    param=f"{where}.content",
                )
            texts.append(str(part.get("text", "")))
        return "".join(texts)
    raise CompletionError(400, f"{where}.content must be a string or a list of parts")


def split_messages(request: ChatRequest) -> tuple[list[Said], Said, str | None]:
    """The history before the newest message, the newest (a user's, with text), and the
    system messages' text (``None`` when there is none)."""
    said = [message_text(m, i) for i, m in enumerate(request.messages)]
    system = [s.text for s in said if s.role == "system" and s.text.strip()]
    talk = [s for s in said if s.role != "system"]
    if not talk or talk[-1].role != "user" or not talk[-1].text.strip():
        raise CompletionError(
            400, "the last message must be the user's, with text", param="messages"
        )
    return talk[:-1], talk[-1], "\n\n".join(system) if system else None


# --- what is written ---------------------------------------------------------------------


@dataclass(slots=True)
class Envelope:
    """What every chunk of one completion shares. A text delta's event is the shared
    part, encoded once, around the delta's text (``delta_event``): the bytes are those of
    ``sse(chunk({field: text}))``, without encoding the rest of the chunk again."""

    id: str
    model: str
    created: int
    include_usage: bool = False
    _head: str = field(init=False, repr=False)
    _tail: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        marker = {"\x00": 0}  # a delta no chunk has: where the delta goes
        whole = json.dumps(self.chunk(marker), separators=(",", ":"))
        head, tail = whole.split(json.dumps(marker, separators=(",", ":")), 1)
        self._head, self._tail = f"data: {head}{{", f"}}{tail}\n\n".encode()

    @classmethod
    def new(cls, completion_id: str, model: str, include_usage: bool = False) -> Envelope:
        return cls(f"chatcmpl-{completion_id}", model, int(time.time()), include_usage)

    def delta_event(self, name: Literal["content", "reasoning_content"], text: str) -> bytes:
        """The event of a chunk whose delta is ``{name: text}``."""
        return f'{self._head}"{name}":{json.dumps(text)}'.encode() + self._tail

    def chunk(self, delta: JSON, finish_reason: str | None = None) -> JSON:
        out: JSON = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }
        if self.include_usage:
            out["usage"] = None
        return out

    def usage_chunk(self, usage: JSON) -> JSON:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [],
            "usage": usage,
        }

    def completion(
        self, content: str, finish_reason: str, usage: JSON, reasoning: str | None = None
    ) -> JSON:
        message: JSON = {"role": "assistant", "content": content, "refusal": None}
        if reasoning:
            message["reasoning_content"] = reasoning
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
            ],
            "usage": usage,
        }


def usage_of(metrics: JSON) -> JSON:
    """A turn's metrics as OpenAI's usage."""
    tokens_in = int(metrics.get("tokens_in") or 0)
    tokens_out = int(metrics.get("tokens_out") or 0)
    return {
        "prompt_tokens": tokens_in,
        "completion_tokens": tokens_out,
        "total_tokens": int(metrics.get("tokens_total") or tokens_in + tokens_out),
    }


def sse(data: JSON | str) -> bytes:
    """One ``data:`` event (OpenAI's streams have no ``event:`` lines)."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


DONE = sse("[DONE]")
