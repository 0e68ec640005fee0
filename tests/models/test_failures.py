"""``ostinato.models.failures`` through the real SDKs, for every protocol: a key the
provider echoes never reaches an error, errors name the server, and a provider that goes
silent ends the attempt as a retryable ``StreamIdle`` (the idle timeout is the clients'
read timeout, so a keep-alive comment counts as life)."""

from __future__ import annotations

import asyncio

import httpx2
import pytest

from fakes.harness import FAST, Harness, ask, run
from fakes.server import Stream
from ostinato.errors import AuthenticationFailed, StreamIdle
from ostinato.models import Retrying, RetryPolicy, create_model
from ostinato.models.providers import DEFAULT_IDLE_TIMEOUT, ProviderSettings

CALLER_KEY = "caller-key-0123456789"  # not shaped like any known key: only its model knows it
GUARD = 60.0  # a test that would hang fails instead (not a measurement)
SILENT_ATTEMPTS = RetryPolicy(max_retries=1, base_delay=0.001, max_delay=0.002)


async def test_a_key_the_provider_echoes_is_redacted(harness: Harness) -> None:
    harness.fake.script(harness.echoing_key())
    with pytest.raises(AuthenticationFailed) as caught:
        await run(harness.model(api_key=CALLER_KEY), ask())
    message = caught.value.message
    assert CALLER_KEY not in message and "[redacted]" in message
    assert caught.value.code == "authentication_failed"
    assert "127.0.0.1" in message.split(":", 1)[0]  # "<provider> at 127.0.0.1:<port>"


async def test_errors_name_the_server(harness: Harness) -> None:
    harness.fake.script(harness.quota())
    with pytest.raises(Exception) as caught:
        await run(harness.model(), ask())
    provider = {"anthropic": "anthropic", "chat": "openai-chat", "responses": "openai"}
    label = f"{provider[harness.protocol]} at 127.0.0.1:{harness.fake.port}"
    assert str(caught.value).startswith(f"{label}: ")


async def test_a_silent_provider_is_an_idle_failure_and_retried(harness: Harness) -> None:
    harness.fake.script(harness.silent(), harness.silent())
    events = []
    model = harness.model(SILENT_ATTEMPTS, idle_timeout=0.2)
    with pytest.raises(StreamIdle) as caught:
        async with asyncio.timeout(GUARD):  # without an idle timeout this would never end
            async for event in model.stream(ask()):
                events.append(event)
    assert caught.value.retryable and "sent nothing for 0.2 s" in caught.value.message
    assert [type(e) for e in events] == [Retrying]
    assert "stream_idle" in events[0].error  # type: ignore[union-attr]
    assert harness.fake.wait_for_disconnect()


async def test_silence_in_the_middle_of_a_stream_is_an_idle_failure(harness: Harness) -> None:
    harness.fake.script(harness.slow(), harness.text("Here it is."))
    async with asyncio.timeout(GUARD):
        events, reply = await run(harness.model(FAST, idle_timeout=0.2), ask())
    assert reply.message.text == "Here it is."  # the retry's reply, the silent one dropped
    retries = [e for e in events if isinstance(e, Retrying)]
    assert len(retries) == 1 and "stream_idle" in retries[0].error


async def test_keep_alive_comments_count_as_life(harness: Harness) -> None:
    # ten comments 0.1 s apart: a second of stream, five times the idle timeout
    alive = [(":", "keep-alive")] * 10
    reply_events = harness.text("Still here.").events
    harness.fake.script(Stream([*alive, *reply_events], delay=0.1))
    _, reply = await run(harness.model(FAST, idle_timeout=0.5), ask())
    assert reply.message.text == "Still here."


def test_the_idle_timeout_is_the_clients_read_timeout() -> None:
    env = {"OPENAI_API_KEY": "sk-x", "ANTHROPIC_API_KEY": "sk-y"}
    settings = ProviderSettings(base_url="http://127.0.0.1:1/v1", idle_timeout=12.5)
    for model_id in ("openai:m", "openai-chat:m", "anthropic:m", "ollama:m", "openai-compatible:m"):
        model = create_model(model_id, env=env, settings=settings)
        timeout = model._client.timeout  # type: ignore[attr-defined]
        assert isinstance(timeout, httpx2.Timeout) and timeout.read == 12.5
        assert timeout.connect == 10.0
    fast = create_model("ollama:m", env={}, settings=ProviderSettings(idle_timeout=2.0))
    assert fast._client.timeout.read == 2.0  # type: ignore[attr-defined]
    assert fast._client.timeout.connect == 2.0  # type: ignore[attr-defined]
    default = create_model("ollama:m", env={})
    assert default._client.timeout.read == DEFAULT_IDLE_TIMEOUT == 30.0  # type: ignore[attr-defined]


def test_keys_from_the_environment_are_registered_for_redaction() -> None:
    from ostinato.redaction import redact

    create_model("groq:m", env={"GROQ_API_KEY": "groq-deploy-key-42"})
    assert redact("echo groq-deploy-key-42") == "echo [redacted]"
