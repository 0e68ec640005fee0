"""Chat Completions specifics: compatible servers' reasoning, in-stream error objects,
unknown fields, and the wire history (tool messages in call order, images after them)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakes import openai_chat as fc
from fakes.harness import FAST, WEATHER, ask, run
from fakes.server import FakeProvider, Stream
from ostinato.errors import QuotaExhausted, RateLimited
from ostinato.messages import (
    FileBlock,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    user_text,
)
from ostinato.models import MessageBuilder, Model, ModelRequest, create_model
from ostinato.models.openai_chat import ChunkDecoder, encode_messages


@pytest.fixture
def fake(fake_servers: dict[str, FakeProvider]) -> Iterator[FakeProvider]:
    server = fake_servers["chat"]
    server.reset()
    yield server
    server.assert_clean()


def chat_model(fake: FakeProvider, provider: str = "openai-chat") -> Model:
    return create_model(f"{provider}:m", api_key="k", base_url=f"{fake.url}/v1", retry=FAST)


@pytest.mark.parametrize(("provider", "sent_back"), [("vllm", False), ("deepseek", True)])
async def test_reasoning_content_becomes_thinking(
    fake: FakeProvider, provider: str, sent_back: bool
) -> None:
    fake.script(
        Stream(fc.chunk_events("4", reasoning="2+2 is 4.")),
        Stream(fc.chunk_events("Yes.")),
    )
    model = chat_model(fake, provider)
    _, reply = await run(model, ask(user_text("2+2?")))
    thinking = reply.message.blocks[0]
    assert isinstance(thinking, ThinkingBlock) and thinking.text == "2+2 is 4."
    assert reply.message.blocks[1] == TextBlock("4")
    await run(model, ask(user_text("2+2?"), reply.message, user_text("Sure?")))
    expected = {"role": "assistant", "content": "4"}
    if sent_back:  # DeepSeek requires it back during tool use; others refuse the field
        expected["reasoning_content"] = "2+2 is 4."
    assert fake.requests[1]["messages"][2] == expected
    assert "max_completion_tokens" not in fake.requests[1]  # compatible servers: max_tokens


@pytest.mark.parametrize(
    ("code", "error"),
    [("rate_limit_exceeded", RateLimited), ("insufficient_quota", QuotaExhausted)],
)
async def test_an_error_object_inside_the_stream_is_classified(
    fake: FakeProvider, code: str, error: type[Exception]
) -> None:
    stream = Stream([*fc.chunk_events("Hal", final=False), fc.stream_error(code, "nope", code)])
    fake.script(*([stream] * (3 if error is RateLimited else 1)))
    with pytest.raises(error):
        await run(chat_model(fake), ask())


async def test_unknown_fields_and_chunks_are_ignored(fake: FakeProvider) -> None:
    odd = fc.chunk({"content": "", "audio": None, "annotations": []})
    odd["service_tier"] = "default"
    fake.script(Stream(fc.chunk_events("Fine.", extra=[(None, odd)])))
    _, reply = await run(chat_model(fake), ask())
    assert reply.message.text == "Fine."


async def test_request_shape(fake: FakeProvider) -> None:
    fake.script(Stream(fc.chunk_events("Ok.")))
    request = ModelRequest("sys", [user_text("Hi")], tools=[WEATHER], max_tokens=50)
    await run(chat_model(fake), request)
    body = fake.requests[0]
    assert body["messages"][0] == {"role": "system", "content": "sys"}
    assert body["tools"][0]["function"]["name"] == "get_weather"
    assert body["max_completion_tokens"] == 50
    assert body["stream_options"] == {"include_usage": True}


def test_tool_results_follow_call_order_and_images_go_in_a_user_message() -> None:
    request = ModelRequest(
        "",
        [
            Message("user", (TextBlock("Look"), ImageBlock("image/png", url="https://x/a.png"))),
            Message("assistant", (ToolUseBlock("c1", "a", {}), ToolUseBlock("c2", "b", {"n": 1}))),
            Message(
                "tool",
                (
                    ToolResultBlock(
                        "c2", (TextBlock("chart"), ImageBlock("image/png", data="aGk="))
                    ),
                    ToolResultBlock("c1", "boom", is_error=True),
                    TextBlock("Note: be brief."),
                ),
            ),
        ],
    )
    wire = encode_messages(request)
    assert wire[0]["content"][1] == {"type": "image_url", "image_url": {"url": "https://x/a.png"}}
    assert wire[1]["tool_calls"][1]["function"] == {"name": "b", "arguments": '{"n": 1}'}
    assert wire[1]["content"] == ""  # never null: several compatible servers refuse it
    assert [(m["role"], m.get("tool_call_id")) for m in wire[2:]] == [
        ("tool", "c1"),
        ("tool", "c2"),
        ("user", None),
    ]
    assert wire[2]["content"] == "Error: boom"
    assert wire[4]["content"] == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}},
        {"type": "text", "text": "Note: be brief."},
    ]


def test_files_are_sent_as_file_parts() -> None:
    pdf = FileBlock("application/pdf", data="JVBE", name="a.pdf")
    wire = encode_messages(ModelRequest("", [Message("user", (TextBlock("Read"), pdf))]))
    assert wire[0]["content"][1] == {
        "type": "file",
        "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"},
    }


def test_a_call_with_no_index_or_id_still_assembles() -> None:
    decoder = ChunkDecoder()
    chunk = fc.chunk(
        {"tool_calls": [{"function": {"name": "f", "arguments": '{"a": 1}'}, "type": "function"}]},
        finish_reason="stop",
    )
    events = decoder.feed(chunk)
    events += decoder.finish()
    assert [type(e).__name__ for e in events] == [
        "ToolCallStart",
        "ToolCallDelta",
        "ToolCallEnd",
        "Stop",
    ]


def test_calls_without_an_index_are_told_apart_by_id() -> None:
    decoder = ChunkDecoder()
    events = []
    for call_id, args in (("a", '{"x": '), (None, "1}"), ("b", "{}")):
        call = {"id": call_id, "type": "function", "function": {"name": "f", "arguments": args}}
        events += decoder.feed(fc.chunk({"tool_calls": [call]}))
    decoder.feed(fc.chunk({}, finish_reason="tool_calls"))
    events += decoder.finish()
    builder = MessageBuilder()
    for event in events:
        builder.feed(event)
    uses = builder.finish().tool_uses
    assert [(u.id, u.input) for u in uses] == [("a", {"x": 1}), ("b", {})]


async def test_the_body_sent_is_the_encoded_request_every_call(fake: FakeProvider) -> None:
    """The body goes as bytes with the tools' parts kept from the first call: the second
    call sends exactly what the first did, as JSON."""
    model = chat_model(fake)
    request = ModelRequest("sys", [user_text("Hi")], tools=[WEATHER], max_tokens=50)
    for _ in range(2):
        fake.script(Stream(fc.chunk_events("Ok.")))
        await run(model, request)
    expected = {**model.encode_request(request), "stream": True}  # type: ignore[attr-defined]
    assert fake.requests == [expected, expected]
    assert fake.headers[1]["content-type"] == "application/json"
