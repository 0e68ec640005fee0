"""Anthropic specifics: thinking with signatures, redacted thinking, 529 and in-stream
``overloaded_error``, unknown events, and the shape of the history sent back."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import pytest

from fakes import anthropic as fa
from fakes.harness import FAST, WEATHER, ask, run
from fakes.server import FakeProvider, Stream
from ostinato.errors import Overloaded
from ostinato.messages import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    user_text,
)
from ostinato.models import ModelRequest, Retrying, create_model
from ostinato.models.anthropic import AnthropicModel, encode_messages, encode_request


@pytest.fixture
def fake(fake_servers: dict[str, FakeProvider]) -> Iterator[FakeProvider]:
    server = fake_servers["anthropic"]
    server.reset()
    yield server
    server.assert_clean()


async def test_thinking_round_trip_keeps_the_signature(fake: FakeProvider) -> None:
    thinking = {"type": "thinking", "thinking": "Paris is in France.", "signature": "sig-123"}
    call = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
    fake.script(
        Stream(fa.message_events([thinking, call], "tool_use")),
        Stream(fa.message_events([{"type": "text", "text": "Sunny."}])),
    )
    m = create_model("anthropic:claude-fake", api_key="k", base_url=fake.url, retry=FAST)
    _, reply = await run(m, ask(user_text("Weather?")))
    first = reply.message.blocks[0]
    assert isinstance(first, ThinkingBlock)
    assert (first.text, first.signature) == ("Paris is in France.", "sig-123")
    answer = Message("tool", (ToolResultBlock("toolu_1", "sunny"),))
    await run(m, ask(user_text("Weather?"), reply.message, answer))
    sent = fake.requests[1]["messages"][1]["content"]
    assert sent[0] == {
        "type": "thinking",
        "thinking": "Paris is in France.",
        "signature": "sig-123",
    }
    assert sent[1]["type"] == "tool_use"


async def test_redacted_thinking_goes_back_verbatim(fake: FakeProvider) -> None:
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}
    fake.script(
        Stream(fa.message_events([redacted, {"type": "text", "text": "Hi."}])),
        Stream(fa.message_events([{"type": "text", "text": "Again."}])),
    )
    m = create_model("anthropic:claude-fake", api_key="k", base_url=fake.url, retry=FAST)
    _, reply = await run(m, ask())
    await run(m, ask(user_text("Hi"), reply.message, user_text("More")))
    assert fake.requests[1]["messages"][1]["content"][0] == redacted


async def test_overloaded_529_is_retried(fake: FakeProvider) -> None:
    fake.script(
        fa.error(529, "overloaded_error", "Overloaded"),
        Stream(fa.message_events([{"type": "text", "text": "Ok."}])),
    )
    m = create_model("anthropic:claude-fake", api_key="k", base_url=fake.url, retry=FAST)
    events, reply = await run(m, ask())
    retry = next(e for e in events if isinstance(e, Retrying))
    assert retry.error.startswith("overloaded")
    assert reply.message.text == "Ok."


async def test_overloaded_in_stream_raises_overloaded_when_retries_run_out(
    fake: FakeProvider,
) -> None:
    text = [{"type": "text", "text": "Par"}]
    overloaded = Stream(
        [*fa.message_events(text, final=False), fa.stream_error("overloaded_error", "Overloaded")]
    )
    fake.script(overloaded, overloaded, overloaded)
    m = create_model("anthropic:claude-fake", api_key="k", base_url=fake.url, retry=FAST)
    with pytest.raises(Overloaded):
        await run(m, ask())


async def test_unknown_events_and_blocks_are_ignored(fake: FakeProvider) -> None:
    extra = [
        ("future_event", {"type": "future_event", "payload": 1}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 9,
                "content_block": {
                    "type": "server_tool_use",
                    "id": "s1",
                    "name": "web_search",
                    "input": {},
                },
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 9}),
    ]
    fake.script(Stream(fa.message_events([{"type": "text", "text": "Fine."}], extra=extra)))
    m = create_model("anthropic:claude-fake", api_key="k", base_url=fake.url, retry=FAST)
    _, reply = await run(m, ask())
    assert reply.message.blocks == (TextBlock("Fine."),)


def test_history_is_merged_into_alternating_turns_with_results_first() -> None:
    history = [
        user_text("Hi"),
        Message("system", (TextBlock("Note: the user is in Oslo."),)),
        Message("assistant", (ToolUseBlock("t1", "get_weather", {"city": "Oslo"}),)),
        Message(
            "tool",
            (
                ToolResultBlock("t1", (TextBlock("rain"), ImageBlock("image/png", data="aGk="))),
                TextBlock("Keep it short."),
            ),
        ),
        user_text("And tomorrow?"),
    ]
    turns = encode_messages(history)
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert [b["type"] for b in turns[0]["content"]] == ["text", "text"]
    last = turns[2]["content"]
    assert [b["type"] for b in last] == ["tool_result", "text", "text"]
    assert last[0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "aGk="},
    }


def test_results_move_ahead_of_text_in_a_merged_user_turn() -> None:
    history = [
        user_text("Go"),
        Message("assistant", (ToolUseBlock("t1", "x", {}),)),
        user_text("(typed while the tool ran)"),
        Message("tool", (ToolResultBlock("t1", "done", is_error=True),)),
    ]
    last = encode_messages(history)[-1]["content"]
    assert last[0] == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": "done",
        "is_error": True,
    }
    assert last[1]["type"] == "text"


def test_foreign_thinking_is_dropped_and_empty_text_skipped() -> None:
    openai_reasoning = ThinkingBlock("...", provider_data={"openai_responses": {"id": "rs_1"}})
    history = [
        user_text("Hi"),
        Message("assistant", (openai_reasoning, TextBlock(""), TextBlock("Yo"))),
    ]
    assert encode_messages(history)[1]["content"] == [{"type": "text", "text": "Yo"}]


def test_request_options() -> None:
    request = ModelRequest(
        "Be kind.", [user_text("Hi")], tools=[WEATHER], tool_choice="none", temperature=0.2
    )
    params = encode_request("claude-x", request, thinking_budget=None)
    assert params["system"] == "Be kind."
    assert params["tool_choice"] == {"type": "none"}
    assert params["tools"][0]["input_schema"] == WEATHER.parameters
    assert params["temperature"] == 0.2
    thinking = encode_request("claude-x", request, thinking_budget=16000)
    assert thinking["thinking"] == {"type": "enabled", "budget_tokens": 16000}
    assert thinking["max_tokens"] > 16000 and "temperature" not in thinking


async def test_a_call_without_tools_after_tool_use_still_declares_them(fake: FakeProvider) -> None:
    """The loop's wrap-up call sends no tools; the history still holds tool blocks."""
    fake.script(Stream(fa.message_events([{"type": "text", "text": "In short: sunny."}])))
    history = (
        user_text("Weather?"),
        Message("assistant", (ToolUseBlock("t1", "get_weather", {"city": "Rome"}),)),
        Message("tool", (ToolResultBlock("t1", "sunny"),)),
    )
    m = create_model("anthropic:claude-fake", api_key="k", base_url=fake.url, retry=FAST)
    _, reply = await run(m, ModelRequest("", history, tools=(), tool_choice="none"))
    assert reply.message.text == "In short: sunny."
    body = fake.requests[0]
    assert [t["name"] for t in body["tools"]] == ["get_weather"]
    assert body["tool_choice"] == {"type": "none"}


def test_a_history_opening_with_the_assistant_gets_a_user_turn_first() -> None:
    turns = encode_messages(
        [Message("assistant", (TextBlock("Hello! How can I help?"),)), user_text("Hi")]
    )
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]


async def test_the_request_is_what_messages_create_would_send(fake: FakeProvider) -> None:
    """The adapter posts through the SDK's generic ``post`` (to read the events as JSON):
    the same body and headers as ``messages.create`` on the same client."""
    fake.script(*[Stream(fa.message_events([{"type": "text", "text": "Hi."}]))] * 2)
    client = anthropic.AsyncAnthropic(api_key="k", base_url=fake.url, max_retries=0)
    request = ask(user_text("Hi"))
    await run(AnthropicModel("claude-fake", client, retry=FAST), request)
    params = encode_request("claude-fake", request, thinking_budget=None)
    async for _ in await client.messages.create(**params, stream=True):
        pass
    assert fake.requests[0] == fake.requests[1] == {**params, "stream": True}
    assert fake.headers[0] == fake.headers[1]
