"""Framework overhead per step, with a zero-latency scripted model.

A step is one model call plus the tool calls it asked for. Each measured turn makes K
steps that call one trivial tool and one closing step that answers in text, so it runs
K + 1 steps; the overhead per step is the turn's wall time divided by K + 1. Everything
the loop does is included: building each request, folding events, committing every row
and tool call, publishing frames (with one subscriber listening), recording the turn.

Run:  python bench/step_overhead.py [--turns N] [--sqlite-dir DIR] [--postgres URL]
                                      [--stores memory,sqlite,postgres]
      python bench/step_overhead.py --observe [--rounds R] [--turns N]
      python bench/step_overhead.py --spend-compare R [--turns N] [--stores memory,sqlite]
      valgrind --tool=callgrind python bench/step_overhead.py --case MODE --turns N [--store S]

``--postgres URL`` adds the same table on PostgreSQL, and the 1,000 concurrent
conversations there (a scratch database: conversations are written to it); ``--stores``
picks which stores run.

``--observe`` measures what observation adds per step (K = 10, memory and SQLite stores):
``off`` (everything off: nothing installed and timelines off), ``timeline`` (nothing
installed, each turn's timeline kept: what ``ostinato serve`` does by default), ``otel``
(the OpenTelemetry SDK making every span, batched to an exporter that drops them),
``metrics`` (Prometheus), ``both``; the last three keep timelines too. The modes take
turns for ``--rounds`` rounds and each reports its median of the rounds' medians, so
machine load drifting during the run hits them alike. ``--case`` runs one mode alone (on
memory, or ``--store sqlite``): under callgrind, the instructions of two runs (N1 and N2
turns) differ by the cost of (N2 - N1) x 11 steps, whatever the machine's load
(docs/observability.md, docs/performance.md); ``--spend counted`` or ``limited`` adds the
spend gate (every call counted; or also checked against a budget), whose cost per step is
the difference against ``--spend none``; ``--spend-compare R`` runs the three in turn,
R rounds, and prints each one's ratio to ``none`` round by round. ``--case bare`` is
the floor ``off`` is held against: model and tool calls observed by scopes that record
nothing, and a fixed metrics block, as if the loop observed nothing at all. Both first
run a few turns, then freeze what the process holds (``gc.collect``, ``gc.freeze``) as
``ostinato serve`` does once started, so the collector's full passes skip what start-up
and the first turns made, as they do in the server, and do not land in one mode's
window and not another's.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import resource
import statistics
import tempfile
import time
from pathlib import Path

from ostinato import observe
from ostinato.agents import AgentConfig
from ostinato.models.scripted import ScriptedModel, Step, text_step, tool_step
from ostinato.observe import prices
from ostinato.runtime import Runtime
from ostinato.spend.gate import SpendGate
from ostinato.spend.limits import Budgets
from ostinato.spend.rule import Limit

try:
    from ostinato.store import open_store
except ImportError:
    open_store = None  # type: ignore
from ostinato.store.base import Store
from ostinato.store.spend import SpendStore
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry


async def noop(i: int) -> int:
    """Return its argument."""
    return i


_ids = itertools.count()


def script(k: int) -> list[Step]:
    """K steps calling the trivial tool (ids unique, as real providers make them), then
    a closing text reply."""
    calls = [tool_step(("noop", {"i": i}, f"call_{next(_ids)}")) for i in range(k)]
    return [*calls, text_step("done")]


SPEND = {"mode": "none"}  # --spend: none, counted (usage only) or limited (checked too)
PRICED = {"none": False}  # --priced-none: price the model with no gate too


def runtime(store: Store, k: int) -> Runtime:
    rt = Runtime(
        store,
        model=ScriptedModel(),
        tools=ToolRegistry([function_tool(noop)]),
        agent=AgentConfig(max_model_calls=k + 1),
    )
    if SPEND["mode"] != "none":
        limit = Limit(soft=1e8, hard=1e9) if SPEND["mode"] == "limited" else None
        assert isinstance(store, SpendStore)
        rt.spend = SpendGate(store, Budgets(default=limit))
    if SPEND["mode"] != "none" or PRICED["none"]:  # the turn's metrics price each call too
        prices.configure({"scripted:model": prices.Price(input=1.0, output=2.0)})
    return rt


async def per_step(store: Store, k: int, turns: int) -> tuple[float, float]:
    rt = runtime(store, k)
    conversation = await rt.create_conversation()
    listener = rt.bus.subscribe(conversation.id)
    drain = asyncio.ensure_future(_drain(listener))
    samples = []
    for n in range(turns + 3):
        model = ScriptedModel(script(k))
        if n % 20 == 0:
            # a fresh conversation now and then keeps the history short, as in real use
            listener.close()
            conversation = await rt.create_conversation()
            listener = rt.bus.subscribe(conversation.id)
            drain.cancel()
            drain = asyncio.ensure_future(_drain(listener))
        started = time.perf_counter()
        result = await rt.run_turn(conversation.id, "go", model=model)
        elapsed = time.perf_counter() - started
        assert result.stop_reason == "end_turn", result
        if n >= 3:  # warm-up
            samples.append(elapsed / (k + 1) * 1e6)
    drain.cancel()
    listener.close()
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.9) - 1]


async def _drain(listener: object) -> None:
    async for _ in listener:  # type: ignore[attr-defined]
        pass


async def concurrent(store: Store, conversations: int, steps: int) -> tuple[float, float]:
    rt = runtime(store, steps)
    ids = [(await rt.create_conversation()).id for _ in range(conversations)]
    gc.collect()
    started = time.perf_counter()
    results = await asyncio.gather(
        *(rt.run_turn(cid, "go", model=ScriptedModel(script(steps - 1))) for cid in ids)
    )
    elapsed = time.perf_counter() - started
    assert all(r.stop_reason == "end_turn" for r in results)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return elapsed, rss


def backends(mode: str) -> list[observe.Backend]:
    """The backends of an ``--observe`` mode (the SDK and prometheus-client imported only
    when asked for)."""
    found: list[observe.Backend] = []
    if mode in ("otel", "both"):
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )

        from ostinato.observe.otel import OtelBackend

        class Dropped(SpanExporter):
            def export(self, spans: object) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        found.append(OtelBackend(BatchSpanProcessor(Dropped())))
    if mode in ("metrics", "both"):
        from ostinato.observe.prometheus import PrometheusBackend

        found.append(PrometheusBackend())
    return found


MODES = ("off", "timeline", "otel", "metrics", "both")
SPEND_MODES = ("none", "counted", "limited")


async def compare_spend(directory: Path, turns: int, rounds: int, stores: list[str]) -> None:
    """``--spend-compare``: the spend gate's modes taking turns for ``rounds`` rounds
    (K = 10, timelines kept, as ``--case off``'s default process), each store's median
    of the rounds' medians, and each mode's ratio to ``none`` in every round."""
    k = 10
    results: dict[tuple[str, str], list[float]] = {}
    await warmed(await open_store("memory://"))
    for r in range(rounds):
        for label in stores:
            for mode in SPEND_MODES:
                SPEND["mode"] = mode
                url = "memory://" if label == "memory" else f"sqlite:///{directory}/s{r}{mode}.db"
                store = await open_store(url)
                median, _ = await per_step(store, k, turns)
                await store.close()
                results.setdefault((label, mode), []).append(median)
    print(f"spend gate per step (µs, K={k}, median of {rounds} rounds; ratio to none per round)")
    for label in stores:
        none = results[(label, "none")]
        for mode in SPEND_MODES:
            values = results[(label, mode)]
            ratios = " ".join(f"{v / n:.3f}" for v, n in zip(values, none, strict=True))
            print(f"{label:<8}{mode:<9}{statistics.median(values):>9.1f}   {ratios}")


class _Unobserved:
    """A model or tool call's scope that records nothing (``--case bare``)."""

    first = 0.0

    def __init__(self, *args: object) -> None:
        pass

    def __enter__(self) -> _Unobserved:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def first_token(self) -> None:
        pass

    def replied(self, reply: object) -> None:
        pass

    def ran(self, status: str, content: str) -> None:
        pass

    def failed(self, exc: BaseException) -> None:
        pass


def _unobserved() -> None:
    """``--case bare``: the loop's observation replaced by nothing (timelines off too)."""
    from ostinato.observe.ledger import TurnLedger

    block = {"model_calls": 0, "tokens_in": 0, "tokens_out": 0, "tools": {}}
    observe.keep_timelines(False)  # first: switching binds the call scopes afresh
    observe.model_call = _Unobserved  # type: ignore[assignment]
    observe.tool_call = _Unobserved  # type: ignore[assignment]
    TurnLedger.snapshot = lambda self, model=None: dict(block)  # type: ignore[method-assign]


def observing(mode: str) -> list[observe.Backend]:
    """Set the process up for ``mode``: timelines kept or not, and its backends."""
    observe.keep_timelines(mode != "off")
    installed = backends(mode)
    observe.install(installed)
    return installed


async def warmed(store: Store) -> None:
    """A few turns, then what the process holds frozen (as ``ostinato serve`` freezes)."""
    await per_step(store, 10, 1)
    gc.collect()
    gc.freeze()


async def compare(directory: Path, turns: int, rounds: int) -> None:
    k = 10
    results: dict[tuple[str, str], list[float]] = {}
    await warmed(await open_store("memory://"))
    for r in range(rounds):
        for mode in MODES:
            installed = observing(mode)
            for label in ("memory", "sqlite"):
                url = "memory://" if label == "memory" else f"sqlite:///{directory}/o{r}{mode}.db"
                store = await open_store(url)
                median, _ = await per_step(store, k, turns)
                await store.close()
                results.setdefault((label, mode), []).append(median)
            observe.install(None)
            for backend in installed:
                backend.shutdown()
    observe.keep_timelines(True)
    print(f"observation overhead per step (µs, K={k}, median of {rounds} rounds' medians)")
    print(f"{'store':<8}" + "".join(f"{m:>16}" for m in MODES))
    for label in ("memory", "sqlite"):
        off = statistics.median(results[(label, "off")])
        cells = []
        for mode in MODES:
            value = statistics.median(results[(label, mode)])
            cells.append(f"{value:>8.1f} ({(value / off - 1) * 100:+4.0f}%)")
        print(f"{label:<8}" + "".join(f"{c:>16}" for c in cells))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=200, help="measured turns per case")
    parser.add_argument("--sqlite-dir", default=None, help="where the SQLite files go")
    parser.add_argument("--postgres", help="also per step on this scratch PostgreSQL database")
    parser.add_argument("--stores", help="only these, comma-separated: memory,sqlite,postgres")
    parser.add_argument("--observe", action="store_true", help="compare observation modes")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of --observe")
    parser.add_argument(
        "--case",
        choices=(*MODES, "bare"),
        help="run only --turns turns of K=10 in this mode "
        "(for valgrind --tool=callgrind: instructions do not drift with the machine's load)",
    )
    parser.add_argument(
        "--store", choices=("memory", "sqlite"), default="memory", help="the store of --case"
    )
    parser.add_argument(
        "--spend-compare",
        type=int,
        metavar="ROUNDS",
        help="compare the spend gate's modes (none, counted, limited) over ROUNDS rounds",
    )
    parser.add_argument(
        "--spend",
        choices=("none", "counted", "limited"),
        default="none",
        help="with --case: no spend gate, a gate that counts every call (no limit), or one "
        "that also checks each call against a budget (reserve before, settle after)",
    )
    parser.add_argument(
        "--priced-none",
        action="store_true",
        help="with --spend none: the model priced as with a gate (every provider's model "
        "in the price table is), so the difference against it is the gate's work alone",
    )
    args = parser.parse_args()
    PRICED["none"] = args.priced_none
    directory = Path(args.sqlite_dir or tempfile.mkdtemp(prefix="ostinato-bench-"))
    if args.case:
        SPEND["mode"] = args.spend
        if args.case == "bare":
            _unobserved()
        installed = [] if args.case == "bare" else observing(args.case)
        url = "memory://" if args.store == "memory" else f"sqlite:///{directory}/case.db"
        store = await open_store(url)
        await warmed(store)
        await per_step(store, 10, args.turns)
        await store.close()
        for backend in installed:
            backend.shutdown()
        return
    if args.observe:
        await compare(directory, max(20, args.turns // 2), args.rounds)
        return
    if args.spend_compare:
        stores = (args.stores or "memory,sqlite").split(",")
        await compare_spend(directory, max(20, args.turns // 2), args.spend_compare, stores)
        return
    urls = {"memory": "memory://", "sqlite": f"sqlite:///{directory}/steps-{{k}}.db"}
    if args.postgres:
        urls["postgres"] = args.postgres
    if args.stores:
        urls = {label: urls[label] for label in args.stores.split(",")}
    if "sqlite" in urls:
        # first, while the process is fresh, so its peak RSS is this case's own
        store = await open_store(f"sqlite:///{directory}/concurrent.db")
        elapsed, rss = await concurrent(store, 1000, 3)
        await store.close()
        print(f"1,000 conversations x 3 steps at once, SQLite: {elapsed:.2f} s, peak {rss:.0f} MB")
    if "postgres" in urls:
        store = await open_store(urls["postgres"])
        elapsed, _ = await concurrent(store, 1000, 3)
        await store.close()
        print(f"1,000 conversations x 3 steps, concurrent, PostgreSQL: {elapsed:.2f} s")
    print("framework overhead per step (µs), zero-latency model, one trivial tool per step")
    print(f"{'store':<8}{'K':>4}{'median':>10}{'p90':>10}")
    for label, url in urls.items():
        for k in (1, 10, 50):
            turns = max(20, args.turns // max(1, k // 5))
            store = await open_store(url.format(k=k))
            median, p90 = await per_step(store, k, turns)
            await store.close()
            print(f"{label:<8}{k:>4}{median:>10.1f}{p90:>10.1f}")


if __name__ == "__main__":
    asyncio.run(main())
