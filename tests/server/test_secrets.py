"""Secrets stay secret: with planted credentials (a provider key its server echoes back in
an error, an API key of ours, a wrong key, the cookie secret, an identity provider's JWT,
an anonymous token) each one really used, conversations run at DEBUG on every store
engine, and no log line (of any level, plain or JSON lines), stored row, response or
frame holds any of them. The one answer that hands out the anonymous token is the only
place it may appear, and only in its headers."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from fastapi import FastAPI

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # makes `fakes` importable

from fakes import openai_chat as fc
from fakes.server import FakeProvider, Stream
from ostinato.identity.keys import create_key
from ostinato.identity.settings import AuthSettings, OidcSettings
from ostinato.models import create_model
from ostinato.models.retry import RetryPolicy
from ostinato.observe import logs
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.server.auth.cookies import ANONYMOUS_COOKIE, ANONYMOUS_TOKEN_HEADER, TOKEN_PREFIX
from ostinato.store import PostgresStore, SQLiteStore
from ostinato.store.base import Store
from ostinato.store.sql.tables import metadata
from tests.server.oidc_issuer import AUDIENCE, Issuer, serve_issuer
from tests.server.sse_client import open_stream

PROVIDER_KEY = "sk-planted-Provider0Key1Never2Shown3Anywhere4"
COOKIE_SECRET = "planted-cookie-secret-Zq8Vd2Lm5Wx9"
ECHO = "Incorrect API key provided"


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with fc.FakeChat() as fake:
        yield fake


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    with serve_issuer() as state:
        yield state


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


@dataclass
class Seen:
    """Everything the server sent, and the secrets planted so far."""

    app: FastAPI
    texts: list[str] = field(default_factory=list)
    planted: dict[str, str] = field(default_factory=dict)  # what it is -> the secret

    def client(self, credential: str | None = None, **kwargs: object) -> httpx.AsyncClient:
        headers = {"authorization": f"Bearer {credential}"} if credential else {}
        transport = httpx.ASGITransport(app=self.app)
        return httpx.AsyncClient(
            transport=transport, base_url="http://t", headers=headers, **kwargs
        )

    def answer(self, response: httpx.Response) -> httpx.Response:
        self.texts += [response.text, str(response.headers)]
        return response


async def _stored(store: Store) -> str:
    """Every stored value, as text: the raw files of a SQLite store, every table of a
    PostgreSQL one, or what the memory store gives back through its reads."""
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


async def _converse(seen: Seen, client: httpx.AsyncClient, provider: FakeProvider) -> str:
    """A conversation of ``client`` with one answered turn and one the provider fails
    with an error that echoes its key; then everything there is to read of it."""
    cid = seen.answer(await client.post("/v1/conversations")).json()["id"]
    provider.script(
        Stream(fc.chunk_events("Hello there")),
        fc.error(
            401,
            "invalid_request_error",
            f"{ECHO}: {PROVIDER_KEY}. Check your key.",
            code="invalid_api_key",
        ),
    )
    answered = seen.answer(await client.post(f"/v1/conversations/{cid}/turns", json={"text": "hi"}))
    failed = seen.answer(
        await client.post(f"/v1/conversations/{cid}/turns", json={"text": "again"})
    )
    assert answered.status_code == 200 and answered.json()["stop_reason"] == "end_turn"
    assert failed.status_code == 200 and failed.json()["stop_reason"] == "failed"
    assert ECHO in failed.json()["error"]  # the provider's echo reached the turn's row
    for path in ("/messages", "/turns", "/tool-calls", ""):
        seen.answer(await client.get(f"/v1/conversations/{cid}{path}"))
    return str(cid)


async def _stream_frames(seen: Seen, cid: str, credential: str) -> None:
    """The conversation's event stream, from the start: every stored row as a frame."""
    headers = {"authorization": f"Bearer {credential}"}
    async with seen.client(credential) as client:
        rows = len((await client.get(f"/v1/conversations/{cid}/messages")).json()["messages"])
    assert rows == 3  # hi, its answer, again (the failed turn answered nothing)
    async with open_stream(
        seen.app, "GET", f"/v1/conversations/{cid}/events", headers=headers
    ) as s:
        seen.texts += [(await s.next_frame()).raw for _ in range(rows)]


async def _with_a_key(seen: Seen, runtime: Runtime, provider: FakeProvider) -> None:
    key = (await create_key(runtime.store, "ann", "laptop"))[1]
    seen.planted |= {"api key": key, "api key secret": key.split("_", 2)[2]}  # it may hold "_"
    async with seen.client(key) as ann:
        cid = await _converse(seen, ann, provider)
    await _stream_frames(seen, cid, key)
    wrong = key[:-6] + "ZZZZZZ"
    seen.planted["wrong key"] = wrong
    for credential in (wrong, "ost_" + PROVIDER_KEY, PROVIDER_KEY):
        async with seen.client(credential) as refused:
            assert seen.answer(await refused.get("/v1/conversations")).status_code == 401


async def _with_a_token(seen: Seen, issuer: Issuer, provider: FakeProvider) -> None:
    token = issuer.token(sub="carol")
    seen.planted |= {"jwt": token, "jwt signature": token.rsplit(".", 1)[1]}
    async with seen.client(token) as carol:
        cid = await _converse(seen, carol, provider)
        assert (await carol.get(f"/v1/conversations/{cid}")).json()[
            "owner"
        ] == "oidc:carol"  # keys,oidc: owners apart
    await _stream_frames(seen, cid, token)
    wrong = issuer.token(sub="carol", aud="someone-else")
    seen.planted["wrong jwt"] = wrong
    async with seen.client(wrong) as refused:
        assert seen.answer(await refused.get("/v1/conversations")).status_code == 401


async def _anonymously(seen: Seen, provider: FakeProvider) -> None:
    async with seen.client() as stranger:
        handed = await stranger.get("/v1/caller")  # the one answer that holds the token
    assert handed.status_code == 200
    seen.texts.append(handed.text)  # its body, not its headers
    token = handed.headers[ANONYMOUS_TOKEN_HEADER]
    signed = token.removeprefix(TOKEN_PREFIX)
    assert handed.cookies[ANONYMOUS_COOKIE] == signed
    owner = handed.json()["owner"]
    seen.planted |= {"anonymous token": token, "anonymous signature": signed.rsplit(".", 1)[1]}
    async with seen.client(token) as anonymous:
        cid = await _converse(seen, anonymous, provider)
        assert (await anonymous.get(f"/v1/conversations/{cid}")).json()["owner"] == owner
    await _stream_frames(seen, cid, token)
    async with seen.client(cookies={ANONYMOUS_COOKIE: signed}) as browser:
        assert seen.answer(await browser.get("/v1/caller")).json()["owner"] == owner
    async with seen.client(token[:-4] + "AAAA") as refused:
        assert seen.answer(await refused.get("/v1/conversations")).status_code == 401


async def test_no_planted_secret_is_logged_stored_or_sent(
    runtime: Runtime,
    provider: FakeProvider,
    issuer: Issuer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    oidc = OidcSettings(issuer=issuer.url, audience=[AUDIENCE])
    settings = AuthSettings(mode="keys,oidc", oidc=oidc, allow_anonymous=True, secret=COOKIE_SECRET)
    seen = Seen(create_app(runtime, auth=settings))
    seen.planted |= {"provider key": PROVIDER_KEY, "cookie secret": COOKIE_SECRET}
    await _with_a_key(seen, runtime, provider)
    await _with_a_token(seen, issuer, provider)
    await _anonymously(seen, provider)
    await seen.app.state.ostinato.aclose()
    # the provider key was really sent to the provider, on every call
    assert provider.headers and all(
        h["authorization"] == f"Bearer {PROVIDER_KEY}" for h in provider.headers
    )
    # every record as caught, and as the plain and JSON-lines formats write it
    formats = (logs.formatter("plain"), logs.formatter("json"))
    logged = "\n".join(
        f"{record.name} {record.getMessage()} {record.exc_text or ''}\n"
        + "\n".join(f.format(record) for f in formats)
        for record in caplog.records
    )
    assert any(record.levelno == logging.DEBUG for record in caplog.records)  # DEBUG was on
    stored = await _stored(runtime.store)
    assert stored.count(ECHO) >= 3  # each failed turn's error is in what was searched
    assert len(seen.planted) == 10, sorted(seen.planted)
    for what, secret in seen.planted.items():
        assert secret not in logged, f"the {what} is in the logs"
        assert secret not in stored, f"the {what} is stored"
        for text in seen.texts:
            assert secret not in text, f"the {what} was sent: {text[:200]}"
