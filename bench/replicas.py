"""Frames between servers (issue 16): how late a frame reaches a surface on another server.

Two runtimes in this process, each with its own PostgreSQL connection pool, bus and relay
(as two ``ostinato serve`` processes would have), on a scratch database; the relay's
transport is PostgreSQL ``LISTEN/NOTIFY`` or Redis pub/sub. A surface subscribes on each
runtime; turns run on the first (a scripted model: a tool call, then a 20-chunk reply).
For every frame, the delay is when the other server's surface got it minus when the
local surface got it: the added latency of the fan-out, including a row read from the
store for each ``message`` frame. Printed per transport: frames, p50 / p99 / max delay
for live frames (deltas, tool frames) and for ``message`` frames (rows).

Run: ``python bench/replicas.py [--turns 50] [--redis redis://127.0.0.1:6379/0]`` with
``OSTINATO_TEST_POSTGRES_URL`` set (a server we may create databases on).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from typing import Any

import asyncpg
import sqlalchemy as sa

from ostinato.bus import LocalBus, Subscription
from ostinato.fanout import Relay, Transport
from ostinato.fanout_pg import PostgresTransport
from ostinato.frames import TurnFinished
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.store.sql.postgres import PostgresStore


async def _admin(url: sa.URL, sql: str) -> None:
    conn = await asyncpg.connect(
        user=url.username, password=url.password, host=url.host, port=url.port,
        database=url.database,
    )  # fmt: skip
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _arrivals(subscription: Subscription, out: list[tuple[str, int, float]]) -> None:
    async for frame in subscription:
        out.append((frame.type, frame.seq, time.perf_counter()))


def _figures(label: str, delays: list[float]) -> str:
    if not delays:
        return f"{label}: none"
    ms = sorted(d * 1000 for d in delays)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return (
        f"{label}: {len(ms)} frames, p50 {statistics.median(ms):.2f} ms, "
        f"p99 {p99:.2f} ms, max {ms[-1]:.2f} ms"
    )


async def run(url: sa.URL, transports: list[Transport], turns: int) -> list[str]:
    model = ScriptedModel()
    stores = [await PostgresStore.open(url), await PostgresStore.open(url)]
    runtimes = [Runtime(s, model=model, bus=LocalBus()) for s in stores]
    for store, runtime, transport in zip(stores, runtimes, transports, strict=True):
        await Relay(transport, store).start(runtime.bus)
    delays: dict[str, list[float]] = {"live": [], "message": []}
    try:
        for _ in range(turns):
            conversation = await runtimes[0].create_conversation()
            model.add(tool_step(("calculator", {"expression": "6*7"})))
            model.add(text_step("The answer is forty-two, " * 4, chunks=20))
            here, there = (r.bus.subscribe(conversation.id) for r in runtimes)
            seen: list[list[tuple[str, int, float]]] = [[], []]
            readers = [
                asyncio.create_task(_arrivals(s, o))
                for s, o in zip((here, there), seen, strict=True)
            ]
            async with runtimes[1].bus.subscribe(conversation.id) as done:
                await runtimes[0].run_turn(conversation.id, "what is 6*7?")
                async with asyncio.timeout(10):
                    async for frame in done:
                        if isinstance(frame, TurnFinished):
                            break
            await asyncio.sleep(0.01)
            for reader in readers:
                reader.cancel()
            here.close()
            there.close()
            for (kind, _, local), (_, _, remote) in zip(seen[0], seen[1], strict=False):
                delays["message" if kind == "message" else "live"].append(remote - local)
    finally:
        for runtime in runtimes:
            await runtime.close()
    return [_figures("live frames", delays["live"]), _figures("message frames", delays["message"])]


async def main(args: argparse.Namespace) -> None:
    raw = os.environ.get("OSTINATO_TEST_POSTGRES_URL")
    if not raw:
        raise SystemExit("set OSTINATO_TEST_POSTGRES_URL=postgresql://user@host:port/db")
    admin = sa.make_url(raw)
    name = f"ostinato_bench_{uuid.uuid4().hex[:10]}"
    await _admin(admin, f'CREATE DATABASE "{name}"')
    url = admin.set(drivername="postgresql+asyncpg", database=name)
    try:
        options: list[tuple[str, Any]] = [("notify", None)]
        if args.redis:
            options.append(("redis", args.redis))
        for label, redis_url in options:
            channel = f"bench_{uuid.uuid4().hex[:10]}"
            if redis_url is None:
                transports: list[Transport] = [
                    PostgresTransport(url, channel=channel) for _ in range(2)
                ]
            else:
                from ostinato.fanout_redis import RedisTransport

                transports = [RedisTransport(redis_url, channel=channel) for _ in range(2)]
            for line in await run(url, transports, args.turns):
                print(f"{label}: {line}")
    finally:
        await _admin(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--redis", default=None, help="also over Redis at this URL")
    asyncio.run(main(parser.parse_args()))
