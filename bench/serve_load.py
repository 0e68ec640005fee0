"""``ostinato serve`` under load: concurrent streaming turns against a loopback fake model.

Three processes: the fake OpenAI-compatible model (``tests/e2e/loadkit.py``: 50 ms to the
first token, then 20 tokens a second, 20 tokens: about a second a reply), ``ostinato serve``
on a fresh SQLite database for each run, and the client (bare asyncio HTTP, so that it
costs little next to the server). Each run prints its figures:

- ``sequential``: ``--sequential`` turns one after another (a one-chunk reply each; the
  next POST as soon as ``turn.finished`` is read, or ``--settle`` seconds later);
  POST -> model called p50 / p95 (the client's clock at sending the POST against the fake
  model's at reading the request; ``time.monotonic`` is one clock for every process); the
  server's CPU per turn start p50 / p95 (its CPU time, every thread's, read by the client
  just before the POST and by the fake model once it has read the model request whole:
  the server's CPU from the POST to the model called, none of the streaming after); and
  the server's CPU per whole turn (its CPU time over the run / the turns). Each run
  starts after three turns of warm-up and once the server's CPU is at rest (what it
  loads once it listens, the MCP SDK among it, is not counted as turns).
- ``N concurrent``: N turns posted at once, each on its own conversation, each read as
  SSE to ``turn.finished``: wall time (first POST to last ``turn.finished``), failed turns
  (not 200, an ``error`` frame, a turn finished with an error, a missing token, or no end
  within two minutes), first token p50 / p99 (POST to the first token's frame, the
  model's own 50 ms included), added delay per token p50 / p99 (when a token's frame
  arrived against when the model wrote it), the server's peak RSS (VmHWM) and CPU time.

Every run also serves the same turns from the floors (``bench/floor.py``, a bare
Starlette app that relays the model's stream; ``--floors``, default ``socket,lean``:
a bare asyncio socket to the model, and ostinato's own lean streamed call, the client its
deployment's Chat Completions models use; ``aiohttp`` and ``httpx``, the SDK on either
transport, as ostinato used it before)
and prints ostinato's figures over each floor's (``ratios``: POST -> model called p50 and
CPU per whole turn for the sequential run; wall, CPU per turn and the token delay p99 for
the concurrent ones). ``--before DIR`` serves them from the checkout at ``DIR`` too (its
``src`` first on ``PYTHONPATH``), each server's run next to the others'.

Run: ``python bench/serve_load.py [--levels 100,300,1000] [--sequential 100]``; with
``--postgres postgresql://user@host/db`` each run's server is on a database of its own
created on that server (and dropped after) instead of a SQLite file; ``--pg-log`` has
PostgreSQL log every statement on that database (its server log: statements per turn).
``--py-spy-arg=--gil`` passes an option to py-spy (``--gil``: only samples that hold the
interpreter, which leaves the event loop's waits out).
Targets (issue 14): 1,000 concurrent with none failed and wall time under 3 s; at 300,
added delay per token p99 under 100 ms; RSS under 1 GB; POST -> model called p50 under
2 ms and server CPU per turn start under 1.5 ms. Issue 32: CPU per streamed turn at most
3x the bare-socket floor's, POST -> model called under 1.3x the floor's, 1,000 concurrent
under 5 s with none failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

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
    server_cpu,
    wait_healthy,
)
from tests.patience import start_timeout

PY_SPY = ""  # --py-spy
PY_SPY_ARGS: list[str] = []  # --py-spy-arg: more of py-spy's options (e.g. --gil)
POSTGRES = ""  # --postgres: an admin URL; each run gets a scratch database there
PG_LOG = False  # --pg-log: PostgreSQL logs every statement of the scratch database
DURABILITY = ""  # --durability: SQLite's (store.sql.wal_sync); empty: the default
SERVE_ENV: dict[str, str] = {}  # --env
PROVIDER_ENV = ("OSTINATO_", "ANTHROPIC_", "OPENAI_", "OLLAMA_")


def fake_model() -> contextlib.AbstractContextManager[int]:
    return fake_model_process(FakeModel)


@dataclass(frozen=True)
class Target:
    """What serves the turns: ostinato (``src``: from another checkout's ``src``, e.g. a
    worktree at the commit before), or a floor (``bench/floor.py`` with its ``client``)."""

    label: str
    src: str = ""
    floor: str = ""


async def _admin(sql: str) -> None:
    import asyncpg
    import sqlalchemy as sa

    url = sa.make_url(POSTGRES)
    conn = await asyncpg.connect(
        user=url.username,
        password=url.password,
        host=url.host,
        port=url.port,
        database=url.database,
    )
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@contextlib.contextmanager
def database(tmp: str) -> Iterator[str]:
    """The server's database URL: a SQLite file in ``tmp``, or with ``--postgres`` a
    scratch database on that server, dropped afterwards."""
    if not POSTGRES:
        yield f"sqlite:///{tmp}/load.db" + (f"?durability={DURABILITY}" if DURABILITY else "")
        return
    import sqlalchemy as sa

    name = f"serve_load_{os.getpid()}_{int(time.monotonic() * 1000)}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    if PG_LOG:
        asyncio.run(_admin(f"ALTER DATABASE \"{name}\" SET log_statement = 'all'"))
    try:
        url = sa.make_url(POSTGRES).set(drivername="postgresql+asyncpg", database=name)
        yield url.render_as_string(hide_password=False)
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@contextlib.contextmanager
def serving(
    model_port: int, extra: list[str], target: Target = Target("ostinato")
) -> Iterator[tuple[int, psutil.Process]]:
    """``ostinato serve`` on a fresh SQLite database (or a floor) in its own process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(PROVIDER_ENV)}
    env["OSTINATO_BASE_URL"] = f"http://127.0.0.1:{model_port}/v1"
    env.update(SERVE_ENV)
    if target.src:
        env["PYTHONPATH"] = os.pathsep.join([target.src, env.get("PYTHONPATH", "")])
    with tempfile.TemporaryDirectory() as tmp, database(tmp) as url:
        port = free_port()
        if target.floor:
            floor = Path(__file__).with_name("floor.py")
            argv = [sys.executable, str(floor), "--port", str(port), "--client", target.floor]
        else:
            argv = [sys.executable, "-m", "ostinato", "serve", "--port", str(port)]
            argv += ["--database-url", url, "--data-dir", tmp, *extra]
        log = open(Path(tmp) / "serve.log", "wb")  # noqa: SIM115
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
        try:
            wait_healthy(port, process, Path(tmp) / "serve.log", start_timeout())
            yield port, psutil.Process(process.pid)
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:  # still draining turns: its figures are in
                print("(the server did not stop within 30 s of SIGTERM: killed)", flush=True)
                process.kill()
                process.wait(timeout=30)
            log.close()


# --- the client (its own process) -----------------------------------------------------


async def concurrent(port: int, n: int) -> dict[str, Any]:
    ids = await conversations(port, n)
    began = time.monotonic()
    turns = await asyncio.gather(*(bounded(port, c, f"slow-{i} go") for i, c in enumerate(ids)))
    wall = time.monotonic() - began
    for turn in turns:
        if turn.ok and turn.tokens != FakeModel().tokens:
            turn.ok, turn.why = False, f"{turn.tokens} tokens"
    whys: dict[str, int] = {}
    for turn in turns:
        if not turn.ok:
            whys[turn.why] = whys.get(turn.why, 0) + 1
    firsts = [t.first_token for t in turns if t.first_token is not None]
    delays = [d for t in turns for d in t.delays]
    failed = sum(not t.ok for t in turns)
    return {"wall": wall, "failed": failed, "why": whys, "first": firsts, "delays": delays}


SETTLE_S = 0.0  # --settle: seconds between sequential turns


async def sequential(port: int, model_port: int, n: int, pids: list[int]) -> dict[str, Any]:
    ids = await conversations(port, n)
    await call(model_port, "POST", "/watch", pids)
    sent: dict[str, float] = {}
    cpu_before: dict[str, int] = {}
    failed = 0
    for i, cid in enumerate(ids):
        marker = f"quick-{os.getpid()}-{i}"  # unique across runs
        if SETTLE_S:
            await asyncio.sleep(SETTLE_S)
        cpu_before[marker] = server_cpu(pids)
        sent[marker] = time.monotonic()
        failed += not (await bounded(port, cid, f"{marker} hello")).ok
    _, arrivals = await call(model_port, "GET", "/arrivals")
    _, cpu_after = await call(model_port, "GET", "/cpu")
    waits = [arrivals[m] - t for m, t in sent.items() if m in arrivals]
    starts = [(cpu_after[m] - c) / 1e9 for m, c in cpu_before.items() if m in cpu_after]
    return {"failed": failed, "called": waits, "start_cpu": starts}


def run_client(
    mode: str, port: int, model_port: int, n: int, pids: list[int] | None = None
) -> dict[str, Any]:
    if mode == "sequential":
        result: dict[str, Any] = in_child(sequential, port, model_port, n, pids or [])
    else:
        result = in_child(concurrent, port, n)
    return result


# --- figures --------------------------------------------------------------------------


def ms(value: float) -> str:
    return f"{value * 1000:.1f} ms"


def tree(process: psutil.Process) -> list[psutil.Process]:
    """The server and, with ``--workers``, its workers (the supervisor's children)."""
    return [process, *process.children()]


def peak_rss(process: psutil.Process) -> int:
    """The largest peak RSS of the server's processes (each worker's own)."""
    peaks = [0]
    for each in tree(process):
        for line in Path(f"/proc/{each.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peaks.append(int(line.split()[1]) * 1024)
    return max(peaks)


def cpu(process: psutil.Process) -> float:
    """CPU seconds of the server's processes (with ``--workers``, all of them)."""
    total = 0.0
    for each in tree(process):
        times = each.cpu_times()
        total += times.user + times.system
    return total


@contextlib.contextmanager
def profiled(server: psutil.Process, name: str) -> Iterator[None]:
    """With ``--py-spy BIN``: the server sampled by py-spy while the block runs (a
    collapsed-stack file per run, ``py-spy-<name>.txt``)."""
    if not PY_SPY:
        yield
        return
    argv = [PY_SPY, "record", "--pid", str(server.pid), "-f", "raw", "-r", "500", "--nonblocking"]
    argv += PY_SPY_ARGS
    spy = subprocess.Popen([*argv, "-o", f"py-spy-{name}.txt"], stdout=subprocess.DEVNULL)
    time.sleep(1.0)  # py-spy attaches
    try:
        yield
    finally:
        spy.send_signal(2)
        spy.wait(timeout=60)


def idle(server: psutil.Process, *, most_s: float = 20.0) -> None:
    """Wait until the server's CPU is at rest (what it loads once it listens, e.g. the
    MCP SDK, is not a turn's cost): under 5 ms of CPU in a quarter of a second."""
    until = time.monotonic() + most_s
    last = cpu(server)
    while time.monotonic() < until:
        time.sleep(0.25)
        now = cpu(server)
        if now - last < 0.005:
            return
        last = now


def report_sequential(model_port: int, n: int, extra: list[str], target: Target) -> Figures:
    with serving(model_port, extra, target) as (port, server):
        pids = [each.pid for each in tree(server)]
        run_client("sequential", port, model_port, 3, pids)  # warm: imports, first requests
        idle(server)
        before = cpu(server)
        with profiled(server, f"sequential-{target.label}"):
            result = run_client("sequential", port, model_port, n, pids)
        per_turn = (cpu(server) - before) / n
    called, starts = result["called"], result["start_cpu"]
    print(
        f"[{target.label}] sequential {n}: failed {result['failed']}, POST -> model called "
        f"p50 {ms(statistics.median(called))} p95 {ms(pct(called, 0.95))}, "
        f"server CPU per turn start p50 {ms(pct(starts, 0.5))} p95 {ms(pct(starts, 0.95))}, "
        f"per whole turn {ms(per_turn)}",
        flush=True,
    )
    return {"called": statistics.median(called), "turn_cpu": per_turn}


def report_concurrent(model_port: int, n: int, extra: list[str], target: Target) -> Figures:
    with serving(model_port, extra, target) as (port, server):
        run_client("sequential", port, model_port, 3)
        idle(server)
        before = cpu(server)
        with profiled(server, f"concurrent-{n}-{target.label}"):
            result = run_client("concurrent", port, model_port, n)
        used = cpu(server) - before
        rss = peak_rss(server)
    first, delays = result["first"], result["delays"]
    print(
        f"[{target.label}] {n} concurrent: wall {result['wall']:.2f} s, failed "
        f"{result['failed']} {result['why'] or ''}, first token p50 {ms(pct(first, 0.5))} p99 "
        f"{ms(pct(first, 0.99))}, added delay per token p50 {ms(pct(delays, 0.5))} p99 "
        f"{ms(pct(delays, 0.99))}, peak RSS {rss / 2**20:.0f} MB, server CPU {used:.2f} s",
        flush=True,
    )
    return {"wall": result["wall"], "turn_cpu": used / n, "p99": pct(delays, 0.99)}


Figures = dict[str, float]


def ratios(what: str, figures: dict[str, Figures], floors: list[Target]) -> None:
    """Each ostinato's figures over each floor's, one line."""
    servers = [label for label in figures if label not in {f.label for f in floors}]
    parts = []
    for label in servers:
        for floor in floors:
            mine, base = figures[label], figures[floor.label]
            each = ", ".join(f"{k} {mine[k] / base[k]:.2f}x" for k in mine if base.get(k))
            parts.append(f"{label}/{floor.label}: {each}")
    print(f"ratios {what}: " + "; ".join(parts), flush=True)


def targets(before: str, floors: str) -> tuple[list[Target], list[Target]]:
    """The servers (ostinato, and with ``--before`` the one at that checkout) and floors."""
    servers = [Target("ostinato")]
    if before:
        servers.insert(0, Target("before", src=str(Path(before).resolve() / "src")))
    return servers, [Target(f"floor-{kind}", floor=kind) for kind in floors.split(",") if kind]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--levels", default="100,300,1000", help="concurrent turns per run")
    parser.add_argument("--sequential", type=int, default=100, help="sequential turns")
    parser.add_argument("--serve-arg", action="append", default=[], help="passed to serve")
    parser.add_argument("--py-spy", default="", help="a py-spy binary: profile the server")
    parser.add_argument("--py-spy-arg", action="append", default=[], help="e.g. =--gil")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for serve")
    parser.add_argument("--settle", type=float, default=0.0, help="s between sequential turns")
    parser.add_argument("--before", default="", help="a checkout of ostinato to compare")
    parser.add_argument("--floors", default="socket,lean", help="bench/floor.py clients")
    parser.add_argument("--postgres", default="", help="admin URL: serve on PostgreSQL")
    parser.add_argument(
        "--pg-log", action="store_true", help="log every statement of the scratch database"
    )
    parser.add_argument("--durability", default="", help="SQLite: acknowledged or relaxed")
    args = parser.parse_args()
    global PY_SPY, SETTLE_S, POSTGRES, DURABILITY, PG_LOG
    PY_SPY, SETTLE_S, POSTGRES = args.py_spy, args.settle, args.postgres
    PG_LOG = args.pg_log
    PY_SPY_ARGS.extend(args.py_spy_arg)
    DURABILITY = args.durability
    SERVE_ENV.update(pair.split("=", 1) for pair in args.env)
    servers, floors = targets(args.before, args.floors)
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}", flush=True)
    with fake_model() as model_port:
        if args.sequential:
            seq = {
                t.label: report_sequential(model_port, args.sequential, args.serve_arg, t)
                for t in [*servers, *floors]
            }
            ratios(f"sequential {args.sequential}", seq, floors)
        for level in [int(x) for x in args.levels.split(",") if x]:
            conc = {
                t.label: report_concurrent(model_port, level, args.serve_arg, t)
                for t in [*servers, *floors]
            }
            ratios(f"{level} concurrent", conc, floors)
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}", flush=True)


if __name__ == "__main__":
    main()
