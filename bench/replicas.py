"""Several ``ostinato serve`` processes on one PostgreSQL database (issue 16 item 8).

Processes: the fake OpenAI-compatible model (``tests/e2e/loadkit.py``: 50 ms to the first
token, then 20 tokens a second, 20 tokens: about a second a reply; each token's text is
the time it was written), 1, 2 and 3 ``ostinato serve`` processes on one fresh
PostgreSQL database (frames between them by ``LISTEN/NOTIFY``, or Redis), and the client
(bare asyncio HTTP, a process of its own). For each number of servers and each level:

- ``turns/s``: ``level`` streaming turns posted at once, each on its own conversation,
  turn ``i`` to server ``i mod N``; turns / (first POST to last ``turn.finished``);
  failed turns (not 200, an error, a missing token);
- added delay per token p50 / p99 on the stream of the POST (the server that took the
  message), and, with two servers or more, on an ``/events`` stream of every fifth
  conversation opened on the next server: when a token's frame arrived against when
  the model wrote it (the other server's, split into each turn's first token and the
  rest). The difference is the cross-server frame delay;
- with two servers or more, the control delay (issue 16 item 3, target under 100 ms):
  a turn runs on server A (its POST's stream open there), a cancel (or an approval's
  decision) is posted to server B; from sending it to the ``turn.finished`` (or
  ``approval.decided``) frame the turn on A sends;
- per turn (issue 33 item 5, docs/deploy.md "Sizing a fleet"): the servers' CPU time, and
  PostgreSQL's commits, rows written and database growth (``pg_stat_database``), over
  the run's turns; the connections each server holds open after it and its resident
  memory.

Run: ``python bench/replicas.py [--servers 1,2,3] [--levels 100,250] [--controls 10]
[--redis redis://127.0.0.1:6379/0]`` with ``OSTINATO_TEST_POSTGRES_URL`` set (a server
we may create databases on). Each server's pool is ``--pool`` connections (and as many
again under load). PostgreSQL's own µs per step: ``bench/step_overhead.py --postgres``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import psutil
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # makes `tests` importable

from tests.e2e.loadkit import (
    FakeModel,
    bounded,
    call,
    conversations,
    fake_model_process,
    free_port,
    in_child,
    pct,
    request,
    sse_events,
    wait_healthy,
)

PROVIDER_ENV = ("OSTINATO_", "ANTHROPIC_", "OPENAI_", "OLLAMA_")
PIDS: dict[int, int] = {}  # a serve process's port -> its pid


# --- the processes --------------------------------------------------------------------


async def _admin(url: sa.URL, sql: str) -> None:
    conn = await asyncpg.connect(
        user=url.username, password=url.password, host=url.host, port=url.port,
        database=url.database,
    )  # fmt: skip
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@contextlib.contextmanager
def scratch_database() -> Iterator[str]:
    raw = os.environ.get("OSTINATO_TEST_POSTGRES_URL")
    if not raw:
        raise SystemExit("set OSTINATO_TEST_POSTGRES_URL=postgresql://user@host:port/db")
    admin = sa.make_url(raw)
    name = f"ostinato_bench_{uuid.uuid4().hex[:10]}"
    asyncio.run(_admin(admin, f'CREATE DATABASE "{name}"'))
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_admin(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


SEEDS = {"recall", "read_attachment"}  # calls a turn makes before the model's first


class ToolingModel(FakeModel):
    """``FakeModel``, and a user message ``/tool NAME {json}`` is answered with a call
    of that tool (for the control delay's approvals); after the tool's result, ``ok``."""

    async def _completion(self, body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        messages = body.get("messages", [])
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        since = messages[users[-1] + 1 :] if users else []
        text = str(messages[users[-1]].get("content", "")) if users else ""
        called = {c["function"]["name"] for m in since for c in m.get("tool_calls") or []}
        if not text.startswith("/tool ") or called - SEEDS or not body.get("tools"):
            await super()._completion(body, writer)
            return
        name, _, raw = text[len("/tool ") :].partition(" ")
        function = {"name": name, "arguments": raw or "{}"}
        call_ = {"index": 0, "id": f"call_{uuid.uuid4().hex[:8]}", "type": "function"}
        pieces = [
            self._chunk({"role": "assistant", "content": ""}),
            self._chunk({"tool_calls": [{**call_, "function": function}]}),
            self._chunk({}, "tool_calls"),
            b"data: [DONE]\n\n",
        ]
        head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        writer.write(f"{head}transfer-encoding: chunked\r\n\r\n".encode())
        for piece in pieces:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def fake_model() -> contextlib.AbstractContextManager[int]:
    return fake_model_process(ToolingModel)


@contextlib.contextmanager
def serving(
    count: int, database: str, model_port: int, extra: dict[str, str]
) -> Iterator[list[int]]:
    """``count`` serve processes on ``database``; their ports."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(PROVIDER_ENV)}
    env["OSTINATO_BASE_URL"] = f"http://127.0.0.1:{model_port}/v1"
    env["OSTINATO_SERVER__FANOUT_CHANNEL"] = f"bench_{uuid.uuid4().hex[:10]}"
    env.update(extra)
    with tempfile.TemporaryDirectory() as tmp:
        started: list[tuple[int, subprocess.Popen[bytes], Path]] = []
        try:
            for i in range(count):
                port, log = free_port(), Path(tmp) / f"serve{i}.log"
                argv = [sys.executable, "-m", "ostinato", "serve", "--port", str(port)]
                argv += ["--database-url", database, "--data-dir", f"{tmp}/d{i}"]
                with log.open("wb") as sink:
                    process = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT)
                started.append((port, process, log))
            for port, process, log in started:
                wait_healthy(port, process, log, 90)
                PIDS[port] = process.pid
            yield [port for port, _, _ in started]
        finally:
            for _, process, _ in started:
                process.terminate()
            for _, process, _ in started:
                process.wait(timeout=30)


# --- the client (its own process) -----------------------------------------------------


async def _watch(port: int, cid: str, delays: list[float], opened: asyncio.Event) -> None:
    """An ``/events`` stream of ``cid`` on ``port`` until its turn finishes: each token's
    delay (arrival against the time the model wrote it), its turn's first token first."""
    path = f"/v1/conversations/{cid}/events"
    response = await request(port, "GET", path, accept="text/event-stream")
    opened.set()
    pending = ""
    try:
        async for name, data in sse_events(response):
            if name == "text.delta":
                now = time.monotonic()
                pending += data["text"]
                *done, pending = pending.split(" ")
                delays += [now - float(t) for t in done if t.strip()]
            elif name == "turn.finished":
                return
    finally:
        response.close()


async def load(ports: list[int], n: int) -> dict[str, Any]:
    ids = await conversations(ports[0], n)
    remotes: list[list[float]] = []
    watchers = []
    if len(ports) > 1:
        for i in range(0, n, 5):
            opened = asyncio.Event()
            port = ports[(i + 1) % len(ports)]
            remotes.append([])
            watchers.append(asyncio.ensure_future(_watch(port, ids[i], remotes[-1], opened)))
            await opened.wait()
        await asyncio.sleep(0.5)  # every stream subscribed before the first turn
    began = time.monotonic()
    turns = await asyncio.gather(
        *(bounded(ports[i % len(ports)], cid, f"slow-{i} go") for i, cid in enumerate(ids))
    )
    wall = time.monotonic() - began
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*watchers, return_exceptions=True), 30)
    failed = sum(not t.ok or t.tokens != FakeModel().tokens for t in turns)
    local = [d for t in turns for d in t.delays]
    remote = [d for each in remotes for d in each]
    firsts = [each[0] for each in remotes if each]
    later = [d for each in remotes for d in each[1:]]
    return {
        "wall": wall,
        "failed": failed,
        "local": local,
        "remote": remote,
        "remote_first": firsts,
        "remote_later": later,
    }


async def _post_stream(port: int, cid: str, text: str) -> Any:
    path = f"/v1/conversations/{cid}/turns"
    response = await request(port, "POST", path, {"text": text}, accept="text/event-stream")
    return response, sse_events(response)


async def _until(events: Any, frame: str) -> dict[str, Any]:
    async for name, data in events:
        if name == frame:
            return dict(data)
    raise RuntimeError(f"the stream ended before {frame}")


async def control(ports: list[int], rounds: int) -> dict[str, list[float]]:
    """Cancels and decisions posted to server B for turns running on server A."""
    a, b = ports[0], ports[1]
    cancels, decisions = [], []
    for _ in range(rounds):
        (cid,) = await conversations(a, 1)
        response, events = await _post_stream(a, cid, "slow-long go")
        await _until(events, "text.delta")
        sent = time.monotonic()
        await call(b, "POST", f"/v1/conversations/{cid}/cancel")
        await _until(events, "turn.finished")
        cancels.append(time.monotonic() - sent)
        response.close()
    for _ in range(rounds):
        (cid,) = await conversations(a, 1)
        command = json.dumps({"command": "true"})
        response, events = await _post_stream(a, cid, f"/tool shell {command}")
        asked = await _until(events, "approval.requested")
        sent = time.monotonic()
        path = f"/v1/conversations/{cid}/approvals/{asked['approval_id']}"
        await call(b, "POST", path, {"decision": "approve"})
        await _until(events, "approval.decided")
        decisions.append(time.monotonic() - sent)
        await _until(events, "turn.finished")
        response.close()
    return {"cancel": cancels, "decision": decisions}


def run_client(mode: str, ports: list[int], n: int) -> dict[str, Any]:
    result: dict[str, Any] = in_child(load if mode == "load" else control, ports, n)
    return result


# --- figures --------------------------------------------------------------------------


def ms(values: list[float]) -> str:
    if not values:
        return "none"
    return f"p50 {statistics.median(values) * 1000:.1f} / p99 {pct(values, 0.99) * 1000:.1f} ms"


STATS = (
    "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted, pg_database_size(datname),"
    " (SELECT count(*) FROM pg_stat_activity a WHERE a.datname = d.datname)"
    " FROM pg_stat_database d WHERE datname = current_database()"
)


async def _db_stats(url: str) -> tuple[int, int, int, int]:
    """Commits, rows written, the database's size in bytes, connections open to it."""
    conn = await asyncpg.connect(url.split("?")[0])
    try:
        await asyncio.sleep(1.5)  # the statistics are flushed about once a second
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        row = await conn.fetchrow(STATS)
        assert row is not None
        return int(row[0]), int(row[1]), int(row[2]), int(row[3]) - 1  # not this one
    finally:
        await conn.close()


def _cpu(ports: list[int]) -> float:
    times = [psutil.Process(PIDS[p]).cpu_times() for p in ports]
    return sum(t.user + t.system for t in times)


def per_turn(url: str, ports: list[int], level: int) -> dict[str, Any]:
    """``level`` turns as ``load`` runs them, with what each cost (issue 33 item 5): the
    servers' CPU seconds, PostgreSQL's commits, rows written and bytes grown, the
    connections each server holds open after, and each server's resident memory."""
    before, cpu = asyncio.run(_db_stats(url)), _cpu(ports)
    got = run_client("load", ports, level)
    cpu_after, after = _cpu(ports), asyncio.run(_db_stats(url))
    rss = [psutil.Process(PIDS[p]).memory_info().rss / 2**20 for p in ports]
    got["per_turn"] = (
        f"per turn: server CPU {(cpu_after - cpu) / level * 1000:.1f} ms,"
        f" {(after[0] - before[0]) / level:.1f} transactions (reads too),"
        f" {(after[1] - before[1]) / level:.0f} rows written,"
        f" {(after[2] - before[2]) / level / 1024:.1f} KiB of database;"
        f" {after[3] / len(ports):.1f} connections a server; RSS a server"
        f" {statistics.mean(rss):.0f} MiB"
    )
    return got


def measure(args: argparse.Namespace, transport: str, extra: dict[str, str]) -> None:
    for count in [int(c) for c in args.servers.split(",")]:
        with scratch_database() as url, fake_model() as model_port:
            database = f"{url}?pool_size={args.pool}&max_overflow={args.pool}"
            with serving(count, database, model_port, extra) as ports:
                run_client("load", ports, 10)  # warm: imports, first requests
                for level in [int(n) for n in args.levels.split(",")]:
                    got = per_turn(url, ports, level)
                    line = (
                        f"{transport} {count} server(s), {level} turns: "
                        f"{level / got['wall']:.0f} turns/s (wall {got['wall']:.2f} s,"
                        f" {got['failed']} failed), added delay per token on the POST's"
                        f" stream {ms(got['local'])}"
                    )
                    if count > 1:
                        line += (
                            f", on another server's stream {ms(got['remote'])} (a turn's"
                            f" first token {ms(got['remote_first'])}, the later ones"
                            f" {ms(got['remote_later'])})"
                        )
                    print(f"{line}; {got['per_turn']}; load {os.getloadavg()[0]:.1f}", flush=True)
                if count > 1 and args.controls:
                    got = run_client("control", ports, args.controls)
                    print(
                        f"{transport} control delay, posted to B, acted on by A's turn: cancel"
                        f" {ms(got['cancel'])}, decision {ms(got['decision'])}"
                        f" (target < 100 ms); load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="1,2,3", help="numbers of serve processes")
    parser.add_argument("--levels", default="100,250", help="concurrent turns per run")
    parser.add_argument("--controls", type=int, default=10, help="cancels and decisions")
    parser.add_argument("--pool", type=int, default=5, help="each server's pool_size")
    parser.add_argument("--redis", default=None, help="also over Redis at this URL")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", flush=True)
    measure(args, "notify", {})
    if args.redis:
        measure(args, "redis", {"OSTINATO_SERVER__REDIS_URL": args.redis})


if __name__ == "__main__":
    main()
