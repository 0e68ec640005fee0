"""OpenAI Chat Completions adapter (official ``openai`` SDK, streaming).

The same adapter serves every OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio,
OpenRouter, Groq, DeepSeek, Mistral, Together, xAI); ``ostinato.models.choice`` holds
their presets.

Canonical -> wire (``encode_messages``): an assistant message's tool_use blocks become its
``tool_calls``, and its ``content`` is always a string (``""`` beside tool calls, where
OpenAI allows null but llama.cpp's Python server, LM Studio and older Ollama refuse it); a
canonical ``tool`` message becomes one ``tool`` message per result, in the order of the
calls they answer, and any text or images it carries (tool messages take text only)
follow in one ``user`` message. Thinking is not sent back: most compatible servers reject
or ignore it. ``WireRules`` holds what some servers need beyond that (a preset sets it):
reasoning sent back (DeepSeek), files as a note for servers that read no ``file`` parts,
and Mistral's nine-character tool call ids and non-empty assistant text.

Wire -> canonical (``ChunkDecoder``): content and the compatible servers' reasoning fields
(``reasoning_content``, ``reasoning``) become text and thinking deltas; tool call deltas are
grouped by their index. A stream without a ``finish_reason`` is incomplete. When the output
limit cuts the last tool call short, that call gets no ``ToolCallEnd`` and is never run.

The SDK sends the request and reads the stream (its retries off, its SSE decoding, its
errors, an ``error`` object in the stream raised as an ``APIError``), but through its
generic ``post`` with the body as built here, as bytes (``models.bodies``: each tool's part
encoded once, not on every call), and each chunk kept as the JSON it came as:
``chat.completions.create`` would walk the whole body (every tool schema, every message)
through its type transform on every call and build a pydantic object per chunk, which
was most of a turn start's CPU and a large share of a streamed token's
(docs/performance.md).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncGenerator, Iterable
from dataclasses import dataclass

import openai

from ostinato.errors import ModelError, StreamIncomplete
from ostinato.messages import (
    JSON,
    Block,
    FileBlock,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
)
from ostinato.models.base import (
    ModelEvent,
    ModelRequest,
    Stop,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolDefinition,
    Usage,
)
from ostinato.models.bodies import request_body
from ostinato.models.failures import (
    Endpoint,
    classify_failure,
    connection_failure,
    retry_after_seconds,
)
from ostinato.models.retry import DEFAULT_RETRY_POLICY, RetryPolicy, run_attempt, with_retries
from ostinato.models.sse_http import Channel

_STOP_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "end_turn",
}
_TOOL_INDEX_BASE = 1  # tool calls are indexed after the text block (index 0)
PROVIDER_KEY = "openai_chat"  # the key of this adapter's entry in provider_data
EMPTY_REPLY = "(empty reply)"  # an empty assistant message, where "" is refused
_SHORT_ID = re.compile(r"[A-Za-z0-9]{9}")
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True, slots=True)
class WireRules:
    """What a server needs beyond OpenAI's own rules (the presets set these)."""

    send_reasoning: bool = False  # thinking back as it came (DeepSeek, during tool use)
    file_parts: bool = True  # "file" parts (OpenAI, OpenRouter); others get a text note
    short_tool_ids: bool = False  # tool call ids of nine letters and digits (Mistral)
    # an assistant message needs text or tool calls (Mistral): an empty reply says so
    nonempty_replies: bool = False

    def call_id(self, tool_use_id: str) -> str:
        """The id a tool call goes by on the wire: as stored, or (``short_tool_ids``) the
        same nine characters for the same id every time."""
        if not self.short_tool_ids or _SHORT_ID.fullmatch(tool_use_id):
            return tool_use_id
        number = int.from_bytes(hashlib.sha256(tool_use_id.encode()).digest()[:8], "big")
        return "".join(_BASE62[(number >> (6 * i)) % 62] for i in range(9))


OPENAI = Endpoint("openai")  # what a decoder made without its model calls itself


class OpenAIChatModel:
    """A model behind a Chat Completions endpoint (OpenAI or a compatible server)."""

    def __init__(
        self,
        name: str,
        model: str,
        client: openai.AsyncOpenAI,
        *,
        retry: RetryPolicy = DEFAULT_RETRY_POLICY,
        max_tokens_field: str = "max_completion_tokens",
        include_usage: bool = True,
        rules: WireRules = WireRules(),
        channel: Channel | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self._client = client
        self._retry = retry
        self._max_tokens_field = max_tokens_field
        self._include_usage = include_usage
        self._rules = rules
        self._endpoint = Endpoint.of(name.partition(":")[0], client)
        self._channel = channel  # the lean path (``models.sse_http``), else the SDK's post

    def __repr__(self) -> str:
        return f"OpenAIChatModel({self.name!r})"

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        params = self._params(request, tools=False)  # ``request_body`` puts each tool in
        params["stream"] = True
        body = request_body(params, request.tools, tool_wire)
        return with_retries(lambda: self._attempt(body), self._retry)

    def encode_request(self, request: ModelRequest) -> JSON:
        return self._params(request, tools=True)

    def _params(self, request: ModelRequest, *, tools: bool) -> JSON:
        messages = encode_messages(request, self._rules)
        params: JSON = {"model": self.model, "messages": messages}
        if request.tools:
            if tools:
                params["tools"] = [tool_wire(t) for t in request.tools]
            params["tool_choice"] = request.tool_choice
        if request.max_tokens is not None:
            params[self._max_tokens_field] = request.max_tokens
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if self._include_usage:
            params["stream_options"] = {"include_usage": True}
        return params

    def _attempt(self, body: bytes) -> AsyncGenerator[ModelEvent, None]:
        endpoint, channel = self._endpoint, self._channel
        return run_attempt(
            endpoint,
            (lambda: channel.post("/chat/completions", body))
            if channel is not None
            else lambda: self._client.post(
                "/chat/completions",
                content=body,
                cast_to=object,
                stream=True,
                stream_cls=openai.AsyncStream[object],
            ),
            ChunkDecoder(endpoint),
            lambda exc: openai_failure(exc, endpoint) if isinstance(exc, openai.APIError) else None,
        )


def tool_wire(tool: ToolDefinition) -> JSON:
    """One tool as Chat Completions takes it."""
    function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return {"type": "function", "function": function}


def openai_failure(exc: openai.APIError, endpoint: Endpoint) -> ModelError:
    """The typed error for an ``openai`` SDK exception (also used by the Responses adapter)."""
    if isinstance(exc, openai.APIConnectionError):  # a timeout too
        return connection_failure(endpoint, exc)
    body = exc.body if isinstance(exc.body, dict) else {}
    message = str(body.get("message") or exc.message)
    kind = exc.code or exc.type
    if isinstance(exc, openai.APIStatusError):
        return classify_failure(
            endpoint,
            status=exc.status_code,
            kind=kind,
            message=message,
            retry_after=retry_after_seconds(exc.response.headers),
        )
    # an error object inside the stream: classified by its code alone
    return classify_failure(endpoint, status=None, kind=kind, message=message)


# --- canonical -> wire -------------------------------------------------------------------


def encode_messages(request: ModelRequest, rules: WireRules = WireRules()) -> list[JSON]:
    """The wire history of ``request`` for a server with ``rules``."""
    out: list[JSON] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    call_order: dict[str, int] = {}
    for message in request.messages:
        if message.role == "assistant":
            out.append(_encode_assistant(message, rules))
            call_order = {u.id: i for i, u in enumerate(message.tool_uses)}
        elif message.role == "tool":
            out.extend(_encode_tool_message(message, call_order, rules))
        elif message.role == "system":
            out.append({"role": "system", "content": message.text})
        else:
            parts = _encode_parts(message.blocks, rules)
            if parts:
                out.append({"role": "user", "content": _compact(parts)})
    return out


def _encode_assistant(message: Message, rules: WireRules) -> JSON:
    wire: JSON = {"role": "assistant", "content": message.text}  # never null (see above)
    if rules.nonempty_replies and not message.text and not message.tool_uses:
        wire["content"] = EMPTY_REPLY
    if rules.send_reasoning:
        wire |= _reasoning_fields(message)
    if message.tool_uses:
        wire["tool_calls"] = [
            {
                "id": rules.call_id(use.id),
                "type": "function",
                "function": {"name": use.name, "arguments": json.dumps(use.input)},
            }
            for use in message.tool_uses
        ]
    return wire


def _reasoning_fields(message: Message) -> JSON:
    """This protocol's thinking, in the field each piece came in."""
    fields: dict[str, str] = {}
    for block in message.blocks:
        if isinstance(block, ThinkingBlock) and block.provider_data:
            mine = block.provider_data.get(PROVIDER_KEY)
            if isinstance(mine, dict):
                field = str(mine.get("field", "reasoning_content"))
                fields[field] = fields.get(field, "") + block.text
    return fields


def _encode_tool_message(
    message: Message, call_order: dict[str, int], rules: WireRules
) -> list[JSON]:
    results = sorted(message.tool_results, key=lambda r: call_order.get(r.tool_use_id, 1 << 30))
    out: list[JSON] = []
    extra: list[Block] = []
    for result in results:
        text = result.text
        if result.is_error and not text.startswith("Error"):
            text = f"Error: {text}"
        call_id = rules.call_id(result.tool_use_id)
        out.append({"role": "tool", "tool_call_id": call_id, "content": text})
        if not isinstance(result.content, str):
            extra += [p for p in result.content if isinstance(p, ImageBlock)]
    extra += [b for b in message.blocks if not isinstance(b, ToolResultBlock)]
    parts = _encode_parts(extra, rules)
    if parts:
        out.append({"role": "user", "content": _compact(parts)})
    return out


def _encode_parts(blocks: Iterable[Block], rules: WireRules) -> list[JSON]:
    parts: list[JSON] = []
    for block in blocks:
        match block:
            case TextBlock(text=text) if text:
                parts.append({"type": "text", "text": text})
            case ImageBlock(media_type=mt, data=data, url=url):
                parts.append({"type": "image_url", "image_url": {"url": _data_url(mt, data, url)}})
            case FileBlock(media_type=mt, name=name) if not rules.file_parts:
                note = f"[{name or 'a file'} ({mt}) cannot be shown to this model]"
                parts.append({"type": "text", "text": note})
            case FileBlock(media_type=mt, data=data, url=url, name=name) if data is not None:
                file: JSON = {"file_data": _data_url(mt, data, url)}
                if name:
                    file["filename"] = name
                parts.append({"type": "file", "file": file})
            case FileBlock(url=url, name=name):
                parts.append({"type": "text", "text": f"[file {name or ''} at {url}]"})
    return parts


def _compact(parts: list[JSON]) -> str | list[JSON]:
    """Plain text as a string (what every compatible server accepts), else content parts."""
    if all(p["type"] == "text" for p in parts):
        return "\n\n".join(p["text"] for p in parts)
    return parts


def _data_url(media_type: str, data: str | None, url: str | None) -> str:
    return f"data:{media_type};base64,{data}" if data is not None else str(url)


# --- wire -> canonical -------------------------------------------------------------------


class ChunkDecoder:
    """Folds the stream's chunks (``chat.completion.chunk`` JSON) into model events.
    Pure: no I/O."""

    def __init__(self, endpoint: Endpoint = OPENAI) -> None:
        self._endpoint = endpoint
        self._arguments: dict[int, list[str]] = {}  # event index -> argument pieces
        self._ids: dict[int, str] = {}  # event index -> tool call id
        self._finish: str | None = None
        self._usage: Usage | None = None

    def feed(self, chunk: JSON) -> list[ModelEvent]:
        """One chunk as the stream's JSON (a dict, as the server sent it)."""
        out: list[ModelEvent] = []
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            details = usage.get("prompt_tokens_details") or {}
            self._usage = Usage(
                input_tokens=usage.get("prompt_tokens") or 0,
                output_tokens=usage.get("completion_tokens") or 0,
                cache_read_tokens=details.get("cached_tokens") or 0,
            )
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if delta:
                out += self._delta(delta)
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
        return out

    def _delta(self, delta: JSON) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        for field in ("reasoning_content", "reasoning"):
            reasoning = delta.get(field)
            if isinstance(reasoning, str) and reasoning:
                origin = {PROVIDER_KEY: {"field": field}}
                out.append(ThinkingDelta(reasoning, index=0, provider_data=origin))
                break
        content = delta.get("content")
        if content:
            out.append(TextDelta(content, index=0))
        for call in delta.get("tool_calls") or ():
            index = self._call_index(call)
            function = call.get("function") or {}
            if index not in self._arguments:
                self._arguments[index] = []
                self._ids[index] = call_id = call.get("id") or f"call_{index}"
                out.append(ToolCallStart(index, call_id, function.get("name") or ""))
            arguments = function.get("arguments")
            if arguments:
                self._arguments[index].append(arguments)
                out.append(ToolCallDelta(index, arguments))
        return out

    def _call_index(self, call: JSON) -> int:
        """The event index of a tool call delta. Some servers leave out ``index``: then a
        new id starts a new call and a delta without one continues the last."""
        if call.get("index") is not None:
            return _TOOL_INDEX_BASE + int(call["index"])
        last = max(self._arguments, default=_TOOL_INDEX_BASE - 1)
        call_id = call.get("id")
        if (call_id and call_id not in self._ids.values()) or last < _TOOL_INDEX_BASE:
            return last + 1
        return last

    def finish(self) -> list[ModelEvent]:
        if self._finish is None:
            raise StreamIncomplete(self._endpoint.say("the stream ended without a finish_reason"))
        stop = _STOP_REASONS.get(self._finish, "end_turn")
        out: list[ModelEvent] = []
        last = max(self._arguments, default=None)
        for index, pieces in self._arguments.items():
            cut_off = stop == "max_tokens" and index == last
            if not cut_off or _is_json_object("".join(pieces)):
                out.append(ToolCallEnd(index))
        if self._usage is not None:
            out.append(self._usage)
        out.append(Stop(stop))
        return out


def _is_json_object(raw: str) -> bool:
    try:
        return isinstance(json.loads(raw), dict)
    except ValueError:
        return False
