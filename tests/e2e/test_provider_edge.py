"""Black box: ``ostinato serve`` (a real process, the default configuration) against a fake
of llama.cpp's Python server, over HTTP, on SQLite and PostgreSQL.

The fake (``LlamaCppServer``) validates requests as strictly as ``llama_cpp.server`` does
(an assistant ``content`` of ``null`` is its 500), sends no usage in streams, and answers
three commands for the fault cases: ``/echo-key`` (a 401 that repeats the key it was sent),
``/silent`` (headers, then nothing) and ``/fail`` (a 400). The server runs with a short
idle timeout, so the silent case ends in well under a second per attempt.

- issue 9 item 1: a three-turn default conversation ends ``end_turn`` three times and the
  fake saw no request it would refuse;
- issue 9 item 8: the metrics say the counts are estimated (not zeros), and an error names
  the server (``openai-compatible at 127.0.0.1:<port>``), not ``openai``;
- issue 10 item 7: a key the provider echoes (the deployment's, or a caller's own) is in
  none of the JSON result, the ``error`` and ``turn.finished`` frames, the stored turn row;
- issue 10 item 8: a provider that goes silent ends the call as a retried ``stream_idle``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from starlette.requests import Request
from starlette.responses import Response

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # makes `fakes` importable

from fakes.compatible import DIALECTS, check_message
from fakes.openai_chat import error
from fakes.server import Failure, Stream
from tests.e2e.fake_model import AnsweringChat
from tests.e2e.server import Server
from tests.server.sse_client import frames, parse_stream
from tests.store.conftest import POSTGRES_ENV, _admin

DEPLOYMENT_KEY = "deploy-key-0123456789"  # shaped like nothing: only registration hides it
CALLER_KEY = "caller-key-9876543210"
IDLE = "0.4"  # seconds: the server's idle timeout


class LlamaCppServer(AnsweringChat):
    """llama.cpp's Python server as ostinato meets it (see the module docstring)."""

    dialect = DIALECTS["llama-cpp-python"]

    def check(self, body: dict[str, Any]) -> list[str]:
        problems = super().check(body)
        for i, message in enumerate(body.get("messages") or []):
            problems += [f"messages[{i}]: {p}" for p in check_message(self.dialect, message)]
        return problems

    def violation_reply(self, problems: list[str]) -> Failure:
        return error(500, "internal_server_error", problems[0], code=None)

    def respond(self, body: dict[str, Any]) -> Stream:
        said = _last_user_text(body)
        if said.startswith("/silent"):
            return Stream([], hang=True)
        stream = super().respond(body)
        no_usage = [e for e in stream.events if not (isinstance(e[1], dict) and "usage" in e[1])]
        return Stream(no_usage, delay=stream.delay)

    async def _handle(self, request: Request) -> Response:
        body = await request.json()
        said = _last_user_text(body)
        if said.startswith(("/echo-key", "/fail")):
            self.requests.append(body)
            key = request.headers.get("authorization", "").removeprefix("Bearer ")
            reply = (
                error(401, "invalid_request_error", f"invalid x-api-key: {key}", code=None)
                if said.startswith("/echo-key")
                else error(400, "invalid_request_error", "model is not loaded", code=None)
            )
            return Response(json.dumps(reply.body), reply.status, media_type="application/json")
        return await super()._handle(request)


def _last_user_text(body: dict[str, Any]) -> str:
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    content = users[-1].get("content") if users else ""
    return content if isinstance(content, str) else ""


@contextlib.contextmanager
def database(engine: str, tmp_path: Path) -> Iterator[str]:
    if engine == "sqlite":
        yield f"sqlite:///{tmp_path / 'edge.db'}"
        return
    raw = os.environ.get(POSTGRES_ENV)
    if not raw:
        pytest.skip(f"PostgreSQL needs {POSTGRES_ENV}=postgresql://user@host:port/db")
    admin = sa.make_url(raw)
    name = f"ostinato_edge_{uuid.uuid4().hex[:12]}"
    _admin(admin, f'CREATE DATABASE "{name}"')
    try:
        url = admin.set(drivername="postgresql+asyncpg", database=name)
        yield url.render_as_string(hide_password=False)
    finally:
        _admin(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, LlamaCppServer]]:
    tmp_path = tmp_path_factory.mktemp(f"edge-{request.param}")
    with database(request.param, tmp_path) as url, LlamaCppServer() as fake:
        env = {
            "OSTINATO_BASE_URL": f"{fake.url}/v1",
            "OSTINATO_API_KEY": DEPLOYMENT_KEY,
            "OSTINATO_MODELS__IDLE_TIMEOUT": IDLE,
        }
        server = Server(url, tmp_path / "data", tmp_path / "serve.log", env)
        server.start()
        try:
            yield server, fake
        finally:
            server.kill()


def turn(server: Server, cid: str, text: str, **headers: str) -> dict[str, Any]:
    answer = server.post(f"/v1/conversations/{cid}/turns", {"text": text}, headers=headers)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def new_conversation(server: Server) -> str:
    answer = server.post("/v1/conversations")
    assert answer.status_code == 201, answer.text
    cid: str = answer.json()["id"]
    return cid


def stored_turn_errors(database_url: str, cid: str) -> list[str]:
    """The ``error`` column of the conversation's turn rows, read from the database."""
    query = "SELECT error FROM turns WHERE conversation_id = {} AND error IS NOT NULL"
    if database_url.startswith("sqlite"):
        with contextlib.closing(sqlite3.connect(database_url.removeprefix("sqlite:///"))) as db:
            return [row[0] for row in db.execute(query.format("?"), (cid,))]
    return asyncio.run(_postgres_errors(database_url, query.format("$1"), cid))


async def _postgres_errors(database_url: str, query: str, cid: str) -> list[str]:
    import asyncpg

    url = sa.make_url(database_url)
    conn = await asyncpg.connect(
        user=url.username,
        password=url.password,
        host=url.host,
        port=url.port,
        database=url.database,
    )
    try:
        return [row[0] for row in await conn.fetch(query, cid)]
    finally:
        await conn.close()


def test_a_three_turn_default_conversation(served: tuple[Server, LlamaCppServer]) -> None:
    server, fake = served
    cid = new_conversation(server)
    for text in ("Hello!", "What is the capital of France?", "Thanks, bye."):
        result = turn(server, cid, text)
        assert result["stop_reason"] == "end_turn", result["error"]
        assert result["messages"][-1]["role"] == "assistant"
        assert result["messages"][-1]["blocks"][0]["text"]
        metrics = result["metrics"]  # llama.cpp sent no usage: estimated, and said so
        assert metrics["tokens_source"] == "estimate" and metrics["tokens_in"] > 0
    assert not fake.bad_requests, fake.violations
    rows = server.get(f"/v1/conversations/{cid}/messages").json()["messages"]
    assert rows[-1]["metadata"]["metrics"]["tokens_source"] == "estimate"


def test_an_error_names_the_server(served: tuple[Server, LlamaCppServer]) -> None:
    server, fake = served
    result = turn(server, new_conversation(server), "/fail")
    assert result["stop_reason"] == "failed"
    assert result["error"].startswith(
        f"model_error: openai-compatible at 127.0.0.1:{fake.port}: "
    ), result["error"]
    assert "model is not loaded" in result["error"]


@pytest.mark.parametrize("key", [DEPLOYMENT_KEY, CALLER_KEY])
def test_an_echoed_key_is_stored_and_shown_nowhere(
    served: tuple[Server, LlamaCppServer], key: str
) -> None:
    server, _ = served
    headers = {"x-ostinato-model-api-key": key} if key == CALLER_KEY else {}
    cid = new_conversation(server)
    result = turn(server, cid, "/echo-key", **headers)
    assert result["stop_reason"] == "failed"
    assert result["error"].startswith("authentication_failed: openai-compatible at ")
    assert "invalid x-api-key: [redacted]" in result["error"]
    with httpx.stream(
        "POST",
        f"{server.url}/v1/conversations/{cid}/turns",
        json={"text": "/echo-key again"},
        headers={"accept": "text/event-stream", **headers},
        timeout=60,
    ) as answer:
        body = answer.read().decode()
    said = [f for f in frames(parse_stream(body)) if f.event in ("error", "turn.finished")]
    assert [f.event for f in said] == ["error", "turn.finished"]
    assert "[redacted]" in said[0].data["message"]
    stored = stored_turn_errors(server.database_url, cid)
    assert len(stored) == 2
    for text in (json.dumps(result), body, *stored):
        assert key not in text


def test_a_silent_provider_fails_the_call_as_idle(served: tuple[Server, LlamaCppServer]) -> None:
    server, _ = served
    cid = new_conversation(server)
    with httpx.stream(
        "POST",
        f"{server.url}/v1/conversations/{cid}/turns",
        json={"text": "/silent please"},
        headers={"accept": "text/event-stream"},
        timeout=120,
    ) as answer:
        body = answer.read().decode()
    events = frames(parse_stream(body))
    retries = [f.data for f in events if f.event == "model.retrying"]
    assert retries and all(r["error"].startswith("stream_idle: ") for r in retries)
    finished = events[-1]
    assert finished.event == "turn.finished" and finished.data["stop_reason"] == "failed"
    assert finished.data["error"].startswith("stream_idle: openai-compatible at ")
    assert f"sent nothing for {float(IDLE):g} s" in finished.data["error"]
