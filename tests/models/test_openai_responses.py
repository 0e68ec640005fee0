"""Responses API specifics: reasoning items round trip with their encrypted content,
stateless (no ids) versus stored requests, response.failed and error events, unknown
events, and function_call / function_call_output correlation."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from fakes import openai_chat as fc
from fakes import openai_responses as fr
from fakes.harness import FAST, WEATHER, ask, run
from fakes.server import FakeProvider, Stream
from ostinato.errors import ContextTooLong, ProviderUnavailable
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
from ostinato.models import Model, ModelRequest, Retrying
from ostinato.models.openai_responses import OpenAIResponsesModel, encode_input


@pytest.fixture
def fake(fake_servers: dict[str, FakeProvider]) -> Iterator[FakeProvider]:
    server = fake_servers["responses"]
    server.reset()
    yield server
    server.assert_clean()


def responses_model(fake: FakeProvider, *, store: bool = False) -> Model:
    client = openai.AsyncOpenAI(api_key="k", base_url=f"{fake.url}/v1", max_retries=0)
    return OpenAIResponsesModel("openai:m", "m", client, retry=FAST, store=store)


def reasoning_then_call() -> Stream:
    return Stream(
        fr.response_events(
            [
                fr.reasoning("Need the weather.", "gAAAA-encrypted", "rs_1"),
                fr.call("call_1", "get_weather", {"city": "Rome"}, "fc_1"),
            ]
        )
    )


@pytest.mark.parametrize("store", [False, True])
async def test_reasoning_items_are_fed_back(fake: FakeProvider, store: bool) -> None:
    fake.script(reasoning_then_call(), Stream(fr.response_events([fr.message("Warm.")])))
    model = responses_model(fake, store=store)
    _, reply = await run(model, ask(user_text("Rome?")))
    thinking = reply.message.blocks[0]
    assert isinstance(thinking, ThinkingBlock) and thinking.text == "Need the weather."
    answer = Message("tool", (ToolResultBlock("call_1", "warm"),))
    await run(model, ask(user_text("Rome?"), reply.message, answer))
    body = fake.requests[1]
    items = body["input"]
    assert [i.get("type", "message") for i in items] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert items[1]["encrypted_content"] == "gAAAA-encrypted"
    assert items[1]["summary"] == [{"type": "summary_text", "text": "Need the weather."}]
    assert items[3] == {"type": "function_call_output", "call_id": "call_1", "output": "warm"}
    assert body["store"] is store
    if store:
        assert (items[1]["id"], items[2]["id"]) == ("rs_1", "fc_1")
    else:
        assert body["include"] == ["reasoning.encrypted_content"]


async def test_response_failed_is_classified_and_retried(fake: FakeProvider) -> None:
    failed = {"code": "server_error", "message": "The model had an error."}
    fake.script(
        Stream(fr.response_events([fr.message("Par")], failed=failed)),
        Stream(fr.response_events([fr.message("Whole.")])),
    )
    events, reply = await run(responses_model(fake), ask())
    assert any(isinstance(e, Retrying) for e in events)
    assert reply.message.text == "Whole."


async def test_error_event_for_context_length(fake: FakeProvider) -> None:
    event = fr.stream_error("context_length_exceeded", "Your input exceeds the context window.")
    fake.script(Stream([*fr.response_events([], final=False), event]))
    with pytest.raises(ContextTooLong):
        await run(responses_model(fake), ask())


async def test_server_errors_raise_after_the_last_retry(fake: FakeProvider) -> None:
    err = fc.error(503, "server_error", "Service unavailable", code=None)
    fake.script(err, err, err)
    with pytest.raises(ProviderUnavailable):
        await run(responses_model(fake), ask())


async def test_unknown_events_are_ignored(fake: FakeProvider) -> None:
    extra = [
        ("response.future_thing", {"type": "response.future_thing", "sequence_number": 3}),
        ("response.queued", {"type": "response.queued", "sequence_number": 4, "response": {}}),
    ]
    fake.script(Stream(fr.response_events([fr.message("Fine.")], extra=extra)))
    _, reply = await run(responses_model(fake), ask())
    assert reply.message.text == "Fine."


def test_thinking_from_other_providers_and_bare_ids_are_not_replayed() -> None:
    anthropic_thinking = ThinkingBlock("hmm", signature="sig")
    bare = ThinkingBlock("", provider_data={"openai_responses": {"id": "rs_9", "summary": []}})
    history = [user_text("Hi"), Message("assistant", (anthropic_thinking, bare, TextBlock("Yo")))]
    stateless = encode_input(history, store=False)
    assert [i.get("type", "message") for i in stateless] == ["message", "message"]
    stored = encode_input(history, store=True)
    assert stored[1] == {"type": "reasoning", "summary": [], "id": "rs_9"}


def test_tool_message_text_follows_as_user_input() -> None:
    history = [Message("tool", (ToolResultBlock("c1", "ok"), TextBlock("Also: hurry.")))]
    assert encode_input(history, store=False) == [
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"role": "user", "content": [{"type": "input_text", "text": "Also: hurry."}]},
    ]


@pytest.mark.parametrize("store", [False, True])
async def test_the_request_is_what_responses_create_would_send(
    fake: FakeProvider, store: bool
) -> None:
    """The adapter posts its body through the SDK's generic ``post`` (to read the events as
    JSON): for every kind of item it sends, the same body and headers as
    ``responses.create`` on the same client, whose type transform changes nothing."""
    summary = [{"type": "summary_text", "text": "s"}]
    reasoning = {"openai_responses": {"id": "rs_1", "summary": summary, "encrypted_content": "gA"}}
    history = (
        Message(
            "user",
            (
                TextBlock("Look"),
                ImageBlock("image/png", data="aGk="),
                ImageBlock("image/png", url="https://example.com/a.png"),
                FileBlock("application/pdf", data="aGk=", name="a.pdf"),
                FileBlock("text/plain", url="https://example.com/f.txt"),
            ),
        ),
        Message(
            "assistant",
            (
                ThinkingBlock("t", provider_data=reasoning),
                TextBlock("Calling.", provider_data={"openai_responses": {"id": "msg_1"}}),
                ToolUseBlock("call_1", "get_weather", {"city": "Rome", "n": [1, 2.5, None]}),
            ),
        ),
        Message("tool", (ToolResultBlock("call_1", "no such city", is_error=True),)),
        Message("system", (TextBlock("Be brief."),)),
    )
    request = ModelRequest("terse", history, tools=(WEATHER,), max_tokens=99, temperature=0.3)
    client = openai.AsyncOpenAI(api_key="k", base_url=f"{fake.url}/v1", max_retries=0)
    model = OpenAIResponsesModel("openai:m", "m", client, retry=FAST, store=store)
    fake.script(*[Stream(fr.response_events([fr.message("Ok.")]))] * 2)
    await run(model, request)
    params = model.encode_request(request)
    async for _ in await client.responses.create(**params, stream=True):
        pass
    assert fake.requests[0] == fake.requests[1] == {**params, "stream": True}
    assert fake.headers[0] == fake.headers[1]
