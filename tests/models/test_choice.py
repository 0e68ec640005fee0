"""Model choice: ids, presets, keys, tiers, precedence and the start-up default."""

from __future__ import annotations

import asyncio
import socket

import pytest

from fakes.server import FakeProvider
from ostinato.errors import AuthenticationFailed, InvalidRequest
from ostinato.messages import user_text
from ostinato.models import (
    DefaultModel,
    Model,
    ModelOverride,
    ModelRequest,
    ProviderSettings,
    Tiers,
    autodetect_default,
    create_model,
    describe_models,
    parse_model_id,
    select_model,
)
from ostinato.models.anthropic import AnthropicModel
from ostinato.models.openai_chat import OpenAIChatModel
from ostinato.models.openai_responses import OpenAIResponsesModel
from ostinato.models.pool import Pooled

TIERS = Tiers({"minuet": "ollama:qwen3:0.6b", "allegro": "openai:gpt-4.1", "forte": "anthropic:x"})


def test_parse_model_id_splits_on_the_first_colon() -> None:
    assert parse_model_id("ollama:qwen3:8b") == ("ollama", "qwen3:8b")
    assert parse_model_id("Anthropic:claude-sonnet-4-5") == ("anthropic", "claude-sonnet-4-5")
    for bad in ("gpt-4.1", "nosuch:model", "openai:", ":x"):
        with pytest.raises(InvalidRequest):
            parse_model_id(bad)


def test_create_model_picks_the_protocol() -> None:
    env = {"OPENAI_API_KEY": "sk-env", "ANTHROPIC_API_KEY": "ak-env"}
    assert isinstance(adapter(create_model("anthropic:claude-x", env=env)), AnthropicModel)
    assert isinstance(adapter(create_model("openai:gpt-4.1", env=env)), OpenAIResponsesModel)
    chat = create_model("openai-chat:gpt-4.1", env=env)
    assert isinstance(adapter(chat), OpenAIChatModel) and chat.name == "openai-chat:gpt-4.1"


def adapter(model: Model) -> Model:
    """The provider adapter inside its endpoint's request pool (``models.pool``)."""
    assert isinstance(model, Pooled)
    return model.inner


def test_presets_give_base_url_and_key_variable() -> None:
    model = create_model("groq:llama-3.3-70b", env={"GROQ_API_KEY": "gk"})
    client = model._client  # type: ignore[attr-defined]
    assert str(client.base_url) == "https://api.groq.com/openai/v1/"
    assert client.api_key == "gk"
    local = create_model("ollama:qwen3", env={"OLLAMA_BASE_URL": "http://box:11434/v1"})
    assert str(local._client.base_url) == "http://box:11434/v1/"  # type: ignore[attr-defined]
    mistral = create_model("mistral:mistral-large-latest", env={"MISTRAL_API_KEY": "mk"})
    request = ModelRequest("", [user_text("Hi")])
    assert "stream_options" not in mistral.encode_request(request)  # type: ignore[attr-defined]
    with pytest.raises(AuthenticationFailed, match="GROQ_API_KEY"):
        create_model("groq:llama-3.3-70b", env={})


def test_a_callers_base_url_never_gets_the_deployments_key() -> None:
    env = {"OPENAI_API_KEY": "sk-secret-of-the-deployment"}
    model = create_model("openai:gpt-4.1", base_url="https://evil.example/v1", env=env)
    assert model._client.api_key != env["OPENAI_API_KEY"]  # type: ignore[attr-defined]
    own = create_model("openai:gpt-4.1", base_url="https://mine/v1", api_key="sk-mine", env=env)
    assert own._client.api_key == "sk-mine"  # type: ignore[attr-defined]


async def test_clients_from_the_environment_are_shared_within_a_loop() -> None:
    env = {"OPENAI_API_KEY": "sk-env"}
    first = create_model("openai:gpt-4.1", env=env)
    second = create_model("openai-chat:gpt-4.1-mini", env=env)
    assert first._client is second._client  # type: ignore[attr-defined]
    own = create_model("openai:gpt-4.1", api_key="sk-caller", env=env)
    assert own._client is not first._client  # type: ignore[attr-defined]


def test_thinking_and_reasoning_options_from_the_settings() -> None:
    env = {"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o", "OSTINATO_THINKING_BUDGET": "1"}
    settings = ProviderSettings(thinking_budget=4000, reasoning_effort="low")
    request = ModelRequest("", [user_text("Hi")])
    claude = create_model("anthropic:claude-x", env=env, settings=settings)
    assert claude._thinking_budget == 4000  # type: ignore[attr-defined]
    unset = create_model("anthropic:claude-x", env=env)  # variables are read by the settings
    assert unset._thinking_budget is None  # type: ignore[attr-defined]
    gpt = create_model("openai:gpt-5", env=env, settings=settings)
    params = gpt.encode_request(request)  # type: ignore[attr-defined]
    assert params["reasoning"] == {"effort": "low", "summary": "auto"}


def test_missing_keys_are_a_clear_error() -> None:
    with pytest.raises(AuthenticationFailed, match="ANTHROPIC_API_KEY"):
        create_model("anthropic:claude-x", env={})


def test_precedence_request_conversation_tier_default() -> None:
    def pick(**kw: object) -> tuple[str, str]:
        selection = select_model(default="openai:gpt-4.1-mini", tiers=TIERS, **kw)  # type: ignore[arg-type]
        return selection.model_id, selection.source

    assert pick() == ("openai:gpt-4.1-mini", "default")
    assert pick(agent_tier="minuet") == ("ollama:qwen3:0.6b", "agent tier")
    assert pick(agent_tier="minuet", conversation="forte") == ("anthropic:x", "conversation")
    request = ModelOverride(model="groq:llama")
    assert pick(agent_tier="minuet", conversation="forte", request=request) == (
        "groq:llama",
        "request",
    )
    key_only = ModelOverride(api_key="sk-caller")
    selection = select_model(
        default="openai:gpt-4.1", tiers=TIERS, conversation="forte", request=key_only
    )
    assert (selection.model_id, selection.api_key) == ("anthropic:x", "sk-caller")
    with pytest.raises(InvalidRequest, match="tier"):
        pick(agent_tier="presto")


def test_overrides_come_from_headers_and_hide_the_key() -> None:
    headers = {
        "x-ostinato-model-id": "openai:gpt-4.1",
        "x-ostinato-model-api-key": "sk-very-secret",
        "x-ostinato-model-base-url": "https://proxy/v1",
    }
    override = ModelOverride.from_headers(headers)
    assert override is not None and override.api_key == "sk-very-secret"
    assert "sk-very-secret" not in repr(override)
    with pytest.raises(InvalidRequest, match="OSTINATO_ALLOW_CALLER_BASE_URL"):
        select_model(default="offline:ostinato", tiers=TIERS, request=override)
    selection = select_model(
        default="offline:ostinato", tiers=TIERS, request=override, allow_base_url=True
    )
    assert selection.base_url == "https://proxy/v1"
    assert "sk-very-secret" not in repr(selection)
    assert "sk-very-secret" not in repr(selection.create())
    assert ModelOverride.from_headers({"accept": "*/*"}) is None


def test_tiers_follow_the_default_and_the_configured_tiers() -> None:
    anthropic = Tiers.for_default("anthropic:claude-sonnet-4-5")
    assert anthropic.resolve("minuet").startswith("anthropic:claude-haiku")
    local = Tiers.for_default("ollama:qwen3", {"forte": "openai:gpt-5"})
    assert local.mapping == {
        "minuet": "ollama:qwen3",
        "allegro": "ollama:qwen3",
        "forte": "openai:gpt-5",
    }


async def test_autodetect_order() -> None:
    nothing = {"OLLAMA_BASE_URL": f"http://127.0.0.1:{_free_port()}/v1"}
    both = {**nothing, "ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}
    assert (await autodetect_default(both)).model_id.startswith("anthropic:")
    openai_only = {**nothing, "OPENAI_API_KEY": "o"}
    assert (await autodetect_default(openai_only)).model_id == "openai:gpt-4.1-mini"
    offline = await autodetect_default(nothing, probe_timeout=0.2)
    assert offline.model_id == "offline:ostinato"
    assert "offline:ostinato (" in str(offline)


async def test_autodetect_finds_a_local_server(fake_servers: dict[str, FakeProvider]) -> None:
    server = fake_servers["chat"]  # it also answers GET /v1/models
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    ollama = await autodetect_default({"OLLAMA_BASE_URL": f"{server.url}/v1"})
    assert ollama.model_id == "ollama:fake-model"
    custom = await autodetect_default(
        {"OLLAMA_BASE_URL": dead}, settings=ProviderSettings(base_url=f"{server.url}/v1")
    )
    assert custom.model_id == "openai-compatible:fake-model"
    pointed = await autodetect_default(
        {"OPENAI_API_KEY": "o", "OPENAI_BASE_URL": f"{server.url}/v1"}
    )
    assert pointed.model_id == "openai-chat:fake-model"


async def test_a_configured_server_that_does_not_answer_stays_the_default() -> None:
    """OSTINATO_BASE_URL names the server to use: one that does not answer at start-up is
    still the default (its turns fail saying so), never replaced by the offline model."""
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    found = await autodetect_default({}, settings=ProviderSettings(base_url=dead))
    assert found.model_id == "openai-compatible:default"
    assert found.unreachable == dead
    assert str(found).startswith("openai-compatible:default (UNREACHABLE: OSTINATO_BASE_URL")


async def test_a_configured_server_answering_late_is_found() -> None:
    """A busy machine: the server answers the start-up probe after its first wait."""
    body = b'{"object": "list", "data": [{"id": "late-model", "object": "model"}]}'

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await asyncio.sleep(1.5)  # past the first attempt's wait (1 s), within the second's
        head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}"
        writer.write(head.encode() + b"\r\nconnection: close\r\n\r\n" + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        url = f"http://127.0.0.1:{port}/v1"
        found = await autodetect_default({}, settings=ProviderSettings(base_url=url))
    assert found.model_id == "openai-compatible:late-model" and found.unreachable is None


def test_describe_models_lists_default_and_tiers() -> None:
    listing = describe_models(DefaultModel("offline:ostinato", "why"), TIERS)
    assert listing["object"] == "list"
    assert listing["data"][0]["ostinato"] == {"default": True, "reason": "why"}
    assert [d["ostinato"].get("tier") for d in listing["data"][1:]] == [
        "minuet",
        "allegro",
        "forte",
    ]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
