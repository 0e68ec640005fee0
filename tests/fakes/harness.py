"""Harness: one fake server, the real SDK client pointed at it, and builders for the
replies every protocol can send (text, tool calls, errors with the provider's real
statuses and bodies), so one test runs against all three protocols."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fakes import anthropic as fa
from fakes import openai_chat as fc
from fakes import openai_responses as fr
from fakes.server import FakeProvider, Reply, Respond, Stream
from ostinato.messages import Message, ToolResultBlock, user_text
from ostinato.models import (
    MessageBuilder,
    Model,
    ModelEvent,
    ModelReply,
    ModelRequest,
    RetryPolicy,
    ToolDefinition,
    create_model,
)
from ostinato.models.providers import DEFAULT_IDLE_TIMEOUT, ProviderSettings

WEATHER = ToolDefinition(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TIME = ToolDefinition("get_time", "The time in a city.", WEATHER.parameters)


def ask(*messages: Message, tools: tuple[ToolDefinition, ...] = (WEATHER, TIME)) -> ModelRequest:
    return ModelRequest(
        system="You are terse.", messages=messages or (user_text("Hi"),), tools=tools
    )


async def run(model: Model, request: ModelRequest) -> tuple[list[ModelEvent], ModelReply]:
    events: list[ModelEvent] = []
    builder = MessageBuilder(request)
    async for event in model.stream(request):
        events.append(event)
        builder.feed(event)
    return events, builder.finish()


def results(*pairs: tuple[str, str]) -> Message:
    return Message("tool", tuple(ToolResultBlock(call_id, text) for call_id, text in pairs))


FAST = RetryPolicy(max_retries=2, base_delay=0.001, max_delay=0.005, max_retry_after=1.0)
Call = tuple[str, str, dict[str, Any]]


@dataclass
class Harness:
    protocol: str
    fake: FakeProvider

    def model(
        self, retry: RetryPolicy = FAST, *, api_key: str = "k", idle_timeout: float | None = None
    ) -> Model:
        if self.protocol == "anthropic":
            model_id, base_url = "anthropic:claude-fake", self.fake.url
        else:
            provider = "openai-chat" if self.protocol == "chat" else "openai"
            model_id, base_url = f"{provider}:fake-model", f"{self.fake.url}/v1"
        settings = ProviderSettings(idle_timeout=idle_timeout or DEFAULT_IDLE_TIMEOUT)
        return create_model(
            model_id, api_key=api_key, base_url=base_url, retry=retry, settings=settings
        )

    # --- replies every protocol can send --------------------------------------------------

    def text(self, text: str, **kw: Any) -> Stream:
        if self.protocol == "anthropic":
            return Stream(fa.message_events([{"type": "text", "text": text}], **kw))
        if self.protocol == "chat":
            return Stream(fc.chunk_events(text, **kw))
        return Stream(fr.response_events([fr.message(text)], **kw))

    def tools(self, calls: list[Call], text: str = "", truncated: bool = False) -> Stream:
        if self.protocol == "anthropic":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            blocks += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
            reason = "max_tokens" if truncated else "tool_use"
            return Stream(fa.message_events(blocks, reason, truncate_last_tool=truncated))
        if self.protocol == "chat":
            finish = "length" if truncated else None
            return Stream(
                fc.chunk_events(text, calls=calls, finish=finish, truncate_last_call=truncated)
            )
        items = [fr.message(text)] if text else []
        items += [fr.call(i, n, a) for i, n, a in calls]
        incomplete = "max_output_tokens" if truncated else None
        return Stream(
            fr.response_events(items, incomplete=incomplete, truncate_last_call=truncated)
        )

    def cut_off(self) -> Stream:
        """Some text, then the body ends without the final event."""
        return self.text("Half an ans", final=False)

    def slow(self) -> Stream:
        """A little text, then the stream stays open until the client goes away."""
        stream = self.text("Thinking about it", final=False)
        return Stream(stream.events, hang=True)

    def reset(self) -> Stream:
        """Some text, then the connection drops mid-body."""
        return Stream(self.text("Half an ans", final=False).events, reset=True)

    def rate_limited(self, retry_after: str = "0") -> Reply:
        if self.protocol == "anthropic":
            return fa.error(
                429,
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit",
                {"retry-after": retry_after},
            )
        return fc.error(
            429,
            "tokens",
            "Rate limit reached for fake-model on tokens per min (TPM). Please try again in 1s.",
            code="rate_limit_exceeded",
            headers={"retry-after": retry_after},
        )

    def server_error(self) -> Reply:
        if self.protocol == "anthropic":
            return fa.error(500, "api_error", "Internal server error")
        return fc.error(
            500,
            "server_error",
            "The server had an error while processing your request. Sorry about that!",
            code=None,
        )

    def quota(self) -> Reply:
        if self.protocol == "anthropic":
            return fa.error(
                400,
                "invalid_request_error",
                "Your credit balance is too low to access the Anthropic API. Please go to "
                "Plans & Billing to upgrade or purchase credits.",
            )
        return fc.error(
            429,
            "insufficient_quota",
            "You exceeded your current quota, please check your plan and billing details.",
            code="insufficient_quota",
        )

    def echoing_key(self) -> Respond:
        """A gateway's 401 that repeats the key it was sent."""

        def respond(body: dict[str, Any], headers: dict[str, str]) -> Reply:
            key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix(
                "Bearer "
            )
            if self.protocol == "anthropic":
                return fa.error(401, "authentication_error", f"invalid x-api-key: {key}")
            return fc.error(
                401, "invalid_request_error", f"Incorrect API key: {key}", code="invalid_api_key"
            )

        return respond

    def silent(self) -> Stream:
        """Headers, then nothing at all until the client goes away."""
        return Stream([], hang=True)

    def auth(self) -> Reply:
        if self.protocol == "anthropic":
            return fa.error(401, "authentication_error", "invalid x-api-key")
        return fc.error(
            401,
            "invalid_request_error",
            "Incorrect API key provided: k. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            code="invalid_api_key",
        )

    def context_too_long(self) -> Reply:
        if self.protocol == "anthropic":
            return fa.error(
                400, "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"
            )
        return fc.error(
            400,
            "invalid_request_error",
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130512 tokens. Please reduce the length of the messages.",
            code="context_length_exceeded",
        )

    def error_in_stream(self) -> Stream:
        """A retryable error event after some text (Anthropic: overloaded_error)."""
        if self.protocol == "anthropic":
            event = fa.stream_error("overloaded_error", "Overloaded")
            text = [{"type": "text", "text": "Hal"}]
            return Stream([*fa.message_events(text, final=False), event])
        if self.protocol == "chat":
            event = fc.stream_error("server_error", "The server had an error", "server_error")
            return Stream([*fc.chunk_events("Hal", final=False), event])
        event = fr.stream_error("server_error", "The server had an error")
        return Stream([*fr.response_events([fr.message("Hal")], final=False), event])


FAKES: dict[str, type[FakeProvider]] = {
    "anthropic": fa.FakeAnthropic,
    "chat": fc.FakeChat,
    "responses": fr.FakeResponses,
}
