"""PostgreSQL under contention: a pool with no connection to give is backpressure (a
503 with ``Retry-After``, never a 500 and never a wait without end, in a route or while
the caller is resolved), and four servers whose grouped writes append to the same
conversations at once never fail on a deadlock."""

from __future__ import annotations

import asyncio
import random

import httpx
import sqlalchemy as sa

from ostinato.errors import StoreBusy
from ostinato.ids import new_id
from ostinato.messages import user_text
from ostinato.models.scripted import ScriptedModel
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.server.auth.middleware import AuthMiddleware
from ostinato.store.base import AppendMessage, Conversation, CreateConversation, utcnow
from ostinato.store.sql.postgres import PostgresStore
from tests.store.conftest import open_postgres, postgres_url

__all__ = ["postgres_url"]

SERVERS, CONVERSATIONS, ROUNDS = 4, 24, 12


async def test_an_exhausted_pool_answers_503_with_retry_after(postgres_url: sa.URL) -> None:
    await (await open_postgres(postgres_url)).close()  # the tables emptied
    url = postgres_url.update_query_dict({"pool_size": "1", "max_overflow": "0"})
    store = await PostgresStore.open(url.update_query_dict({"pool_timeout": "0.2"}))
    runtime = Runtime(store, model=ScriptedModel())
    app = create_app(runtime, model_name="scripted:model", store_name="test")
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            made = await client.post("/v1/conversations", json={})
            cid = made.json()["id"]
            async with store.engine.connect():  # the pool's one connection, held
                read = await client.get(f"/v1/conversations/{cid}")
                sent = await client.post(f"/v1/conversations/{cid}/turns", json={"text": "hi"})
            again = await client.get(f"/v1/conversations/{cid}")
        for answer in (read, sent):
            assert answer.status_code == 503, answer.text
            assert answer.headers["retry-after"] == "1"
            assert answer.json()["error"]["code"] == "store_busy"
        assert again.status_code == 200  # the connection back: served again
    finally:
        await runtime.close()


async def test_four_servers_appending_at_once_never_fail_on_deadlock(postgres_url: sa.URL) -> None:
    first = await open_postgres(postgres_url)
    stores = [first, *[await PostgresStore.open(postgres_url) for _ in range(SERVERS - 1)]]
    try:
        now = utcnow()
        cids = [new_id() for _ in range(CONVERSATIONS)]
        for cid in cids:
            await first.write(CreateConversation(Conversation(cid, "idle", now, now)))
        shuffle = random.Random(7).shuffle

        def appends(store: PostgresStore) -> list[asyncio.Future[list[object]]]:
            order = list(cids)
            shuffle(order)  # each server meets the conversations in its own order
            return [
                asyncio.ensure_future(store.write(AppendMessage(cid, user_text("m"))))
                for cid in order
            ]

        for _ in range(ROUNDS):  # each server's appends of a round: one group
            await asyncio.gather(*(w for store in stores for w in appends(store)))  # none fails
        for cid in cids:
            seqs = [m.seq for m in await first.list_messages(cid, include_hidden=True)]
            assert seqs == list(range(1, SERVERS * ROUNDS + 1))  # none lost, none twice
    finally:
        for store in stores:
            await store.close()


async def test_a_busy_store_while_resolving_the_caller_is_a_503() -> None:
    class Busy:
        async def resolve(self, connection: object) -> object:
            raise StoreBusy("the database is busy", retry_after=1)

    async def inner(scope: object, receive: object, send: object) -> None:
        raise AssertionError("never reached")

    app = AuthMiddleware(inner, authenticator=Busy())  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        answer = await client.get("/v1/conversations")
    assert answer.status_code == 503
    assert answer.headers["retry-after"] == "1"
    assert answer.json()["error"]["code"] == "store_busy"
