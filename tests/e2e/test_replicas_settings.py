"""Settings that change at run time hold on every server (issue 16 item 5): two real
``ostinato serve`` processes on one PostgreSQL database, in ``keys`` mode. A key revoked
in the database is refused by both (each trusts a key's row for ``key_cache_s``, then
reads it again); a grant remembered on one server approves the same call on the other
(grants are read from the store on each use); an owner's running-turns limit counts a
turn on one server against a message sent to the other (slots are rows in the store).
(Tool switches across servers: ``tests/test_fanout.py``.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ostinato.identity.keys import create_key, revoke_key
from ostinato.store import open_store
from tests.e2e.fake_model import AnsweringChat
from tests.e2e.server import Server
from tests.e2e.test_fault_injection import scratch_postgres

WAIT = 30.0
KEY_CACHE_S = "0.5"


def _keys(url: str, *owners: str) -> dict[str, tuple[str, str]]:
    """A key for each owner, made in the database as ``ostinato keys create`` does."""

    async def make() -> dict[str, tuple[str, str]]:
        store = await open_store(url)
        try:
            made = {who: await create_key(store, who, "test") for who in owners}
            return {who: (key.id, text) for who, (key, text) in made.items()}
        finally:
            await store.close()

    return asyncio.run(make())


def _revoke(url: str, key_id: str) -> None:
    async def revoke() -> None:
        store = await open_store(url)
        try:
            await revoke_key(store, key_id)
        finally:
            await store.close()

    asyncio.run(revoke())


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server, str]]:
    tmp = tmp_path_factory.mktemp("settings")
    with scratch_postgres() as url, AnsweringChat() as fake:
        env = {
            "OSTINATO_MODEL": "openai-chat:fake-model",
            "OPENAI_BASE_URL": f"{fake.url}/v1",
            "OPENAI_API_KEY": "k",
            "OSTINATO_SERVER__FANOUT_CHANNEL": f"test_{uuid.uuid4().hex[:12]}",
            "OSTINATO_AUTH__MODE": "keys",
            "OSTINATO_AUTH__KEY_CACHE_S": KEY_CACHE_S,
            "OSTINATO_AUTH__LIMITS__RUNNING_TURNS": "1",
            "OSTINATO_AUTH__LIMITS__TURNS_PER_MINUTE": "0",
        }
        pooled = f"{url}?pool_size=3&max_overflow=3"
        servers = [Server(pooled, tmp / f"d{i}", tmp / f"s{i}.log", env) for i in range(2)]
        try:
            for server in servers:
                server.start()
            yield servers[0], servers[1], pooled
        finally:
            for server in servers:
                server.kill()


def _auth(key: str) -> dict[str, Any]:
    return {"headers": {"authorization": f"Bearer {key}"}}


def _conversation(server: Server, key: str) -> str:
    created = server.post("/v1/conversations", {}, **_auth(key))
    assert created.status_code == 201, created.text
    cid: str = created.json()["id"]
    return cid


def test_a_key_revoked_in_the_database_is_refused_by_every_server(
    pair: tuple[Server, Server, str],
) -> None:
    a, b, url = pair
    ((key_id, key),) = _keys(url, "cat").values()
    for server in (a, b):  # both have read the key (and keep it for key_cache_s)
        assert server.get("/v1/conversations", **_auth(key)).status_code == 200
    _revoke(url, key_id)
    deadline = time.monotonic() + WAIT
    refused: set[int] = set()
    while len(refused) < 2:
        assert time.monotonic() < deadline, "a server still takes the revoked key"
        for i, server in enumerate((a, b)):
            if server.get("/v1/conversations", **_auth(key)).status_code == 401:
                refused.add(i)
        time.sleep(0.1)
    assert {s.get("/v1/conversations", **_auth(key)).status_code for s in (a, b)} == {401}


class _Watching(threading.Thread):
    """An ``/events`` stream of one conversation held open (a surface, so an approval
    can be asked), with a key."""

    def __init__(self, server: Server, cid: str, key: str) -> None:
        super().__init__(daemon=True)
        self.url = f"{server.url}/v1/conversations/{cid}/events"
        self.key, self.opened, self.stop = key, threading.Event(), threading.Event()
        self.start()
        assert self.opened.wait(WAIT)

    def run(self) -> None:
        headers = {"authorization": f"Bearer {self.key}", "accept": "text/event-stream"}
        with (
            contextlib.suppress(httpx.HTTPError),  # it ends when its server is killed
            httpx.stream("GET", self.url, headers=headers, timeout=WAIT) as response,
        ):
            self.opened.set()
            for _ in response.iter_bytes():
                if self.stop.is_set():
                    return
        self.opened.set()


def _in_thread(call: Any) -> tuple[threading.Thread, list[httpx.Response]]:
    answers: list[httpx.Response] = []
    thread = threading.Thread(target=lambda: answers.append(call()), daemon=True)
    thread.start()
    return thread, answers


def test_a_grant_remembered_on_one_server_approves_the_call_on_the_other(
    pair: tuple[Server, Server, str],
) -> None:
    a, b, url = pair
    ((_, key),) = _keys(url, "dan").values()
    text = "/tool shell " + json.dumps({"command": "echo granted"})
    first = _conversation(a, key)
    watching = _Watching(a, first, key)
    turn, answers = _in_thread(
        lambda: a.post(f"/v1/conversations/{first}/turns", {"text": text}, **_auth(key))
    )
    deadline = time.monotonic() + WAIT
    pending: list[dict[str, Any]] = []
    while not pending:
        assert time.monotonic() < deadline, "no approval was asked"
        got = a.get(f"/v1/conversations/{first}/approvals?pending=true", **_auth(key))
        pending = got.json()["approvals"]
        time.sleep(0.05)
    path = f"/v1/conversations/{first}/approvals/{pending[0]['id']}"
    decided = a.post(path, {"decision": "approve", "remember": "exact"}, **_auth(key))
    assert decided.status_code == 200, decided.text
    turn.join(WAIT)
    watching.stop.set()
    assert answers and answers[0].json()["stop_reason"] == "end_turn"
    second = _conversation(b, key)  # another conversation of dan's, on the other server
    ran = b.post(f"/v1/conversations/{second}/turns", {"text": text}, **_auth(key))
    assert ran.status_code == 200 and ran.json()["stop_reason"] == "end_turn", ran.text
    (audit,) = b.get(f"/v1/conversations/{second}/approvals", **_auth(key)).json()["approvals"]
    assert audit["ending"] == "APPROVED" and audit["decided_by"].startswith(
        "grant "
    )  # nobody asked
    results = [
        block
        for row in ran.json()["messages"]
        for block in row["blocks"]
        if block["type"] == "tool_result" and block["tool_use_id"].startswith("call_")
    ]
    assert len(results) == 1 and not results[0]["is_error"], results  # ran, nobody asked
    assert "granted" in json.dumps(results[0]["content"])


def test_an_owners_running_turn_on_one_server_counts_on_the_other(
    pair: tuple[Server, Server, str],
) -> None:
    a, b, url = pair
    ((_, key),) = _keys(url, "eve").values()
    busy, other = _conversation(a, key), _conversation(a, key)
    long_turn, _ = _in_thread(
        lambda: a.post(f"/v1/conversations/{busy}/turns", {"text": "/slow 60"}, **_auth(key))
    )
    deadline = time.monotonic() + WAIT
    while a.get(f"/v1/conversations/{busy}", **_auth(key)).json()["state"] != "running":
        assert time.monotonic() < deadline, "the long turn did not start"
        time.sleep(0.05)
    refused = b.post(f"/v1/conversations/{other}/turns", {"text": "hi"}, **_auth(key))
    assert refused.status_code == 429, refused.text  # eve's one slot is held on a
    assert refused.json()["error"]["code"] == "limit_exceeded"
    assert int(refused.headers["retry-after"]) >= 1
    assert a.post(f"/v1/conversations/{busy}/cancel", **_auth(key)).status_code == 200
    long_turn.join(WAIT)
    deadline = time.monotonic() + WAIT
    while (
        later := b.post(f"/v1/conversations/{other}/turns", {"text": "hi"}, **_auth(key))
    ).status_code == 429:
        assert time.monotonic() < deadline, "the slot did not come back"
        time.sleep(0.2)
    assert later.status_code == 200 and later.json()["stop_reason"] == "end_turn", later.text
