"""The smaller holes of issue 25, item 11: a personal MCP server's URL with a user and
password was stored in plaintext and listed back; ``allowed_origins = "*"`` echoed any
origin with credentials allowed; ``POST /v1/schedules`` answered 500 to a duration past
any date and to a cron that never fires. (The key-set cache: test_oidc_owners.py.)"""

from __future__ import annotations

import httpx
import pytest

from ostinato.errors import InvalidRequest
from ostinato.models.scripted import ScriptedModel
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.memory import MemoryStore
from ostinato.tools.personal_mcp import vet_url


async def test_an_mcp_url_with_a_user_and_password_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="may not carry a user or password"):
        await vet_url("http://user:pw@127.0.0.1:9/mcp", allow_private=True)
    with pytest.raises(InvalidRequest, match="may not carry a user or password"):
        await vet_url("https://token@mcp.example.com/mcp", allow_private=True)


def test_a_url_stored_before_is_listed_without_its_password() -> None:
    from ostinato.server.routes.mcp_servers import _shown

    assert _shown("http://user:pw@host:8/mcp?x=1") == "http://host:8/mcp?x=1"
    assert _shown("https://host/mcp") == "https://host/mcp"


async def test_any_origin_never_comes_with_credentials() -> None:
    app = create_app(Runtime(MemoryStore(), model=ScriptedModel()), allowed_origins=["*"])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://t") as c:
        answer = await c.get("/healthz", headers={"origin": "https://evil.example"})
        preflight = await c.options(
            "/v1/conversations",
            headers={
                "origin": "https://evil.example",
                "access-control-request-method": "POST",
                "cookie": "ostinato_anon=x",
            },
        )
    for response in (answer, preflight):
        assert response.headers.get("access-control-allow-credentials") != "true"
        assert response.headers.get("access-control-allow-origin") in (None, "*")


@pytest.mark.parametrize(
    ("when", "says"),
    [
        ("in 99999999999999999999 days", "at most five years ahead"),
        ("every 99999999999999999999 days", "at most five years ahead"),
        ("0 0 30 2 *", "never fires"),
    ],
)
async def test_schedule_times_that_cannot_be_are_422s(when: str, says: str) -> None:
    runtime = Runtime(MemoryStore(), model=ScriptedModel())
    app = create_app(runtime)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://t") as c:
        cid = (await c.post("/v1/conversations")).json()["id"]
        body = {"conversation_id": cid, "when": when, "text": "ping"}
        answer = await c.post("/v1/schedules", json=body)
    assert answer.status_code == 422, answer.text
    assert says in answer.json()["error"]["message"]
