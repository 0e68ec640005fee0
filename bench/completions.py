"""What the OpenAI-compatible layer adds over the native stream, per chunk and per request.

Per chunk, measured directly: the frames of one real turn (a scripted model streaming
``--chunks`` text deltas, in memory) are encoded over and over, as each route encodes
them: native, ``sse.encode_frame`` (one SSE event per frame); compat, the completion's
``Chunks`` (``translate.Reply`` then the ``chat.completion.chunk`` events, a fresh
completion each time). The figures are CPU time per frame (best of ``--repeat`` rounds):
what each route spends on a chunk, and the difference.

Per request, end to end: the same turn is asked for over the two routes of one server
(the app under uvicorn on loopback, read by an httpx client as a stream), alternating, so
load on the machine hits both alike:

- native: ``POST /v1/conversations/{id}/turns`` with ``Accept: text/event-stream``, read
  to ``turn.finished``;
- compat: ``POST /v1/chat/completions`` with ``stream: true``, read to ``data: [DONE]``
  (the conversation named by its header, so the two do the same store work).

Each request is timed from sending it to reading the stream's end, in wall time and in
the process's CPU time (server and client share the process; CPU time is what load on a
shared machine disturbs least). The figures are medians. Target: compat under 105% of
native. Run: ``python bench/completions.py [--requests N] [--chunks N] [--repeat N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import threading
import time
import uuid
from collections.abc import Callable

import httpx
import uvicorn

from ostinato.filters import NO_FILTERS
from ostinato.frames import Frame, TextDeltaFrame
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.server.openai_compat.chunks import Chunks
from ostinato.server.openai_compat.translate import Reply
from ostinato.server.openai_compat.wire import Envelope
from ostinato.server.sse import encode_frame
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


# --- per chunk ----------------------------------------------------------------------------


async def turn_frames(chunks: int) -> list[Frame]:
    """The frames of one real turn that streams ``chunks`` text deltas."""
    model = ScriptedModel()
    runtime = Runtime(MemoryStore(), model=model, seed_recall=False)
    cid = (await runtime.create_conversation()).id
    model.add(text_step(" ".join(f"w{i}" for i in range(chunks)), chunks=chunks))
    frames = [frame async for frame in runtime.stream_turn(cid, "go")]
    await runtime.close()
    return frames


def native_round(frames: list[Frame]) -> int:
    return sum(len(encode_frame(frame)) for frame in frames)


def compat_round(frames: list[Frame]) -> int:
    reply = Reply(NO_FILTERS, for_agent=lambda _skill: NO_FILTERS)
    chunks = Chunks(reply, Envelope.new(uuid.uuid4().hex, "ostinato"))
    size = len(chunks.first())
    for frame in frames:
        data, ended = chunks.frame(frame)
        size += len(data)
        if ended:
            break
    return size


def per_frame(encode: Callable[[list[Frame]], int], frames: list[Frame], repeat: int) -> float:
    """The best round's CPU seconds per frame (each round encodes every frame 20 times)."""
    best = float("inf")
    for _ in range(repeat):
        began = time.process_time()
        for _ in range(20):
            encode(frames)
        best = min(best, (time.process_time() - began) / (20 * len(frames)))
    return best


def chunk_costs(chunks: int, repeat: int) -> None:
    frames = asyncio.run(turn_frames(chunks))
    deltas = sum(isinstance(f, TextDeltaFrame) for f in frames)
    native = per_frame(native_round, frames, repeat)
    compat = per_frame(compat_round, frames, repeat)
    print(f"per chunk (one turn: {len(frames)} frames, {deltas} text deltas; CPU, best of "
          f"{repeat}): native {native * 1e6:.2f} us, compat {compat * 1e6:.2f} us, "
          f"added {(compat - native) * 1e6:+.2f} us")  # fmt: skip
    print(f"bytes per turn: native {native_round(frames)}, compat {compat_round(frames)}")


# --- per request --------------------------------------------------------------------------


def timed(read: Callable[[], None]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    read()
    return time.perf_counter() - wall, time.process_time() - cpu


def request_costs(requests: int, chunks: int) -> None:
    model = ScriptedModel()
    url, server = serve(model)
    reply = " ".join(f"w{i}" for i in range(chunks))
    with httpx.Client(base_url=url, timeout=60) as client:
        cid = client.post("/v1/conversations").json()["id"]

        def native() -> None:
            model.add(text_step(reply, chunks=chunks))
            body = {"text": "go"}
            headers = {"accept": "text/event-stream"}
            with client.stream("POST", f"/v1/conversations/{cid}/turns", json=body,
                               headers=headers) as response:  # fmt: skip
                for line in response.iter_lines():
                    if line.startswith("event: turn.finished"):
                        break

        def compat() -> None:
            model.add(text_step(reply, chunks=chunks))
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
        times: dict[str, list[tuple[float, float]]] = {"native": [], "compat": []}
        for _ in range(requests):
            times["native"].append(timed(native))
            times["compat"].append(timed(compat))
    server.should_exit = True
    print(f"per request ({requests} a route, alternating; medians):")
    for i, kind in enumerate(("wall", "CPU")):
        base = statistics.median(t[i] for t in times["native"])
        layer = statistics.median(t[i] for t in times["compat"])
        ratio, added = layer / base * 100, (layer - base) * 1000
        print(f"  {kind:4}  native {base * 1000:7.2f} ms  compat {layer * 1000:7.2f} ms  "
              f"({ratio:5.1f}% of native; {added:+.2f} ms)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=100, help="requests per route")
    parser.add_argument("--chunks", type=int, default=200, help="text deltas per reply")
    parser.add_argument("--repeat", type=int, default=7, help="rounds of the per-chunk timing")
    args = parser.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{args.chunks} chunks a reply")  # fmt: skip
    chunk_costs(args.chunks, args.repeat)
    request_costs(args.requests, args.chunks)


if __name__ == "__main__":
    main()
