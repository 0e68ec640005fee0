"""Agent configuration: what a turn runs with."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant. Use the tools you are given when they help, and answer "
    "in plain, short sentences."
)


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """One agent: its prompt, its budget, its deadlines and the tools it may use."""

    name: str = "default"
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_model_calls: int = 10
    model_timeout: float = 300.0
    max_tokens: int | None = None
    tools: tuple[str, ...] | None = None  # an allow-list of tool names; None allows all
    history_messages: int = 40  # stored rows read into a request, at most
    history_tokens: int | None = None  # and at most this many tokens of them (None: no cap)
    heartbeat_interval: float = 5.0  # seconds of silence from a tool before a heartbeat
    request_instructions: bool = False  # a request may add to the system prompt

    def __post_init__(self) -> None:
        if self.max_model_calls < 1:
            raise ValueError("max_model_calls must be at least 1")
        if self.model_timeout <= 0:
            raise ValueError("model_timeout must be positive")
        if self.history_messages < 1:
            raise ValueError("history_messages must be at least 1")
