"""Whole turns through the runtime with each real adapter against its fake server: the
issue's "done when" (multi-step tool turns) and the fault endings, end to end."""

from __future__ import annotations

from fakes.harness import Harness
from ostinato.agents import AgentConfig
from ostinato.runtime import Runtime
from ostinato.store.memory import MemoryStore
from ostinato.tools.base import ToolRegistry


def weather_tools() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return registry


def runtime(harness: Harness, **agent: object) -> Runtime:
    return Runtime(
        MemoryStore(),
        model=harness.model(),
        tools=weather_tools(),
        agent=AgentConfig(**agent),  # type: ignore[arg-type]
    )


async def test_a_multi_step_tool_turn(harness: Harness) -> None:
    harness.fake.script(
        harness.tools([("call_1", "get_weather", {"city": "Rome"})]),
        harness.tools([("call_2", "get_weather", {"city": "Oslo"})], text="And Oslo?"),
        harness.text("Rome and Oslo are sunny."),
    )
    rt = runtime(harness)
    conversation = await rt.create_conversation()
    result = await rt.run_turn(conversation.id, "Weather in Rome and Oslo?")
    assert result.stop_reason == "end_turn", result.error
    assert result.messages[-1].text == "Rome and Oslo are sunny."
    assert "sunny in Oslo" in str(harness.fake.requests[2])


async def test_budget_wrap_up_call_without_tools_is_valid(harness: Harness) -> None:
    harness.fake.script(
        harness.tools([("call_1", "get_weather", {"city": "Rome"})]),
        harness.text("Rome is sunny."),
    )
    rt = runtime(harness, max_model_calls=1)
    conversation = await rt.create_conversation()
    result = await rt.run_turn(conversation.id, "Weather in Rome?")
    assert result.stop_reason == "budget_exhausted", result.error
    assert result.messages[-1].text == "Rome is sunny."


async def test_output_limit_inside_a_tool_call(harness: Harness) -> None:
    harness.fake.script(
        harness.tools([("call_1", "get_weather", {"city": "Rome, Italy"})], truncated=True),
        harness.text("Let me be shorter."),
    )
    rt = runtime(harness)
    conversation = await rt.create_conversation()
    result = await rt.run_turn(conversation.id, "Weather?")
    assert result.stop_reason == "end_turn", result.error
    assert result.messages[-1].text == "Let me be shorter."


async def test_a_cut_off_stream_fails_the_turn(harness: Harness) -> None:
    harness.fake.script(harness.cut_off())
    rt = runtime(harness)
    conversation = await rt.create_conversation()
    result = await rt.run_turn(conversation.id, "Hi")
    assert result.stop_reason == "failed"
