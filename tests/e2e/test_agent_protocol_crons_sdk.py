"""The official ``langgraph-sdk`` Python client's crons against a real ``ostinato serve``
(the offline model) on SQLite and PostgreSQL: a cron on a thread, set to fire two
seconds on (one of ostinato's schedule forms beside cron expressions), runs in the
thread as the server's poller finds it due; it is searched and counted, moved to a
cron expression and disabled, and deleted; a stateless cron is refused."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import UnprocessableEntityError

from tests.e2e.hostile import serving

pytestmark = pytest.mark.parametrize("engine", ["sqlite", "postgres"])


async def crons(url: str) -> None:
    client = get_client(url=f"{url}/langgraph")
    tid = (await client.threads.create())["thread_id"]
    said = {"messages": [{"role": "user", "content": "good morning"}]}
    cron = await client.crons.create_for_thread(
        tid, "ostinato", schedule="in 2 seconds", input=said, metadata={"kind": "e2e"}
    )
    assert cron["thread_id"] == tid and cron["next_run_date"] is not None
    # The poller looks every half second; once the run's turn has ended, its next look
    # advances the cron (a one-shot then has no next run), so both are waited for.
    for _ in range(600):
        messages = (await client.threads.get_state(tid))["values"]["messages"]
        (found,) = await client.crons.search(thread_id=tid, metadata={"kind": "e2e"})
        if [m["type"] for m in messages] == ["human", "ai"] and found["next_run_date"] is None:
            break
        await asyncio.sleep(0.1)
    assert messages[0]["content"] == "good morning" and messages[1]["type"] == "ai"
    assert found["cron_id"] == cron["cron_id"] and found["next_run_date"] is None  # it ran
    assert await client.crons.count(thread_id=tid) == 1
    moved = await client.crons.update(cron["cron_id"], schedule="0 9 * * *")
    assert moved["schedule"] == "0 9 * * *" and moved["next_run_date"].endswith("09:00:00+00:00")
    off = await client.crons.update(cron["cron_id"], enabled=False)
    assert off["enabled"] is False and off["next_run_date"] is None
    await client.crons.delete(cron["cron_id"])
    assert await client.crons.count() == 0 and await client.crons.search() == []
    with pytest.raises(UnprocessableEntityError):
        await client.crons.create("ostinato", schedule="0 9 * * *", input=said)


def test_the_langgraph_python_client_keeps_crons(engine: str, tmp_path: Path) -> None:
    with serving(engine, tmp_path) as server:
        asyncio.run(crons(server.url))
