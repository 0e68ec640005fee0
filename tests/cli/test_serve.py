"""``ostinato serve``'s model setup and start-up failures (the server itself is tested
end to end in tests/e2e)."""

from __future__ import annotations

import httpx
import pytest
from starlette.requests import Request

from ostinato.cli.main import main
from ostinato.cli.serve import ModelSetup
from ostinato.errors import InvalidRequest
from ostinato.models.choice import DefaultModel, Tiers
from ostinato.models.offline import OfflineModel
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.memory import MemoryStore


def _request(headers: dict[str, str]) -> Request:
    raw = [(k.encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "headers": raw})


@pytest.fixture
def setup(monkeypatch: pytest.MonkeyPatch) -> ModelSetup:
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OSTINATO_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    default = DefaultModel("offline:ostinato", "test")
    return ModelSetup(default, Tiers.for_default(default.model_id), OfflineModel())


def test_requests_choose_their_model_by_header(setup: ModelSetup) -> None:
    assert setup.choose(_request({})) is None
    chosen = setup.choose(_request({"x-ostinato-model-id": "offline:"}))
    assert isinstance(chosen, OfflineModel)
    with pytest.raises(InvalidRequest, match="ANTHROPIC_API_KEY"):
        setup.choose(_request({"x-ostinato-model-id": "anthropic:claude-haiku-4-5"}))
    with pytest.raises(InvalidRequest, match="not allowed"):
        setup.choose(
            _request({"x-ostinato-model-id": "ollama:x", "x-ostinato-model-base-url": "http://h"})
        )


async def test_a_bad_model_header_is_a_422(setup: ModelSetup) -> None:
    app = create_app(Runtime(MemoryStore(), model=setup.model), choose_model=setup.choose)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        cid = (await client.post("/v1/conversations")).json()["id"]
        response = await client.post(
            f"/v1/conversations/{cid}/turns",
            json={"text": "hi"},
            headers={"x-ostinato-model-id": "nowhere:model"},
        )
    assert response.status_code == 422
    assert "unknown model provider 'nowhere'" in response.json()["error"]["message"]


def test_serve_refuses_a_database_url_it_cannot_open(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OLLAMA_BASE_URL", "http://127.0.0.1:9/v1")  # nothing answers
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OSTINATO_BASE_URL", "OSTINATO_MODEL"):
        monkeypatch.delenv(name, raising=False)
    assert main(["serve", "--port", "9", "--database-url", "mysql://nope"]) == 2
    assert "ostinato serve:" in capsys.readouterr().err
