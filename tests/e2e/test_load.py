"""A bounded load test: 300 turns streamed at once from one ``ostinato serve`` process
(SQLite) against a loopback fake model, and none of them fails.

Correctness only, never time: every turn answers 200, streams every token the model
wrote and ends with a ``turn.finished`` without an error; every reply is
stored. The fake model streams 5 tokens a reply (20 ms apart) so the test stays a few
seconds; ``bench/serve_load.py`` measures the same path at full length.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.loadkit import FakeModel, Turn, bounded, call, conversations, serve_fake
from tests.e2e.server import Server

TURNS = 300


@pytest.fixture
def fake_model() -> Iterator[tuple[FakeModel, int]]:
    """The fake model on its own event loop, in a thread."""
    model = FakeModel(first_token=0.02, rate=50.0, tokens=5)
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(serve_fake(model))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield model, int(server.sockets[0].getsockname()[1])
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        server.close()
        loop.close()


async def _load(port: int) -> tuple[list[str], list[Turn]]:
    ids = await conversations(port, TURNS)
    texts = [f"slow-{i} go" for i in range(TURNS)]
    turns = await asyncio.gather(*(bounded(port, c, t) for c, t in zip(ids, texts, strict=True)))
    return ids, list(turns)


def test_300_concurrent_streamed_turns_all_finish(
    tmp_path: Path, fake_model: tuple[FakeModel, int]
) -> None:
    model, model_port = fake_model
    # titles by the first words: a title's own model call would be counted as a turn's
    env = {"OSTINATO_BASE_URL": f"http://127.0.0.1:{model_port}/v1", "OSTINATO_DATA__TITLES": "off"}
    server = Server(f"sqlite:///{tmp_path}/load.db", tmp_path / "data", tmp_path / "log", env)
    server.start()
    try:
        port = int(server.url.rsplit(":", 1)[1])
        ids, turns = asyncio.run(_load(port))
        failed = [(i, t.why) for i, t in enumerate(turns) if not t.ok]
        assert failed == [], f"{len(failed)} turns failed: {failed[:5]}\n{server.tail()}"
        assert all(t.tokens == model.tokens for t in turns), [t.tokens for t in turns]
        assert model.requests == TURNS
        for cid in ids[:: TURNS // 10]:  # every reply was stored: a sample of them
            status, page = asyncio.run(call(port, "GET", f"/v1/conversations/{cid}/messages"))
            assert status == 200
            roles = [m["role"] for m in page["messages"] if not m.get("hidden")]
            assert roles[-2:] == ["user", "assistant"], page
            assert page["messages"][-1]["blocks"][0]["text"].count(" ") == model.tokens
    finally:
        server.kill()
