"""A model with a small context window is offered fewer built-in tools by default
(``ostinato.tools.small``, issue 26 item 10), the window known from the catalog or from
what a configured model server reports when it lists its model (``GET /v1/models``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.compatible import DIALECTS, FakeCompatible
from ostinato.cli.serve import start
from ostinato.config import load_config
from ostinato.context.catalog import ContextCatalog
from ostinato.models.choice import reported_window
from ostinato.tools.small import LEFT_OUT

CORE = {
    "clock",
    "calculator",
    "ask_user",
    "read_file",
    "shell",
    "recall",
    "delegate",
    "spawn_agents",
}


@pytest.fixture
def llama(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCompatible]:
    """llama-server as a fake: its model named by its file, its window in ``meta``."""
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OSTINATO_BASE_URL", "OSTINATO_MODEL"):
        monkeypatch.delenv(name, raising=False)
    with FakeCompatible(DIALECTS["llama-server"]) as fake:
        fake.models = ("/models/local-135m.gguf",)  # not in the catalog by name
        yield fake


async def _offered(fake: FakeCompatible, tmp_path: Path, **settings: Any) -> set[str]:
    """The tools a default server's first turn offers the fake's model."""
    overrides = {
        "server": {"database_url": "memory://", "data_dir": str(tmp_path)},
        "models": {"base_url": f"{fake.url}/v1", "api_key": "k"},
        **settings,
    }
    config, _ = load_config(None, env={}, overrides=overrides)
    _, deployment = await start(config)
    try:
        fake.script(fake.text("hello"))
        runtime = deployment.runtime
        conversation = await runtime.create_conversation()
        result = await runtime.run_turn(conversation.id, "hi")
        assert result.stop_reason == "end_turn"
    finally:
        await deployment.aclose()
    asked = fake.requests[-1]
    return {tool["function"]["name"] for tool in asked.get("tools") or []}


async def test_a_server_reporting_a_small_window_gets_the_core_tools(
    llama: FakeCompatible, tmp_path: Path
) -> None:
    llama.listed = {"meta": {"n_ctx_train": 8192}}
    offered = await _offered(llama, tmp_path)
    assert offered >= CORE
    assert not offered & LEFT_OUT, offered & LEFT_OUT


async def test_a_server_reporting_a_large_window_gets_every_tool(
    llama: FakeCompatible, tmp_path: Path
) -> None:
    llama.listed = {"meta": {"n_ctx_train": 131072}}
    offered = await _offered(llama, tmp_path)
    assert offered >= CORE | LEFT_OUT


async def test_an_agents_own_tool_list_is_offered_as_written(
    llama: FakeCompatible, tmp_path: Path
) -> None:
    llama.listed = {"meta": {"n_ctx_train": 8192}}
    agents = [{"id": "assistant", "tools": ["clock", "schedule", "show"]}]
    offered = await _offered(llama, tmp_path, agents=agents)
    assert offered == {"clock", "schedule", "show"}


def test_the_window_a_listing_reports() -> None:
    assert reported_window({"id": "m", "meta": {"n_ctx_train": 8192}}) == 8192  # llama.cpp
    assert reported_window({"id": "m", "max_model_len": 32768}) == 32768  # vLLM
    assert reported_window({"id": "m", "context_length": 4096}) == 4096
    assert reported_window({"id": "m", "meta": None, "context_length": True}) is None
    assert reported_window({"id": "m"}) is None


def test_the_catalog_knows_a_model_by_its_files_name() -> None:
    catalog = ContextCatalog()
    assert catalog.window("openai-compatible:/m/SmolLM2-135M-Instruct.Q4_1.gguf") == 8_192
    assert catalog.window("openai-compatible:HuggingFaceTB/SmolLM2-135M-Instruct") == 8_192
    assert ContextCatalog({"a": 1}, {"a": 2}).window("x:a") == 2  # the last wins
