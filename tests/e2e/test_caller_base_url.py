"""A caller's own base URL (``x-ostinato-model-base-url``), over HTTP against a real
``ostinato serve``: refused by default, used when the deployment allows it with
``OSTINATO_ALLOW_CALLER_BASE_URL=1`` (the setting ``models.allow_caller_base_url``)."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

from tests.e2e.server import Server

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fakes import as `fakes`
from fakes.openai_chat import FakeChat, chunk_events
from fakes.server import Stream


def _turn(url: str, fake: FakeChat) -> httpx.Response:
    cid = httpx.post(f"{url}/v1/conversations").json()["id"]
    headers = {
        "accept": "application/json",
        "x-ostinato-model-id": "openai-compatible:fake-model",
        "x-ostinato-model-base-url": f"{fake.url}/v1",
    }
    return httpx.post(
        f"{url}/v1/conversations/{cid}/turns", json={"text": "hi"}, headers=headers, timeout=30
    )


def test_a_callers_base_url_is_refused_unless_the_deployment_allows_it(tmp_path: Path) -> None:
    with FakeChat() as fake:
        for allowed in (False, True):
            env = {"OSTINATO_MODEL": "offline:ostinato"}
            if allowed:
                env["OSTINATO_ALLOW_CALLER_BASE_URL"] = "1"
                fake.script(Stream(chunk_events("An answer from the caller's own server.")))
            server = Server(
                f"sqlite:///{tmp_path / f'{allowed}.db'}",
                tmp_path / "data",
                tmp_path / f"serve-{allowed}.log",
                env,
            )
            url = server.start()
            try:
                response = _turn(url, fake)
            finally:
                server.kill()
            if not allowed:
                assert response.status_code == 422, response.text
                message = response.json()["error"]["message"]
                assert "x-ostinato-model-base-url is not allowed" in message
                assert "OSTINATO_ALLOW_CALLER_BASE_URL=1" in message
                assert not fake.requests
                continue
            assert response.status_code == 200, response.text
            texts = [
                block["text"]
                for message in response.json()["messages"]
                if message["role"] == "assistant"
                for block in message["blocks"]
                if block["type"] == "text"
            ]
            assert texts[-1] == "An answer from the caller's own server."
            assert len(fake.requests) == 1 and fake.requests[0]["model"] == "fake-model"
            fake.assert_clean()
