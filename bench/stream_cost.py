"""What one streamed token costs: per chunk in each provider adapter, per frame in the SSE.

Adapters: each protocol's fake provider (``tests/fakes``: the documented wire format, the
history rules checked) runs in a child process, and the real adapter (``create_model``:
the SDK client, its HTTP stack, its SSE decoding, ostinato's decoder) reads it over
loopback in this one, so this process's CPU time (``time.process_time``) is the client's
alone. A reply streams ``--deltas`` text deltas (a few characters each, as a model's
tokens are) or one tool call whose arguments come in ``--deltas`` pieces. The figure is
the marginal CPU per delta: (CPU of a reply of N deltas - CPU of a reply of 1) / (N - 1),
so the request's own cost drops out; best and median of ``--rounds`` rounds.

SSE: ``sse.encode_frame`` for the frequent frames (``text.delta``, ``thinking.delta``) and a
``message`` frame (the general path), CPU per frame, best of ``--rounds``; and the whole
per-frame path of a native stream without the socket (``FrameStream`` over
``frame_events``, driven as an ASGI app whose ``send`` does nothing).

``--profile PROTOCOL`` prints the top of a cProfile of one text reply of that protocol.

Run: ``python bench/stream_cost.py [--deltas 2000] [--rounds 7] [--profile anthropic]``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import cProfile
import itertools
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

from ostinato.frames import Frame, MessageCommitted, TextDeltaFrame, ThinkingDeltaFrame
from ostinato.messages import Message, TextBlock, user_text
from ostinato.models import Model, ModelRequest, RetryPolicy, ToolDefinition, create_model
from ostinato.server.sse import FrameStream, encode_frame, frame_events

TESTS = Path(__file__).resolve().parents[1] / "tests"
PROTOCOLS = ("chat", "anthropic", "responses")
WEATHER = ToolDefinition(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
Event = tuple[str | None, Any]


# --- the fake provider's side (a child process) -------------------------------------------


def text_pieces(n: int) -> list[str]:
    return [f" w{i % 100}" for i in range(n)]


def argument_pieces(n: int) -> tuple[dict[str, str], list[str]]:
    """A tool call's arguments and their JSON cut into ``n`` pieces."""
    arguments = {"city": "abcd" * n}
    raw = json.dumps(arguments)
    cuts = [len(raw) * i // n for i in range(n + 1)]
    return arguments, [raw[a:b] for a, b in itertools.pairwise(cuts)]


def _spread(
    events: list[Event], is_delta: Callable[[Event], bool], put: Callable[[Any, str], None],
    pieces: list[str],
) -> list[Event]:  # fmt: skip
    """``events`` with their run of deltas replaced by one delta per piece."""
    first = next(i for i, e in enumerate(events) if is_delta(e))
    end = first
    while end < len(events) and is_delta(events[end]):
        end += 1
    spread: list[Event] = []
    for piece in pieces:
        name, data = copy.deepcopy(events[first])
        put(data, piece)
        spread.append((name, data))
    out = [*events[:first], *spread, *events[end:]]
    for number, (_, data) in enumerate(out, 1):  # the Responses API numbers its events
        if isinstance(data, dict) and "sequence_number" in data:
            data["sequence_number"] = number
    return out


def anthropic_events(kind: str, n: int) -> list[Event]:
    from fakes import anthropic as fa

    def is_delta(event: Event) -> bool:
        return event[0] == "content_block_delta"

    if kind == "text":
        pieces = text_pieces(n)
        events = fa.message_events([{"type": "text", "text": "".join(pieces)}])
        return _spread(events, is_delta, lambda d, p: d["delta"].update(text=p), pieces)
    arguments, pieces = argument_pieces(n)
    block = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": arguments}
    events = fa.message_events([block], "tool_use")
    return _spread(events, is_delta, lambda d, p: d["delta"].update(partial_json=p), pieces)


def chat_events(kind: str, n: int) -> list[Event]:
    from fakes import openai_chat as fc

    def delta(event: Event) -> dict[str, Any]:
        data = event[1]
        choices = data.get("choices") if isinstance(data, dict) else None
        return choices[0]["delta"] if choices else {}

    if kind == "text":
        pieces = text_pieces(n)
        events = fc.chunk_events("".join(pieces))
        return _spread(
            events,
            lambda e: "content" in delta(e) and "role" not in delta(e),
            lambda d, p: d["choices"][0]["delta"].update(content=p),
            pieces,
        )
    arguments, pieces = argument_pieces(n)
    events = fc.chunk_events(calls=[("call_1", "get_weather", arguments)])
    return _spread(
        events,
        lambda e: "id" not in (delta(e).get("tool_calls") or [{"id": 0}])[0],
        lambda d, p: d["choices"][0]["delta"]["tool_calls"][0]["function"].update(arguments=p),
        pieces,
    )


def responses_events(kind: str, n: int) -> list[Event]:
    from fakes import openai_responses as fr

    if kind == "text":
        pieces = text_pieces(n)
        events = fr.response_events([fr.message("".join(pieces))])
        name = "response.output_text.delta"
    else:
        arguments, pieces = argument_pieces(n)
        events = fr.response_events([fr.call("call_1", "get_weather", arguments)])
        name = "response.function_call_arguments.delta"
    return _spread(events, lambda e: e[0] == name, lambda d, p: d.update(delta=p), pieces)


BUILDERS = {"anthropic": anthropic_events, "chat": chat_events, "responses": responses_events}


def serve(protocol: str) -> None:
    """The child: serve ``protocol``'s fake until stdin closes; each request asks in its
    text for a reply (``text:N`` or ``tool:N``)."""
    sys.path.insert(0, str(TESTS))
    from fakes.harness import FAKES
    from fakes.server import JSON, Reply, Stream

    def respond(body: JSON, headers: dict[str, str]) -> Reply:
        asked = re.search(r"(text|tool):(\d+)", json.dumps(body))
        assert asked is not None, "the request names no reply"
        return Stream(BUILDERS[protocol](asked[1], int(asked[2])))

    with FAKES[protocol]() as fake:
        fake.script(*[respond] * 100_000)
        print(fake.url, flush=True)
        sys.stdin.read()


# --- the client's side ---------------------------------------------------------------------


def start_fake(protocol: str) -> tuple[subprocess.Popen[str], str]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", protocol],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    return child, child.stdout.readline().strip()


def model_for(protocol: str, url: str) -> Model:
    retry = RetryPolicy(max_retries=0)
    if protocol == "anthropic":
        return create_model("anthropic:claude-fake", api_key="k", base_url=url, retry=retry)
    provider = "openai-chat" if protocol == "chat" else "openai"
    return create_model(f"{provider}:fake-model", api_key="k", base_url=f"{url}/v1", retry=retry)


async def read_reply(model: Model, kind: str, n: int) -> float:
    """The CPU seconds of one reply, read to its end; the events are only counted."""
    request = ModelRequest(system="terse", messages=(user_text(f"{kind}:{n}"),), tools=(WEATHER,))
    began = time.process_time()
    count = 0
    async for _event in model.stream(request):
        count += 1
    cpu = time.process_time() - began
    assert count >= n, f"{count} events for {n} deltas"
    return cpu


async def close(model: Model) -> None:
    """Close the model's SDK client (``create_model`` made it for this model alone)."""
    await model._client.close()  # type: ignore[attr-defined]


async def adapter_costs(protocol: str, url: str, n: int, rounds: int) -> dict[str, list[float]]:
    model = model_for(protocol, url)
    for kind in ("text", "tool"):
        await read_reply(model, kind, n)  # warm: connections, imports, caches
        await read_reply(model, kind, 1)
    out: dict[str, list[float]] = {"text": [], "tool": []}
    for _ in range(rounds):
        for kind in ("text", "tool"):
            many = await read_reply(model, kind, n)
            one = await read_reply(model, kind, 1)
            out[kind].append((many - one) / (n - 1))
    await close(model)
    return out


def adapters(n: int, rounds: int) -> None:
    print(f"adapters: marginal CPU per delta, replies of {n} deltas, {rounds} rounds (us)")
    for protocol in PROTOCOLS:
        child, url = start_fake(protocol)
        try:
            costs = asyncio.run(adapter_costs(protocol, url, n, rounds))
        finally:
            assert child.stdin is not None
            child.stdin.close()
            child.wait()
        cells = [
            f"{kind} best {min(v) * 1e6:6.2f} median {statistics.median(v) * 1e6:6.2f}"
            for kind, v in costs.items()
        ]
        print(f"  {protocol:9}  " + "   ".join(cells))


async def profiled(protocol: str, url: str, n: int) -> cProfile.Profile:
    model = model_for(protocol, url)
    await read_reply(model, "text", n)
    profiler = cProfile.Profile()
    profiler.enable()
    await read_reply(model, "text", n)
    profiler.disable()
    await close(model)
    return profiler


def profile(protocol: str, n: int) -> None:
    child, url = start_fake(protocol)
    try:
        profiler = asyncio.run(profiled(protocol, url, n))
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()
    print(f"profile: one {protocol} reply of {n} text deltas (top by own time)")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(18)


# --- the SSE side ------------------------------------------------------------------------


def sample_frames() -> dict[str, Frame]:
    run = "run_01JH8ZK3Q4W5E6R7T8Y9U0I1O2"
    row = Message("assistant", (TextBlock("Here is the answer, in full."),))
    return {
        "text.delta": TextDeltaFrame(run_id=run, seq=1234, text=" word"),
        "thinking.delta": ThinkingDeltaFrame(run_id=run, seq=1234, text=' "so", then'),
        "message": MessageCommitted(run_id=run, seq=1235, message=row),
    }


def encode_costs(rounds: int, per_round: int = 50_000) -> None:
    print(f"sse.encode_frame: CPU per frame, best of {rounds} rounds of {per_round} (us)")
    for name, frame in sample_frames().items():
        best = float("inf")
        for _ in range(rounds):
            began = time.process_time()
            for _ in range(per_round):
                encode_frame(frame)
            best = min(best, (time.process_time() - began) / per_round)
        print(f"  {name:15} {best * 1e6:6.2f}")


async def stream_once(frame: Frame, n: int) -> float:
    async def frames() -> AsyncGenerator[Frame | None, None]:
        for _ in range(n):
            yield frame

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        pass

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}}
    response = FrameStream(frame_events(frames()))
    began = time.process_time()
    await response(scope, receive, send)
    return (time.process_time() - began) / n


def write_costs(rounds: int, n: int = 20_000) -> None:
    frame = sample_frames()["text.delta"]
    costs = [asyncio.run(stream_once(frame, n)) for _ in range(rounds)]
    best, median = min(costs) * 1e6, statistics.median(costs) * 1e6
    print(f"native stream per text.delta (encode + FrameStream + ASGI send, no socket): "
          f"best {best:.2f} median {median:.2f} us")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--deltas", type=int, default=2000, help="deltas per reply")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--profile", choices=PROTOCOLS, help="profile one protocol's reply")
    parser.add_argument("--serve", choices=PROTOCOLS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.serve)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average {load}; {os.cpu_count()} cores")
    if args.profile:
        return profile(args.profile, args.deltas)
    adapters(args.deltas, args.rounds)
    encode_costs(args.rounds)
    write_costs(args.rounds)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (at the end)")


if __name__ == "__main__":
    main()
