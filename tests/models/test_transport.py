"""The shared clients' transport (issue 32): a model made from the deployment's settings
(no caller's key or base URL) calls its provider through the SDK's aiohttp transport, and
keeps every behaviour the adapter tests check on the SDKs' default one: the SDK's typed
errors, retries, the idle timeout, closing the response, redaction. The adapter and
failure tests are run again here, against the same strict fakes, with ``harness`` making
its models the deployment's way."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fakes.harness import FAKES, FAST, Harness, ask, run
from fakes.server import FakeProvider
from ostinato.errors import ProviderUnavailable
from ostinato.models import Model, RetryPolicy, create_model
from ostinato.models.providers import DEFAULT_IDLE_TIMEOUT, ProviderSettings
from tests.models.test_adapters import (
    test_a_cut_off_stream_is_an_error_not_end_turn,
    test_cancelling_the_task_closes_the_connection,
    test_closing_the_stream_closes_the_connection,
    test_errors_that_are_not_retried,
    test_malformed_data_is_a_model_error,
    test_plain_text_with_usage,
    test_retries_exhausted_by_resets_raise_provider_unavailable,
    test_retry_after_is_honoured,
    test_retryable_errors_are_retried_visibly,
)
from tests.models.test_failures import (
    test_a_key_the_provider_echoes_is_redacted,
    test_a_silent_provider_is_an_idle_failure_and_retried,
    test_errors_name_the_server,
    test_silence_in_the_middle_of_a_stream_is_an_idle_failure,
)

__all__ = [
    "test_a_cut_off_stream_is_an_error_not_end_turn",
    "test_a_key_the_provider_echoes_is_redacted",
    "test_a_silent_provider_is_an_idle_failure_and_retried",
    "test_cancelling_the_task_closes_the_connection",
    "test_closing_the_stream_closes_the_connection",
    "test_errors_name_the_server",
    "test_errors_that_are_not_retried",
    "test_malformed_data_is_a_model_error",
    "test_plain_text_with_usage",
    "test_retries_exhausted_by_resets_raise_provider_unavailable",
    "test_retry_after_is_honoured",
    "test_retryable_errors_are_retried_visibly",
    "test_silence_in_the_middle_of_a_stream_is_an_idle_failure",
]


class DeployedHarness(Harness):
    """Models made from the environment and settings alone: the shared clients."""

    def model(
        self, retry: RetryPolicy = FAST, *, api_key: str = "k", idle_timeout: float | None = None
    ) -> Model:
        settings = ProviderSettings(idle_timeout=idle_timeout or DEFAULT_IDLE_TIMEOUT)
        env: dict[str, Any]
        if self.protocol == "anthropic":
            model_id = "anthropic:claude-fake"
            env = {"ANTHROPIC_API_KEY": api_key, "ANTHROPIC_BASE_URL": self.fake.url}
        else:
            model_id = f"{'openai-chat' if self.protocol == 'chat' else 'openai'}:fake-model"
            env = {"OPENAI_API_KEY": api_key, "OPENAI_BASE_URL": f"{self.fake.url}/v1"}
        return create_model(model_id, retry=retry, env=env, settings=settings)


@pytest.fixture(params=sorted(FAKES))
def harness(
    request: pytest.FixtureRequest, fake_servers: dict[str, FakeProvider]
) -> Iterator[Harness]:
    fake = fake_servers[request.param]
    fake.reset()
    yield DeployedHarness(request.param, fake)
    fake.assert_clean()


async def test_the_deployments_clients_use_the_aiohttp_transport(harness: Harness) -> None:
    from anthropic._vendor.httpx_aiohttp.transport import AiohttpTransport as AnthropicTransport
    from openai._vendor.httpx_aiohttp.transport import AiohttpTransport as OpenAITransport

    client = harness.model().inner._client  # type: ignore[attr-defined]
    transport = client._client._transport
    assert isinstance(transport, OpenAITransport | AnthropicTransport)
    # a caller's own key or base URL gets a client of its own, on the SDK's default transport
    own = create_model("openai-chat:m", api_key="mine", base_url=f"{harness.fake.url}/v1")
    assert not isinstance(own.inner._client._client._transport, OpenAITransport)  # type: ignore[attr-defined]


async def test_the_deployments_models_take_the_lean_path(harness: Harness) -> None:
    from ostinato.models.sse_http import Channel

    model = harness.model().inner  # type: ignore[attr-defined]
    assert isinstance(model._channel, Channel)
    assert harness.model().inner._channel is model._channel  # type: ignore[attr-defined]
    harness.fake.script(harness.text("Lean."))
    _, reply = await run(model, ask())
    assert reply.message.text == "Lean."
    # a caller's own key or base URL keeps the SDK's post (no session outlives its call)
    own = create_model("anthropic:m", api_key="mine", base_url=harness.fake.url)
    assert own.inner._channel is None  # type: ignore[attr-defined]
    own = create_model("openai:m", api_key="mine", base_url=f"{harness.fake.url}/v1")
    assert own.inner._channel is None  # type: ignore[attr-defined]


async def test_a_dropped_connection_is_said_as_one(harness: Harness) -> None:
    harness.fake.script(*(harness.reset() for _ in range(3)))
    with pytest.raises(ProviderUnavailable) as caught:
        await run(harness.model(), ask())
    assert "connection failed" in caught.value.message  # not "could not connect in time"
