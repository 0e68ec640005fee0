"""Two ``ostinato serve`` processes on one PostgreSQL database, with the official
``a2a-sdk`` client (issue 31): a task streamed from one server, its stream dropped, is
resubscribed on the other (``SubscribeToTask``) and followed to its end with nothing
lost: the answer rebuilt from the events is the answer the first server stores. (Two
plain SQLite servers share no live frames: docs/concurrency.md.)"""

from __future__ import annotations

from pathlib import Path

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import GetTaskRequest, SubscribeToTaskRequest, TaskState

from tests.e2e.fake_model import AnsweringChat
from tests.e2e.server import Server
from tests.e2e.test_fault_injection import scratch_postgres
from tests.server.a2a.test_a2a_sdk import answer_text, collect, follow, message


async def test_a_dropped_stream_resubscribes_on_the_other_server(tmp_path: Path) -> None:
    with scratch_postgres() as url, AnsweringChat() as fake:
        env = {
            "OSTINATO_MODEL": "openai-chat:fake-model",
            "OPENAI_BASE_URL": f"{fake.url}/v1",
            "OPENAI_API_KEY": "k",
            "OSTINATO_DATA__TITLES": "off",
        }
        one = Server(url, tmp_path / "data1", tmp_path / "serve1.log", env)
        two = Server(url, tmp_path / "data2", tmp_path / "serve2.log", env)
        try:
            one.start()
            two.start()
            async with httpx.AsyncClient(timeout=60) as http:
                config = ClientConfig(httpx_client=http, streaming=True)
                first = await ClientFactory(config).create_from_url(one.url)
                second = await ClientFactory(config).create_from_url(two.url)
                stream = first.send_message(message("/slow 80"))
                seen = [await anext(stream), await anext(stream)]  # the task, a first part
                await stream.aclose()  # the connection drops; the task goes on
                task = follow(seen)
                resumed = await collect(second.subscribe(SubscribeToTaskRequest(id=task.id)))
                final = follow(resumed)
                stored = await first.get_task(GetTaskRequest(id=task.id))
        finally:
            one.kill()
            two.kill()
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(final) == answer_text(stored) == "".join(f"w{i} " for i in range(80))
