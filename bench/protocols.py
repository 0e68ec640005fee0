"""What a streamed turn costs through each protocol's route, against the native route.

One server (the app under uvicorn on loopback, a scripted model streaming ``--chunks``
text deltas, the memory store) answers the same turn over each route, in turn, so load
on the machine hits every route alike, each turn the first of a new conversation (made
before the timing starts); each request is read as a stream by an httpx client to its
end:

- native: ``POST /v1/conversations/{id}/turns`` with ``Accept: text/event-stream``, to
  ``turn.finished``;
- responses: ``POST /v1/responses`` with ``stream: true`` in the same conversation, to
  ``response.completed``;
- agent protocol: ``POST /langgraph/threads/{id}/runs/stream`` (stream mode
  ``messages-tuple`` and ``values``), to its ``end`` event (when the route is served).

Each request is timed in the process's CPU time (server and client share the process;
CPU is what load on a shared machine disturbs least) and in wall time; the figures are
medians, and each route's is given as a share of the native route's. Target: under
110%. Run: ``python bench/protocols.py [--requests N] [--chunks N]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections.abc import Callable

import httpx
import uvicorn

from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.memory import MemoryStore


def serve(model: ScriptedModel) -> tuple[str, uvicorn.Server, set[str]]:
    runtime = Runtime(MemoryStore(), model=model, seed_recall=False)
    app = create_app(runtime, model_name=model.name, store_name="memory://")
    paths = set(app.openapi()["paths"])
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical", log_config=None)
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    return f"http://127.0.0.1:{port}", server, paths


def read_until(response: httpx.Response, end: str) -> None:
    for line in response.iter_lines():
        if line.startswith(end):
            return
    raise AssertionError(f"the stream ended before {end!r}")


Read = Callable[[str], None]


def routes(client: httpx.Client, paths: set[str]) -> dict[str, Read]:
    def native(cid: str) -> None:
        with client.stream(
            "POST",
            f"/v1/conversations/{cid}/turns",
            json={"text": "go"},
            headers={"accept": "text/event-stream"},
        ) as response:
            read_until(response, "event: turn.finished")

    def responses(cid: str) -> None:
        body = {"model": "ostinato", "input": "go", "stream": True, "conversation": cid}
        with client.stream("POST", "/v1/responses", json=body) as response:
            read_until(response, "event: response.completed")

    def agent_protocol(cid: str) -> None:
        body = {
            "assistant_id": "ostinato",
            "input": {"messages": [{"role": "user", "content": "go"}]},
            "stream_mode": ["values", "messages-tuple"],
        }
        path = f"/langgraph/threads/{cid}/runs/stream"
        with client.stream("POST", path, json=body) as response:
            read_until(response, "event: end")

    found: dict[str, Read] = {"native": native, "responses": responses}
    if "/langgraph/threads/{thread_id}/runs/stream" in paths:
        found["agent protocol"] = agent_protocol
    return found


def timed(read: Callable[[], None]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    read()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=100, help="requests per route")
    parser.add_argument("--chunks", type=int, default=200, help="text deltas per reply")
    args = parser.parse_args()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average {load}; {args.chunks} chunks a reply, {args.requests} a route")
    model = ScriptedModel()
    url, server, paths = serve(model)
    reply = " ".join(f"w{i}" for i in range(args.chunks))
    with httpx.Client(base_url=url, timeout=60) as client:
        asked = routes(client, paths)

        def turn(read: Read) -> tuple[float, float]:
            cid = client.post("/v1/conversations").json()["id"]  # a new one: one turn each
            model.add(text_step(reply, chunks=args.chunks))
            return timed(lambda: read(cid))

        for read in [*asked.values()] * 2:  # warm up
            turn(read)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in asked}
        for _ in range(args.requests):
            for name, read in asked.items():
                times[name].append(turn(read))
    server.should_exit = True
    base = [statistics.median(t[i] for t in times["native"]) for i in (0, 1)]
    for name, taken in times.items():
        wall, cpu = (statistics.median(t[i] for t in taken) for i in (0, 1))
        print(
            f"  {name:15} CPU {cpu * 1000:7.2f} ms ({cpu / base[1] * 100:5.1f}% of native)  "
            f"wall {wall * 1000:7.2f} ms ({wall / base[0] * 100:5.1f}%)"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
