"""Every adapter against its fake server, through the real SDK: the cases of issue 3 §5
that apply to all three protocols. Each fake also checks every request it receives by
the provider's history rules (see ``tests/fakes``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from fakes.harness import WEATHER, Harness, ask, results, run
from fakes.server import Stream
from ostinato.errors import (
    AuthenticationFailed,
    ContextTooLong,
    ModelError,
    ProviderUnavailable,
    QuotaExhausted,
    RateLimited,
    StreamIncomplete,
)
from ostinato.messages import Message, TextBlock, ToolResultBlock, user_text
from ostinato.models import (
    ModelRequest,
    Retrying,
    Stop,
    TextDelta,
)


async def test_plain_text_with_usage(harness: Harness) -> None:
    harness.fake.script(harness.text("Hello there!"))
    events, reply = await run(harness.model(), ask())
    assert reply.message.text == "Hello there!"
    assert reply.stop_reason == "end_turn"
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
    assert reply.usage.cache_read_tokens > 0
    assert isinstance(events[-1], Stop)
    assert sum(isinstance(e, TextDelta) and bool(e.text) for e in events) == 2  # streamed


async def test_one_tool_round_trip(harness: Harness) -> None:
    harness.fake.script(
        harness.tools([("call_1", "get_weather", {"city": "Paris"})], text="Let me check."),
        harness.text("It is sunny in Paris."),
    )
    model = harness.model()
    first = ask(user_text("Weather in Paris?"))
    _, reply = await run(model, first)
    assert reply.stop_reason == "tool_use"
    assert [(u.id, u.name, u.input) for u in reply.tool_uses] == [
        ("call_1", "get_weather", {"city": "Paris"})
    ]
    assert reply.message.text == "Let me check."
    assert not reply.broken_calls
    history = (*first.messages, reply.message, results(("call_1", "sunny, 24°C")))
    _, final = await run(model, ask(*history))
    assert final.message.text == "It is sunny in Paris."
    assert "sunny, 24°C" in str(harness.fake.requests[1])


async def test_parallel_tools_answered_in_any_order(harness: Harness) -> None:
    calls = [
        ("call_a", "get_weather", {"city": "Oslo"}),
        ("call_b", "get_time", {"city": "Lima"}),
    ]
    harness.fake.script(harness.tools(calls), harness.text("Done."))
    model = harness.model()
    _, reply = await run(model, ask(user_text("Oslo weather and Lima time?")))
    assert [u.id for u in reply.tool_uses] == ["call_a", "call_b"]
    assert reply.tool_uses[1].input == {"city": "Lima"}
    # results stored in the order the tools finished, plus a note for the model
    answer = Message(
        "tool",
        (
            ToolResultBlock("call_b", "09:00"),
            ToolResultBlock("call_a", "rain", is_error=False),
            TextBlock("The user added: be brief."),
        ),
    )
    _, final = await run(
        model, ask(user_text("Oslo weather and Lima time?"), reply.message, answer)
    )
    assert final.message.text == "Done."


async def test_tool_choice_none_is_sent(harness: Harness) -> None:
    harness.fake.script(harness.text("Wrapping up."))
    request = ModelRequest("sys", (user_text("Hi"),), tools=(WEATHER,), tool_choice="none")
    await run(harness.model(), request)
    body: dict[str, Any] = harness.fake.requests[0]
    expected = {"type": "none"} if harness.protocol == "anthropic" else "none"
    assert body["tool_choice"] == expected


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("quota", QuotaExhausted),
        ("auth", AuthenticationFailed),
        ("context_too_long", ContextTooLong),
    ],
)
async def test_errors_that_are_not_retried(harness: Harness, reply: str, error: type) -> None:
    harness.fake.script(getattr(harness, reply)())
    with pytest.raises(error):
        await run(harness.model(), ask())
    assert len(harness.fake.requests) == 1


@pytest.mark.parametrize("reply", ["rate_limited", "server_error", "error_in_stream", "reset"])
async def test_retryable_errors_are_retried_visibly(harness: Harness, reply: str) -> None:
    harness.fake.script(getattr(harness, reply)(), harness.text("Recovered."))
    events, final = await run(harness.model(), ask())
    retries = [e for e in events if isinstance(e, Retrying)]
    assert [r.attempt for r in retries] == [1]
    assert final.message.text == "Recovered."  # the partial first attempt was discarded
    assert len(harness.fake.requests) == 2


async def test_retry_after_is_honoured(harness: Harness) -> None:
    harness.fake.script(harness.rate_limited(retry_after="0.05"), harness.text("Ok."))
    events, _ = await run(harness.model(), ask())
    assert [e.delay for e in events if isinstance(e, Retrying)] == [0.05]


async def test_retries_are_capped(harness: Harness) -> None:
    harness.fake.script(*(harness.rate_limited() for _ in range(3)))  # FAST allows 2 retries
    with pytest.raises(RateLimited):
        await run(harness.model(), ask())
    assert len(harness.fake.requests) == 3


async def test_retries_exhausted_by_resets_raise_provider_unavailable(harness: Harness) -> None:
    harness.fake.script(*(harness.reset() for _ in range(3)))
    with pytest.raises(ProviderUnavailable):
        await run(harness.model(), ask())


async def test_a_cut_off_stream_is_an_error_not_end_turn(harness: Harness) -> None:
    harness.fake.script(harness.cut_off())
    with pytest.raises(StreamIncomplete):
        await run(harness.model(), ask())


async def test_malformed_data_is_a_model_error(harness: Harness) -> None:
    name = {"anthropic": "message_start", "chat": None, "responses": "response.created"}
    harness.fake.script(Stream([(name[harness.protocol], "{not json")]))
    with pytest.raises(ModelError, match="malformed"):
        await run(harness.model(), ask())


async def test_max_tokens_inside_a_tool_call(harness: Harness) -> None:
    calls = [
        ("call_a", "get_weather", {"city": "Oslo"}),
        ("call_b", "get_time", {"city": "Lima, Peru"}),
    ]
    harness.fake.script(harness.tools(calls, truncated=True), harness.text("Sorry."))
    model = harness.model()
    _, reply = await run(model, ask(user_text("Both please")))
    assert reply.stop_reason == "max_tokens"
    assert set(reply.broken_calls) == {"call_b"}  # the complete call_a may run
    # the loop answers the broken call with an error; the next request must stay valid
    answer = Message(
        "tool",
        (
            ToolResultBlock("call_a", "rain"),
            ToolResultBlock("call_b", reply.broken_calls["call_b"], is_error=True),
        ),
    )
    _, final = await run(model, ask(user_text("Both please"), reply.message, answer))
    assert final.message.text == "Sorry."


async def test_closing_the_stream_closes_the_connection(harness: Harness) -> None:
    harness.fake.script(harness.slow())
    stream = harness.model().stream(ask())
    first = await anext(stream)
    assert isinstance(first, TextDelta)
    await stream.aclose()  # what the loop does on cancellation
    assert await asyncio.to_thread(harness.fake.wait_for_disconnect)


async def test_cancelling_the_task_closes_the_connection(harness: Harness) -> None:
    harness.fake.script(harness.slow())
    started = asyncio.Event()

    async def consume() -> None:
        async for _ in harness.model().stream(ask()):
            started.set()

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(harness.fake.wait_for_disconnect)
