"""OpenAI Responses API adapter (official ``openai`` SDK, streaming).

Canonical -> wire (``encode_input``): every output item of an earlier response is fed back,
not only those the API insists on: reasoning items (from ``ThinkingBlock.provider_data``,
with their encrypted content), assistant text as output messages, tool calls as
``function_call`` items; a ``tool`` message becomes ``function_call_output`` items
correlated by ``call_id`` (the canonical tool_use id), followed by a user message for any
text it carries.

By default requests are stateless (``store=False``) and ask for
``reasoning.encrypted_content``, so the reasoning travels in the request. The API refuses
item ids it did not store ("Item with id 'rs_...' not found. Items are not persisted when
`store` is set to false"), so in that mode ids are left out and a reasoning item without
encrypted content is dropped; with ``store=True`` ids are sent back too.

Wire -> canonical (``EventDecoder``): events are grouped by ``output_index``. A
``function_call`` item gets its ``ToolCallEnd`` only when the item is done and complete,
so a call cut off by ``max_output_tokens`` is never run.

The SDK sends the request and reads the stream (its retries off, its SSE decoding, its
errors), but through its generic ``post`` with the body as built here and each event kept
as the JSON it came as: ``responses.create`` would walk the body through its type
transform and validate every event into one of its many event models, which was most of
a streamed token's CPU in this adapter (docs/performance.md, "Streaming cost per token").
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Iterable
from typing import Any

import openai

from ostinato.errors import StreamIncomplete
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
from ostinato.models.failures import Endpoint, classify_failure
from ostinato.models.openai_chat import openai_failure
from ostinato.models.retry import DEFAULT_RETRY_POLICY, RetryPolicy, run_attempt, with_retries
from ostinato.models.sse_http import Channel

PROVIDER_KEY = "openai_responses"  # the key of this adapter's entry in provider_data
OPENAI = Endpoint("openai")  # what a decoder made without its model calls itself


class OpenAIResponsesModel:
    """A model behind the OpenAI Responses API."""

    def __init__(
        self,
        name: str,
        model: str,
        client: openai.AsyncOpenAI,
        *,
        retry: RetryPolicy = DEFAULT_RETRY_POLICY,
        store: bool = False,
        reasoning_effort: str | None = None,
        channel: Channel | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self._client = client
        self._retry = retry
        self._store = store
        self._reasoning_effort = reasoning_effort
        self._endpoint = Endpoint.of(name.partition(":")[0], client)
        self._channel = channel  # the lean path (``models.sse_http``), else the SDK's post

    def __repr__(self) -> str:
        return f"OpenAIResponsesModel({self.name!r})"

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        params = self.encode_request(request)
        return with_retries(lambda: self._attempt(params), self._retry)

    def encode_request(self, request: ModelRequest) -> JSON:
        params: JSON = {
            "model": self.model,
            "input": encode_input(request.messages, store=self._store),
            "store": self._store,
        }
        if request.system:
            params["instructions"] = request.system
        if not self._store:
            params["include"] = ["reasoning.encrypted_content"]
        if self._reasoning_effort:
            params["reasoning"] = {"effort": self._reasoning_effort, "summary": "auto"}
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": False,
                }
                for t in request.tools
            ]
            params["tool_choice"] = request.tool_choice
        if request.max_tokens is not None:
            params["max_output_tokens"] = request.max_tokens
        if request.temperature is not None:
            params["temperature"] = request.temperature
        return params

    def _attempt(self, params: JSON) -> AsyncGenerator[ModelEvent, None]:
        endpoint, channel, body = self._endpoint, self._channel, {**params, "stream": True}
        return run_attempt(
            endpoint,
            (lambda: channel.post("/responses", json_body(body)))
            if channel is not None
            else lambda: self._client.post(
                "/responses",
                body=body,
                options={"security": {"bearer_auth": True}},  # as responses.create sends
                cast_to=object,
                stream=True,
                stream_cls=openai.AsyncStream[object],
            ),
            EventDecoder(endpoint),
            lambda exc: openai_failure(exc, endpoint) if isinstance(exc, openai.APIError) else None,
        )


# --- canonical -> wire -------------------------------------------------------------------


def encode_input(messages: Iterable[Message], *, store: bool) -> list[JSON]:
    items: list[JSON] = []
    for message in messages:
        if message.role == "assistant":
            items += _encode_assistant(message.blocks, store)
        elif message.role == "tool":
            items += [_encode_result(r) for r in message.tool_results]
            rest = [b for b in message.blocks if not isinstance(b, ToolResultBlock)]
            if content := _input_content(rest):
                items.append({"role": "user", "content": content})
        elif content := _input_content(message.blocks):
            role = "system" if message.role == "system" else "user"
            items.append({"role": role, "content": content})
    return items


def _encode_assistant(blocks: Iterable[Block], store: bool) -> list[JSON]:
    items: list[JSON] = []
    for block in blocks:
        mine = _mine(getattr(block, "provider_data", None))
        item: JSON | None = None
        match block:
            case ThinkingBlock():
                item = _reasoning_item(mine, store)
            case TextBlock(text=text) if text:
                content = [{"type": "output_text", "text": text, "annotations": []}]
                item = {"type": "message", "role": "assistant", "content": content}
                if store and mine.get("id"):
                    item |= {"id": mine["id"], "status": "completed"}
            case ToolUseBlock(id=id_, name=name, input=input_):
                item = {
                    "type": "function_call",
                    "call_id": id_,
                    "name": name,
                    "arguments": json.dumps(input_),
                }
                if store and mine.get("id"):
                    item["id"] = mine["id"]
        if item is not None:
            items.append(item)
    return items


def _reasoning_item(mine: JSON, store: bool) -> JSON | None:
    """A reasoning item as the API gave it, or ``None`` if it cannot be replayed."""
    if not mine.get("id") or not (store or mine.get("encrypted_content")):
        return None  # another provider's thinking, or a bare id the API did not store
    item: JSON = {"type": "reasoning", "summary": mine.get("summary") or []}
    if mine.get("encrypted_content"):
        item["encrypted_content"] = mine["encrypted_content"]
    if store:
        item["id"] = mine["id"]
    return item


def _encode_result(result: ToolResultBlock) -> JSON:
    content = result.content
    output = content if isinstance(content, str) else _input_content(content)
    if result.is_error and isinstance(output, str) and not output.startswith("Error"):
        output = f"Error: {output}"
    return {"type": "function_call_output", "call_id": result.tool_use_id, "output": output}


def _input_content(blocks: Iterable[Block]) -> list[JSON]:
    parts: list[JSON] = []
    for block in blocks:
        match block:
            case TextBlock(text=text) if text:
                parts.append({"type": "input_text", "text": text})
            case ImageBlock(media_type=mt, data=data, url=url):
                image_url = f"data:{mt};base64,{data}" if data is not None else url
                parts.append({"type": "input_image", "image_url": image_url, "detail": "auto"})
            case FileBlock(media_type=mt, data=data, url=url, name=name):
                part: JSON = {"type": "input_file"}
                if data is not None:
                    part["file_data"] = f"data:{mt};base64,{data}"
                    part["filename"] = name or "file"
                else:
                    part["file_url"] = url
                parts.append(part)
    return parts


def _mine(provider_data: Any) -> JSON:
    if isinstance(provider_data, dict) and isinstance(provider_data.get(PROVIDER_KEY), dict):
        return dict(provider_data[PROVIDER_KEY])
    return {}


# --- wire -> canonical -------------------------------------------------------------------


class EventDecoder:
    """Folds Responses stream events (the JSON of each, as the server sent it) into model
    events. Pure: no I/O."""

    def __init__(self, endpoint: Endpoint = OPENAI) -> None:
        self._endpoint = endpoint
        self._calls: dict[int, list[str]] = {}  # output index -> argument pieces
        self._summary_parts: dict[int, int] = {}
        self._stop: StopReason | None = None
        self._usage: Usage | None = None  # None: the response reported none

    def feed(self, event: JSON) -> list[ModelEvent]:
        kind = event.get("type")
        index = event.get("output_index", 0)
        if kind in _TEXT_DELTAS:
            return [TextDelta(event["delta"], index)]
        if kind == "response.function_call_arguments.delta":
            if index not in self._calls:
                return []
            self._calls[index].append(event["delta"])
            return [ToolCallDelta(index, event["delta"])]
        if kind in _THINKING_DELTAS:
            return [ThinkingDelta(event["delta"], index=index)]
        if kind == "response.output_item.added":
            return self._item_added(index, event["item"])
        if kind == "response.output_item.done":
            return self._item_done(index, event["item"])
        if kind == "response.reasoning_summary_part.added":
            seen = self._summary_parts.get(index, 0)
            self._summary_parts[index] = seen + 1
            return [ThinkingDelta("\n\n", index=index)] if seen else []
        if kind in ("response.completed", "response.incomplete"):
            return self._finished(event["response"])
        if kind == "response.failed":
            error = event["response"].get("error") or {}
            raise self._stream_error(error.get("code"), error.get("message"))
        if kind == "error":
            raise self._stream_error(event.get("code"), event.get("message"))
        return []  # lifecycle events and event types this adapter does not know

    def finish(self) -> list[ModelEvent]:
        if self._stop is None:
            raise StreamIncomplete(self._endpoint.say("the stream ended before response.completed"))
        usage: list[ModelEvent] = [self._usage] if self._usage is not None else []
        return [*usage, Stop(self._stop)]

    def _item_added(self, index: int, item: JSON) -> list[ModelEvent]:
        if item.get("type") != "function_call":
            return []
        self._calls[index] = []
        data = {PROVIDER_KEY: {"id": item["id"]}} if item.get("id") else None
        return [ToolCallStart(index, item["call_id"], item["name"], data)]

    def _item_done(self, index: int, item: JSON) -> list[ModelEvent]:
        kind = item.get("type")
        if kind == "function_call" and index in self._calls:
            if item.get("status", "completed") == "incomplete":
                return []  # cut off: no ToolCallEnd, so it is never run
            if not self._calls[index] and item.get("arguments"):
                return [ToolCallDelta(index, item["arguments"]), ToolCallEnd(index)]
            return [ToolCallEnd(index)]
        if kind == "reasoning":
            summary = [dict(part) for part in item.get("summary") or ()]
            data: JSON = {"id": item.get("id"), "summary": summary}
            if item.get("encrypted_content"):
                data["encrypted_content"] = item["encrypted_content"]
            return [ThinkingDelta("", index=index, provider_data={PROVIDER_KEY: data})]
        if kind == "message" and item.get("id"):
            return [TextDelta("", index, provider_data={PROVIDER_KEY: {"id": item["id"]}})]
        return []

    def _finished(self, response: JSON) -> list[ModelEvent]:
        usage = response.get("usage")
        if usage is not None:
            details = usage.get("input_tokens_details") or {}
            self._usage = Usage(
                input_tokens=usage.get("input_tokens") or 0,
                output_tokens=usage.get("output_tokens") or 0,
                cache_read_tokens=details.get("cached_tokens") or 0,
            )
        reason = (response.get("incomplete_details") or {}).get("reason")
        if response.get("status") == "incomplete" or reason is not None:
            self._stop = "max_tokens" if reason == "max_output_tokens" else "end_turn"
        else:
            self._stop = "tool_use" if self._calls else "end_turn"
        return []

    def _stream_error(self, code: str | None, message: str | None) -> Exception:
        return classify_failure(self._endpoint, status=None, kind=code, message=message or "")


_TEXT_DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta"})
_THINKING_DELTAS = frozenset(
    {"response.reasoning_summary_text.delta", "response.reasoning_text.delta"}
)
