"""``[requests]``: body limits and the idempotency window, from the settings to the server."""

from __future__ import annotations

import httpx

from ostinato.cli.serve import body_limits
from ostinato.config import load_config
from ostinato.models.scripted import ScriptedModel
from ostinato.runtime import Runtime
from ostinato.server import BodyLimits, create_app
from ostinato.store.memory import MemoryStore


def test_the_defaults_are_the_servers() -> None:
    config, _ = load_config(env={})
    assert body_limits(config) == BodyLimits()
    assert config.requests.idempotency_window_s == 24 * 3600


async def test_a_limit_set_in_the_environment_takes_effect() -> None:
    env = {"OSTINATO_REQUESTS__MESSAGE_BYTES": "100", "OSTINATO_REQUESTS__METADATA_BYTES": "40"}
    config, _ = load_config(env=env)
    runtime = Runtime(MemoryStore(), model=ScriptedModel())
    app = create_app(runtime, limits=body_limits(config))
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            big = await client.post("/v1/conversations", json={"title": "x" * 50})
            assert big.status_code == 413
            assert big.json()["error"]["limit_bytes"] == 40
            cid = (await client.post("/v1/conversations")).json()["id"]
            turn = await client.post(f"/v1/conversations/{cid}/turns", json={"text": "y" * 120})
            assert turn.status_code == 413
            assert turn.json()["error"] | {"message": ""} == {
                "code": "too_large",
                "kind": "message",
                "limit_bytes": 100,
                "message": "",
            }
    finally:
        await runtime.close()


def test_a_bad_limit_is_refused() -> None:
    from ostinato.config import ConfigError

    try:
        load_config(env={"OSTINATO_REQUESTS__UPLOAD_BYTES": "0"})
    except ConfigError as exc:
        assert "upload_bytes" in str(exc)
    else:
        raise AssertionError("a limit of 0 bytes was accepted")
