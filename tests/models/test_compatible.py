"""The presets against fakes as strict as their servers (``fakes.compatible``): what a
default turn sends is accepted by every one of them, files become a note where ``file``
parts are refused, a server that sends no usage gets estimated counts, and errors name
the server they came from."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from fakes import openai_chat as fc
from fakes.compatible import DIALECTS, FakeCompatible
from fakes.harness import FAST, WEATHER, run
from ostinato.errors import ModelError
from ostinato.messages import (
    FileBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    user_text,
)
from ostinato.models import Model, ModelRequest, create_model


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, FakeCompatible]]:
    fakes = {name: FakeCompatible(dialect) for name, dialect in DIALECTS.items()}
    for fake in fakes.values():
        fake.__enter__()
    yield fakes
    for fake in fakes.values():
        fake.__exit__()


@pytest.fixture(params=sorted(DIALECTS))
def server(request: pytest.FixtureRequest, servers: dict[str, FakeCompatible]) -> FakeCompatible:
    fake = servers[request.param]
    fake.reset()
    return fake


def model_for(fake: FakeCompatible) -> Model:
    preset = fake.dialect.preset
    return create_model(
        f"{preset}:fake-model", api_key="fake-key", base_url=f"{fake.url}/v1", retry=FAST
    )


def default_turn_history() -> tuple[Message, ...]:
    """What a default turn sends: a hidden recall seed (an assistant message holding only
    a tool call, with ostinato's own id), its result, a reply; then a turn where the model
    calls a tool, one result an error, a reply that is only thinking, an empty reply."""
    seed = "seed_1a2308bfbe7b6ef42ebbfb67ca1"
    return (
        user_text("Hello! What is the capital of France?"),
        Message("assistant", (ToolUseBlock(seed, "recall", {"query": "capital of France"}),)),
        Message("tool", (ToolResultBlock(seed, '{"memories": []}'),)),
        Message("assistant", (TextBlock("Paris."),)),
        user_text("And the weather there?"),
        Message(
            "assistant",
            (
                TextBlock("Let me look."),
                ToolUseBlock("call_abc", "get_weather", {"city": "Paris"}),
                ToolUseBlock("call_def", "get_weather", {"city": "Lyon"}),
            ),
        ),
        Message(
            "tool",
            (
                ToolResultBlock("call_abc", "sunny"),
                ToolResultBlock("call_def", "no station", is_error=True),
            ),
        ),
        Message("assistant", (ThinkingBlock("hmm", signature="s"),)),
        user_text("Thanks"),
        Message("assistant", (TextBlock(""),)),
        user_text("Bye"),
    )


async def test_a_default_turn_is_accepted_by_every_server(server: FakeCompatible) -> None:
    server.script(server.text("Bye!"))
    request = ModelRequest("You are terse.", default_turn_history(), tools=[WEATHER])
    _, reply = await run(model_for(server), request)
    assert reply.message.text == "Bye!"
    server.assert_clean()
    sent = server.requests[0]["messages"]
    assert all(m.get("content") is not None for m in sent)  # never null


async def test_a_file_goes_as_a_note_where_file_parts_are_refused(server: FakeCompatible) -> None:
    server.script(server.text("I cannot read it."))
    pdf = FileBlock("application/pdf", data="JVBE", name="a.pdf")
    request = ModelRequest("", [Message("user", (TextBlock("Read this"), pdf))])
    await run(model_for(server), request)
    server.assert_clean()
    content = server.requests[0]["messages"][0]["content"]
    assert content == "Read this\n\n[a.pdf (application/pdf) cannot be shown to this model]"


async def test_counts_a_server_does_not_send_are_estimated(server: FakeCompatible) -> None:
    server.script(server.text("Four."))
    _, reply = await run(model_for(server), ModelRequest("Be brief.", [user_text("2+2?")]))
    if server.dialect.usage_in_stream:
        assert reply.usage.source == "provider" and reply.usage.input_tokens == 15
    else:  # llama.cpp's Python server sends none
        assert reply.usage.source == "estimate"
        assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0


async def test_an_error_names_the_server_it_came_from(server: FakeCompatible) -> None:
    server.script(fc.error(400, "invalid_request_error", "model not loaded", code=None))
    with pytest.raises(ModelError) as caught:
        await run(model_for(server), ModelRequest("", [user_text("Hi")]))
    preset = server.dialect.preset
    assert caught.value.message.startswith(f"{preset} at 127.0.0.1:{server.port}: ")
    assert "model not loaded" in caught.value.message


def test_mistral_ids_are_nine_characters_and_stable() -> None:
    from ostinato.models.openai_chat import WireRules

    rules = WireRules(short_tool_ids=True)
    short = rules.call_id("seed_1a2308bfbe7b6ef42ebbfb67ca1")
    assert len(short) == 9 and short.isalnum()
    assert rules.call_id("seed_1a2308bfbe7b6ef42ebbfb67ca1") == short
    assert rules.call_id("seed_1a2308bfbe7b6ef42ebbfb67ca2") != short
    assert rules.call_id("Ab3dE6gH9") == "Ab3dE6gH9"  # Mistral's own ids go back unchanged
    assert WireRules().call_id("seed_x") == "seed_x"


# --- the fakes are as strict as the servers ----------------------------------------------

CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
NULL_BESIDE_CALLS = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
]
EMPTY_BESIDE_CALLS = [
    {**m, "content": ""} if m["role"] == "assistant" else m for m in NULL_BESIDE_CALLS
]
FILE = [{"role": "user", "content": [{"type": "file", "file": {"file_data": "data:,x"}}]}]
HTTP_IMAGE = [
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/a.png"}}]}
]


@pytest.mark.parametrize(
    ("dialect", "messages", "status"),
    [
        ("llama-cpp-python", NULL_BESIDE_CALLS, 500),  # what the real server answers
        ("llama-cpp-python", EMPTY_BESIDE_CALLS, 200),
        ("lmstudio", NULL_BESIDE_CALLS, 400),
        ("lmstudio", EMPTY_BESIDE_CALLS, 200),
        ("ollama", NULL_BESIDE_CALLS, 200),
        ("ollama", HTTP_IMAGE, 400),
        ("llama-server", FILE, 400),
        ("vllm", FILE, 400),
        ("mistral", EMPTY_BESIDE_CALLS, 400),  # "call_1" is not nine characters
    ],
)
def test_the_fakes_refuse_what_their_servers_refuse(
    servers: dict[str, FakeCompatible], dialect: str, messages: list[dict[str, object]], status: int
) -> None:
    fake = servers[dialect]
    fake.reset()
    if status == 200:
        fake.script(fake.text("ok"))
    body = {"model": "m", "messages": messages, "stream": True}
    answer = httpx.post(f"{fake.url}/v1/chat/completions", json=body, timeout=10)
    assert answer.status_code == status, answer.text
