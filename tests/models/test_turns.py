"""Whole turns through the runtime with each real adapter against its fake server: the
issue's "done when" (multi-step tool turns) and the fault endings, end to end, on every
store engine (memory, SQLite, and PostgreSQL when ``OSTINATO_TEST_POSTGRES_URL`` is set)."""

from __future__ import annotations

from fakes.harness import Harness
from ostinato.agents import AgentConfig
from ostinato.frames import ErrorFrame, ModelRetrying, TurnFinished
from ostinato.runtime import Runtime
from ostinato.store.base import Store
from ostinato.tools.registry import ToolRegistry


def weather_tools() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return registry


def runtime(harness: Harness, store: Store, **agent: object) -> Runtime:
    return Runtime(
        store,
        model=harness.model(),
        tools=weather_tools(),
        agent=AgentConfig(**agent),  # type: ignore[arg-type]
    )


async def test_a_multi_step_tool_turn(harness: Harness, store: Store) -> None:
    harness.fake.script(
        harness.tools([("call_1", "get_weather", {"city": "Rome"})]),
        harness.tools([("call_2", "get_weather", {"city": "Oslo"})], text="And Oslo?"),
        harness.text("Rome and Oslo are sunny."),
    )
    rt = runtime(harness, store)
    conversation = await rt.create_conversation()
    result = await rt.run_turn(conversation.id, "Weather in Rome and Oslo?")
    assert result.stop_reason == "end_turn", result.error
    assert result.messages[-1].text == "Rome and Oslo are sunny."
    assert "sunny in Oslo" in str(harness.fake.requests[2])


async def test_budget_wrap_up_call_without_tools_is_valid(harness: Harness, store: Store) -> None:
    harness.fake.script(
        harness.tools([("call_1", "get_weather", {"city": "Rome"})]),
        harness.text("Rome is sunny."),
    )
    rt = runtime(harness, store, max_model_calls=1)
    conversation = await rt.create_conversation()
    result = await rt.run_turn(conversation.id, "Weather in Rome?")
    assert result.stop_reason == "budget_exhausted", result.error
    assert result.messages[-1].text == "Rome is sunny."


async def test_output_limit_inside_a_tool_call(harness: Harness, store: Store) -> None:
    harness.fake.script(
        harness.tools([("call_1", "get_weather", {"city": "Rome, Italy"})], truncated=True),
        harness.text("Let me be shorter."),
    )
    rt = runtime(harness, store)
    conversation = await rt.create_conversation()
    result = await rt.run_turn(conversation.id, "Weather?")
    assert result.stop_reason == "end_turn", result.error
    assert result.messages[-1].text == "Let me be shorter."


async def test_a_cut_off_stream_fails_the_turn(harness: Harness, store: Store) -> None:
    harness.fake.script(harness.cut_off())
    rt = runtime(harness, store)
    conversation = await rt.create_conversation()
    result = await rt.run_turn(conversation.id, "Hi")
    assert result.stop_reason == "failed"


async def test_a_rate_limit_is_retried_and_shown(harness: Harness, store: Store) -> None:
    harness.fake.script(harness.rate_limited(), harness.text("Fine after a pause."))
    rt = runtime(harness, store)
    conversation = await rt.create_conversation()
    watcher = rt.bus.subscribe(conversation.id)
    result = await rt.run_turn(conversation.id, "Hi")
    assert result.stop_reason == "end_turn", result.error
    retries = []
    while True:
        try:
            frame = await watcher.get(within=0.01)
        except TimeoutError:
            break
        if isinstance(frame, ModelRetrying):
            retries.append(frame)
    assert len(retries) == 1 and retries[0].attempt == 1
    rows = await store.list_messages(conversation.id)
    assert rows[-1].text == "Fine after a pause."


async def test_quota_and_authentication_fail_with_a_clear_error(
    harness: Harness, store: Store
) -> None:
    harness.fake.script(harness.quota(), harness.auth())
    rt = runtime(harness, store)
    conversation = await rt.create_conversation()
    quota = await rt.run_turn(conversation.id, "Hi")
    assert quota.stop_reason == "failed" and "quota_exhausted" in (quota.error or "")
    auth = await rt.run_turn(conversation.id, "Again")
    assert auth.stop_reason == "failed" and "authentication_failed" in (auth.error or "")
    assert len(harness.fake.requests) == 2  # neither was retried
    state = await store.get_conversation(conversation.id)
    assert state is not None and state.state == "failed"


async def test_a_too_long_request_is_compacted_and_retried(harness: Harness, store: Store) -> None:
    harness.fake.script(
        harness.text("First answer."),
        harness.text("Second answer."),
        harness.context_too_long(),
        harness.text("A summary of the first exchange."),  # the summary call
        harness.text("Fits now."),
    )
    rt = runtime(harness, store)
    conversation = await rt.create_conversation()
    await rt.run_turn(conversation.id, "one")
    await rt.run_turn(conversation.id, "two")
    result = await rt.run_turn(conversation.id, "three")
    assert result.stop_reason == "end_turn", result.error
    window = await store.window(conversation.id, limit=40)
    assert window.summary is not None and "summary" in window.summary.text.lower()


async def test_a_key_the_provider_echoes_stays_out_of_the_turn(
    harness: Harness, store: Store
) -> None:
    key = "caller-key-0123456789"
    harness.fake.script(harness.echoing_key())
    rt = Runtime(store, model=harness.model(api_key=key), tools=weather_tools())
    conversation = await rt.create_conversation()
    watcher = rt.bus.subscribe(conversation.id)
    result = await rt.run_turn(conversation.id, "Hi")
    assert result.stop_reason == "failed" and result.error is not None
    assert result.error.startswith("authentication_failed: ") and "[redacted]" in result.error
    frames = []
    while True:
        try:
            frames.append(await watcher.get(within=0.01))
        except TimeoutError:
            break
    said = [f for f in frames if isinstance(f, ErrorFrame | TurnFinished)]
    assert {type(f) for f in said} == {ErrorFrame, TurnFinished}
    stored = await store.get_turn(result.turn_id)
    assert stored is not None and stored.error == result.error
    for text in (result.error, stored.error, *(str(f) for f in said)):
        assert key not in text
