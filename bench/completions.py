"""What the OpenAI-compatible layer adds over the native stream.

The same turn (a scripted model streaming ``--chunks`` text deltas, in memory) is asked
for in turn over the two routes of one server (the app under uvicorn on loopback, read by
an httpx client as a stream):

- native: ``POST /v1/conversations/{id}/turns`` with ``Accept: text/event-stream``, read
  to ``turn.finished``;
- compat: ``POST /v1/chat/completions`` with ``stream: true``, read to ``data: [DONE]``
  (the conversation named by its header, so the two do the same store work).

Each request is timed from sending it to reading the stream's end; the figures are the
medians, and the difference divided by the chunks is the added cost per chunk. The two
routes alternate, so load on the machine hits both alike. Target: compat under 105% of
native. Run: ``python bench/completions.py [--requests N] [--chunks N]``.
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


def serve(model: ScriptedModel) -> tuple[str, uvicorn.Server]:
    runtime = Runtime(MemoryStore(), model=model, seed_recall=False)
    app = create_app(runtime, model_name=model.name, store_name="memory://")
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical", log_config=None)
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    return f"http://127.0.0.1:{port}", server


def timed(read: Callable[[], None]) -> float:
    began = time.perf_counter()
    read()
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=100, help="requests per route")
    parser.add_argument("--chunks", type=int, default=200, help="text deltas per reply")
    args = parser.parse_args()
    model = ScriptedModel()
    url, server = serve(model)
    reply = " ".join(f"w{i}" for i in range(args.chunks))
    with httpx.Client(base_url=url, timeout=60) as client:
        cid = client.post("/v1/conversations").json()["id"]

        def native() -> None:
            model.add(text_step(reply, chunks=args.chunks))
            body = {"text": "go"}
            headers = {"accept": "text/event-stream"}
            with client.stream("POST", f"/v1/conversations/{cid}/turns", json=body,
                               headers=headers) as response:  # fmt: skip
                for line in response.iter_lines():
                    if line.startswith("event: turn.finished"):
                        break

        def compat() -> None:
            model.add(text_step(reply, chunks=args.chunks))
            body = {"model": "ostinato", "stream": True,
                    "messages": [{"role": "user", "content": "go"}]}  # fmt: skip
            headers = {"x-ostinato-conversation-id": cid}
            with client.stream("POST", "/v1/chat/completions", json=body,
                               headers=headers) as response:  # fmt: skip
                for line in response.iter_lines():
                    if line == "data: [DONE]":
                        break

        for warm in (native, compat, native, compat):
            warm()
        times: dict[str, list[float]] = {"native": [], "compat": []}
        for _ in range(args.requests):
            times["native"].append(timed(native))
            times["compat"].append(timed(compat))
    server.should_exit = True
    base, layer = statistics.median(times["native"]), statistics.median(times["compat"])
    added = layer - base
    print(f"load average {os.getloadavg()[0]:.2f}; {args.requests} requests a route, "
          f"{args.chunks} chunks a reply")  # fmt: skip
    print(f"native SSE turn   median {base * 1000:8.2f} ms")
    print(f"chat completions  median {layer * 1000:8.2f} ms  ({layer / base * 100:.1f}% of native)")
    print(f"added per request {added * 1000:8.2f} ms; per chunk {added / args.chunks * 1e6:.1f} us")


if __name__ == "__main__":
    main()
