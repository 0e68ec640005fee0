"""Anthropic Messages API adapter (official ``anthropic`` SDK, streaming).

Canonical -> wire (``encode_request``):

- the system prompt goes in ``system``; a ``system`` message inside the history becomes
  user text, since Messages has no system role;
- ``tool`` messages become ``user`` messages with their ``tool_result`` blocks first and any
  text after them; consecutive messages of one role are merged (Messages needs strict
  user/assistant alternation), and in a merged user message every ``tool_result`` moves to
  the front, where the API requires it;
- thinking blocks go back with their signatures; redacted thinking goes back as
  ``redacted_thinking``; thinking made by another provider (no signature) is dropped.

Wire -> canonical (``StreamDecoder``) folds the raw SSE events into model events. A
``tool_use`` block cut off by ``max_tokens`` gets no ``ToolCallEnd``, so it is never run.

The SDK sends the request and reads the stream (its retries off, its SSE decoding, which
skips ``ping`` and unnamed events, its errors, an ``error`` event raised as an
``APIStatusError``), but through its generic ``post`` with each event kept as the JSON it
came as: ``messages.create`` builds a pydantic object per event, about a fifth of a
streamed token's CPU in this adapter (docs/performance.md, "Streaming cost per token").
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Iterable

import anthropic

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
    ToolUseBlock,
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
    Usage,
)
from ostinato.models.channels import json_body
from ostinato.models.failures import (
    Endpoint,
    classify_failure,
    connection_failure,
    retry_after_seconds,
)
from ostinato.models.retry import DEFAULT_RETRY_POLICY, RetryPolicy, run_attempt, with_retries
from ostinato.models.sse_http import Channel

PROVIDER_KEY = "anthropic"  # the key of this adapter's entry in a block's provider_data
ANTHROPIC = Endpoint("anthropic")  # what a decoder made without its model calls itself
DEFAULT_MAX_TOKENS = 8192
OPENING = "(The conversation begins.)"  # a user turn before a history that opens with one

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "model_context_window_exceeded": "max_tokens",
    "pause_turn": "end_turn",
    "refusal": "end_turn",
}


class AnthropicModel:
    """A model served by the Anthropic Messages API."""

    def __init__(
        self,
        model: str,
        client: anthropic.AsyncAnthropic,
        *,
        retry: RetryPolicy = DEFAULT_RETRY_POLICY,
        thinking_budget: int | None = None,
        channel: Channel | None = None,
    ) -> None:
        self.name = f"anthropic:{model}"
        self.model = model
        self._client = client
        self._retry = retry
        self._thinking_budget = thinking_budget
        self._endpoint = Endpoint.of("anthropic", client)
        self._channel = channel  # the lean path (``models.sse_http``), else the SDK's post

    def __repr__(self) -> str:
        return f"AnthropicModel({self.name!r})"

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        params = encode_request(self.model, request, thinking_budget=self._thinking_budget)
        return with_retries(lambda: self._attempt(params), self._retry)

    def _attempt(self, params: JSON) -> AsyncGenerator[ModelEvent, None]:
        endpoint, channel, body = self._endpoint, self._channel, {**params, "stream": True}
        return run_attempt(
            endpoint,
            (lambda: channel.post("/v1/messages", json_body(body)))
            if channel is not None
            else lambda: self._client.post(
                "/v1/messages",
                body=body,
                cast_to=object,
                stream=True,
                stream_cls=anthropic.AsyncStream[object],
            ),
            StreamDecoder(endpoint),
            lambda exc: failure(exc, endpoint) if isinstance(exc, anthropic.APIError) else None,
        )


def failure(exc: anthropic.APIError, endpoint: Endpoint) -> ModelError:
    """The typed error for an SDK exception (HTTP status or an ``error`` event in a stream)."""
    if isinstance(exc, anthropic.APIConnectionError):  # a timeout too
        return connection_failure(endpoint, exc)
    body = exc.body if isinstance(exc.body, dict) else {}
    nested = body.get("error")
    error: JSON = nested if isinstance(nested, dict) else body
    message = str(error.get("message") or exc.message)
    kind = error.get("type")
    status: int | None = None
    retry_after: float | None = None
    if isinstance(exc, anthropic.APIStatusError):
        # an error event inside a 200 stream arrives with the stream's status
        status = exc.status_code if exc.status_code >= 400 else None
        retry_after = retry_after_seconds(exc.response.headers)
    return classify_failure(
        endpoint,
        status=status,
        kind=str(kind) if kind else None,
        message=message,
        retry_after=retry_after,
    )


# --- canonical -> wire -------------------------------------------------------------------


def encode_request(model: str, request: ModelRequest, *, thinking_budget: int | None) -> JSON:
    max_tokens = request.max_tokens or DEFAULT_MAX_TOKENS
    params: JSON = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": encode_messages(request.messages),
    }
    if request.system:
        params["system"] = request.system
    if request.tools:
        params["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
        params["tool_choice"] = {"type": request.tool_choice}
    elif used := _tools_in_history(params["messages"]):
        # The API refuses tool_use / tool_result blocks when no tools are defined (the
        # loop's wrap-up call sends none), so the tools the history used are declared as
        # stubs, and the model may not call them.
        params["tools"] = [
            {"name": name, "description": "Not available now.", "input_schema": {"type": "object"}}
            for name in used
        ]
        params["tool_choice"] = {"type": "none"}
    if thinking_budget:
        params["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget}
        params["max_tokens"] = max(max_tokens, thinking_budget + 1024)
    elif request.temperature is not None:  # thinking requires the default temperature
        params["temperature"] = request.temperature
    return params


def encode_messages(messages: Iterable[Message]) -> list[JSON]:
    """Canonical history -> alternating Messages API turns."""
    turns: list[JSON] = []
    for message in messages:
        role = "assistant" if message.role == "assistant" else "user"
        content = [part for b in message.blocks if (part := _encode_block(b, role)) is not None]
        if not content:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(content)
        else:
            turns.append({"role": role, "content": content})
    for turn in turns:
        if turn["role"] == "user":  # tool results first, in their original order
            turn["content"].sort(key=lambda part: part["type"] != "tool_result")
    if turns and turns[0]["role"] == "assistant":  # e.g. a greeting: the API wants user first
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": OPENING}]})
    return turns


def _tools_in_history(turns: list[JSON]) -> list[str]:
    names = {b["name"]: None for t in turns for b in t["content"] if b["type"] == "tool_use"}
    if not names and any(b["type"] == "tool_result" for t in turns for b in t["content"]):
        names["unavailable_tool"] = None
    return list(names)


def _encode_block(block: Block, role: str) -> JSON | None:
    match block:
        case TextBlock(text=text):
            return {"type": "text", "text": text} if text else None
        case ThinkingBlock():
            return _encode_thinking(block) if role == "assistant" else None
        case ToolUseBlock(id=id_, name=name, input=input_):
            return {"type": "tool_use", "id": id_, "name": name, "input": input_}
        case ToolResultBlock(tool_use_id=tid, content=content, is_error=is_error):
            body: str | list[JSON] = (
                content
                if isinstance(content, str)
                else [p for p in (_encode_block(part, role) for part in content) if p]
            )
            result: JSON = {"type": "tool_result", "tool_use_id": tid, "content": body}
            if is_error:
                result["is_error"] = True
            return result
        case ImageBlock(media_type=mt, data=data, url=url):
            return {"type": "image", "source": _source(mt, data, url)}
        case FileBlock():
            return _encode_file(block)


def _encode_thinking(block: ThinkingBlock) -> JSON | None:
    mine = (block.provider_data or {}).get(PROVIDER_KEY)
    if isinstance(mine, dict) and isinstance(mine.get("redacted"), str):
        return {"type": "redacted_thinking", "data": mine["redacted"]}
    if block.signature is None or (block.provider_data and mine is None):
        return None  # not Anthropic's thinking: it cannot be verified, so it is left out
    return {"type": "thinking", "thinking": block.text, "signature": block.signature}


def _source(media_type: str, data: str | None, url: str | None) -> JSON:
    if data is not None:
        return {"type": "base64", "media_type": media_type, "data": data}
    return {"type": "url", "url": url}


def _encode_file(block: FileBlock) -> JSON:
    if block.media_type == "application/pdf":
        return {"type": "document", "source": _source(block.media_type, block.data, block.url)}
    name = block.name or "a file"
    return {"type": "text", "text": f"[{name} ({block.media_type}) cannot be shown to this model]"}


# --- wire -> canonical -------------------------------------------------------------------


class StreamDecoder:
    """Folds raw Messages stream events (the JSON of each, as the server sent it) into
    model events. Pure: no I/O."""

    def __init__(self, endpoint: Endpoint = ANTHROPIC) -> None:
        self._endpoint = endpoint
        self._kinds: dict[int, str] = {}  # content index -> block type
        self._arguments: dict[int, list[str]] = {}
        self._unended: list[int] = []  # tool blocks stopped, ToolCallEnd not yet sent
        self._stop: StopReason | None = None
        self._usage: Usage | None = None  # None: the stream reported none
        self._finished = False

    def feed(self, event: JSON) -> list[ModelEvent]:
        kind = event.get("type")
        if kind == "content_block_delta":  # the most frequent first
            return self._block_delta(event["index"], event["delta"])
        if kind == "message_start":
            self._usage = _usage(event["message"].get("usage"), self._usage)
        elif kind == "content_block_start":
            return self._block_start(event["index"], event["content_block"])
        elif kind == "content_block_stop":
            if self._kinds.get(event["index"]) == "tool_use":
                self._unended.append(event["index"])
        elif kind == "message_delta":
            reason = (event.get("delta") or {}).get("stop_reason")
            if reason is not None:
                self._stop = _STOP_REASONS.get(reason, "end_turn")
            self._usage = _usage(event.get("usage"), self._usage)
        elif kind == "message_stop":
            self._finished = True
        return []  # ping and event types this adapter does not know are ignored

    def finish(self) -> list[ModelEvent]:
        """The closing events; raises ``StreamIncomplete`` if the stream was cut short."""
        if not self._finished or self._stop is None:
            raise StreamIncomplete(self._endpoint.say("the stream ended before message_stop"))
        out: list[ModelEvent] = []
        for index in self._unended:
            cut_off = self._stop == "max_tokens" and index == max(self._kinds)
            if not cut_off or _is_json_object("".join(self._arguments[index])):
                out.append(ToolCallEnd(index))
        if self._usage is not None:
            out.append(self._usage)
        out.append(Stop(self._stop))
        return out

    def _block_start(self, index: int, block: JSON) -> list[ModelEvent]:
        kind = block.get("type")
        self._kinds[index] = str(kind)
        if kind == "text":
            text = block.get("text")
            return [TextDelta(text, index)] if text else []
        if kind == "thinking":
            return [ThinkingDelta(block.get("thinking", ""), block.get("signature") or None, index)]
        if kind == "redacted_thinking":
            return [ThinkingDelta("", None, index, {PROVIDER_KEY: {"redacted": block["data"]}})]
        if kind == "tool_use":
            self._arguments[index] = []
            return [ToolCallStart(index, block["id"], block["name"])]
        return []

    def _block_delta(self, index: int, delta: JSON) -> list[ModelEvent]:
        kind = delta.get("type")
        if kind == "text_delta":
            return [TextDelta(delta["text"], index)]
        if kind == "input_json_delta" and index in self._arguments:
            self._arguments[index].append(delta["partial_json"])
            return [ToolCallDelta(index, delta["partial_json"])]
        if kind == "thinking_delta":
            return [ThinkingDelta(delta["thinking"], None, index)]
        if kind == "signature_delta":
            return [ThinkingDelta("", delta["signature"], index)]
        return []


def _usage(raw: JSON | None, seen: Usage | None) -> Usage | None:
    """Anthropic reports cumulative counts: the latest non-empty value wins."""
    if raw is None:
        return seen
    seen = seen or Usage()
    return Usage(
        input_tokens=raw.get("input_tokens") or seen.input_tokens,
        output_tokens=raw.get("output_tokens") or seen.output_tokens,
        cache_read_tokens=raw.get("cache_read_input_tokens") or seen.cache_read_tokens,
        cache_write_tokens=raw.get("cache_creation_input_tokens") or seen.cache_write_tokens,
    )


def _is_json_object(raw: str) -> bool:
    try:
        return isinstance(json.loads(raw), dict)
    except ValueError:
        return False
