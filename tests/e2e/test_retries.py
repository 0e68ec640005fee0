"""Issue 10 item 3, black-box against ``ostinato serve`` on SQLite and PostgreSQL: a
request sent again with its ``Idempotency-Key`` (at once from several clients, and after
the server was SIGKILLed and started again) gets the first answer and stores nothing
new; the same key with another body is a 422. And a body limit set in the environment
(``[requests]``) is the one the real server applies."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.e2e.server import Server
from tests.e2e.test_fault_injection import database

KEY_C = {"idempotency-key": "c"}


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_retries_store_nothing_twice_across_clients_and_a_restart(
    engine: str, tmp_path: Path
) -> None:
    env = {"OSTINATO_REQUESTS__MESSAGE_BYTES": "4096"}
    with database(engine, tmp_path) as url:
        server = Server(url, tmp_path / "data", tmp_path / "serve.log", env)
        server.start()
        try:
            made = server.post(
                "/v1/conversations", {"title": "t"}, headers={"idempotency-key": "c"}
            )
            cid = made.json()["id"]
            turns = f"/v1/conversations/{cid}/turns"
            first = server.post(turns, {"text": "hello"}, headers={"idempotency-key": "m1"})
            assert first.status_code == 200 and first.json()["stop_reason"] == "end_turn"

            def send(_: int) -> tuple[int, dict[str, object]]:
                answer = server.post(turns, {"text": "again"}, headers={"idempotency-key": "m2"})
                return answer.status_code, answer.json()

            with ThreadPoolExecutor(4) as pool:
                together = list(pool.map(send, range(4)))
            assert {status for status, _ in together} == {200}
            assert all(body == together[0][1] for _, body in together)

            reused = server.post(turns, {"text": "other"}, headers={"idempotency-key": "m1"})
            assert reused.status_code == 422
            assert reused.json()["error"]["code"] == "idempotency_key_reused"
            big = server.post(turns, {"text": "x" * 5000})
            assert big.status_code == 413 and big.json()["error"]["limit_bytes"] == 4096

            server.restart()  # SIGKILL, then a new process on the same database
            again = server.post(turns, {"text": "hello"}, headers={"idempotency-key": "m1"})
            assert again.status_code == 200 and again.json() == first.json()
            remade = server.post(
                "/v1/conversations", {"title": "t"}, headers={"idempotency-key": "c"}
            )
            assert remade.status_code == 201 and remade.json() == made.json()
            rows = server.get(f"/v1/conversations/{cid}/messages").json()["messages"]
            users = [r["blocks"][0]["text"] for r in rows if r["role"] == "user"]
            assert users == ["hello", "again"]
            assert len(server.get("/v1/conversations").json()["conversations"]) == 1
        finally:
            server.kill()
