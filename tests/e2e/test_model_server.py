"""A configured model server (``OSTINATO_BASE_URL``) is the one used, answering or not:
one that does not answer at start-up is not quietly replaced by the offline model; the
banner, ``/healthz`` and each failed turn say it is unreachable (issue 26 item 12)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.server import Server, free_port


def test_an_unreachable_configured_server_is_used_and_reported(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    db = f"sqlite:///{tmp_path / 'reach.db'}"
    server = Server(db, tmp_path / "data", tmp_path / "serve.log", {"OSTINATO_BASE_URL": url})
    server.start()
    try:
        banner = server.tail()
        assert "model:    openai-compatible:default (UNREACHABLE: OSTINATO_BASE_URL" in banner
        assert "offline" not in banner.split("model:", 1)[1].splitlines()[0]
        health = server.get("/healthz").json()
        assert health["status"] == "ok"  # what is stored is still served
        assert health["model_server"] == {
            "url": url,
            "reachable": False,
            "detail": f"the model server at {url} did not answer in 2 s",
        }
        cid = server.post("/v1/conversations").json()["id"]
        turn = server.post(f"/v1/conversations/{cid}/turns", {"text": "hello"}).json()
        assert turn["stop_reason"] == "failed"
        where = url.removeprefix("http://").removesuffix("/v1")
        assert f"openai-compatible at {where}: connection failed" in turn["error"]
    finally:
        server.terminate()
