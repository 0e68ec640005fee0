"""Search of conversations: how fast a search answers on 100,000 stored messages, and what
keeping the index costs a step.

``search`` (the default) stores ``--messages`` messages (100,000) for one owner, in
conversations of 100, written the way the loop writes them (each message its own
``AppendMessage``, a conversation's in one write), then times ``Store.search_messages``
for a mix of queries, each run ``--repeat`` times after one warm-up:

- one word, by how many messages hold it: common (about a third of them), medium
  (about 1%), rare (a handful);
- two and three words (a common and a medium one, and so on);
- a word being typed: its first 3, 4 or 5 letters, alone and after a whole word;
- a word no message holds.

The text is sentences of this repository's own docs and docstrings, picked at random
(seeded: every run stores the same messages), so the words fall as English prose does,
plus one made-up word per message, which gives the rare words.

``steps`` measures what the index adds to a step, in two workloads: turns of K steps
whose every reply has a sentence of text and one tool call (every step's reply row is
indexed: the most the index can cost), and turns as ``bench/step_overhead.py`` makes
them (the K replies call a tool without text, only the closing reply and the person's
message are indexed). Each with the index on, and with it off (``ops.index_message``
replaced by nothing: no ``message_search`` row, so no FTS5 or GIN entry), in
alternating rounds in one process; each mode's median of its rounds, in wall time and in
CPU time (this process's, and on PostgreSQL the server backends' serving the bench's
database), which the machine's other work inflates much less than wall time.
``--case on`` or ``off`` runs one mode alone, on SQLite, every reply with text: under
callgrind the instructions of two runs (N1 and N2 turns) differ by the cost of
(N2 - N1) x 11 steps whatever the machine's load, and ``on`` against ``off`` is what the
index adds to a step. ``--durability`` picks the SQLite commits (default: fsynced when
they acknowledge something, as ``ostinato serve`` runs).

Run:  python bench/search.py [search] [--messages N] [--postgres URL] [--dir DIR]
      python bench/search.py steps [--rounds R] [--turns N] [--postgres URL]
      valgrind --tool=callgrind python bench/search.py steps --case on|off --turns N
The PostgreSQL database given is written to; use a scratch one.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import collections
import os
import random
import re
import statistics
import tempfile
import time
from pathlib import Path

from ostinato.agents import AgentConfig
from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock
from ostinato.models.scripted import ScriptedModel, Step, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.store import open_store
from ostinato.store.base import AppendMessage, Conversation, CreateConversation, Store, utcnow
from ostinato.store.sql import ops
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry

ROOT = Path(__file__).resolve().parents[1]
OWNER = "ann"
PER_CONVERSATION = 100
_SYLLABLES = ["ka", "to", "ri", "mo", "sen", "la", "vi", "dor", "pe", "qu", "an", "el", "un"]


def sentences() -> list[str]:
    """The sentences of this repository's docs and docstrings (four words or more)."""
    found: list[str] = []
    for path in [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]:
        text = re.sub(r"```.*?```", " ", path.read_text(encoding="utf-8"), flags=re.S)
        found += re.split(r"(?<=[.!?])\s+", text)
    for path in sorted((ROOT / "src").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc:
                    found += re.split(r"(?<=[.!?])\s+", doc)
    return [" ".join(s.split()) for s in found if len(s.split()) >= 4]


def corpus(count: int, seed: int = 7) -> list[str]:
    """``count`` messages: a person's (1-2 sentences) and an answer's (2-10) in turn."""
    rng = random.Random(seed)
    pool = sentences()
    made = ["".join(rng.choice(_SYLLABLES) for _ in range(4)) for _ in range(count // 10)]
    texts = []
    for i in range(count):
        n = rng.randint(1, 2) if i % 2 == 0 else rng.randint(2, 10)
        texts.append(" ".join(rng.choices(pool, k=n)) + " " + rng.choice(made))
    return texts


def queries(texts: list[str], seed: int = 11) -> dict[str, list[str]]:
    """The query mix, by kind, from how many of ``texts`` hold each word."""
    rng = random.Random(seed)
    held: collections.Counter[str] = collections.Counter()
    for text in texts[:5000]:
        held.update({w for w in re.findall(r"[a-z]{3,}", text.lower())})
    share = {w: n / min(5000, len(texts)) for w, n in held.items()}
    common = [w for w, s in share.items() if 0.2 <= s <= 0.5]
    medium = [w for w, s in share.items() if 0.005 <= s <= 0.02]
    rare = [w for w, s in share.items() if s <= 0.0004 and len(w) >= 6]
    pick = rng.choice
    longer = [w for w in common + medium if len(w) >= 6]
    return {
        "one common word": [pick(common) for _ in range(8)],
        "one medium word": [pick(medium) for _ in range(8)],
        "one rare word": [pick(rare) for _ in range(8)],
        "common + medium": [f"{pick(common)} {pick(medium)}" for _ in range(8)],
        "three words": [f"{pick(common)} {pick(medium)} {pick(common)}" for _ in range(8)],
        "typing 3-5 letters": [pick(longer)[: rng.randint(3, 5)] for _ in range(8)],
        "word + typing": [f"{pick(common)} {pick(longer)[:4]}" for _ in range(8)],
        "no such word": ["zzyzxqv", "qqqwwweee", "xylophonic zzyzxqv"],
    }


async def fill(store: Store, texts: list[str]) -> float:
    """Store ``texts`` for ``OWNER``; the seconds it took."""
    started = time.perf_counter()
    for start in range(0, len(texts), PER_CONVERSATION):
        now = utcnow()
        conversation = Conversation(new_id(), "idle", now, now, OWNER, None, f"Chat {start}")
        appends = [
            AppendMessage(conversation.id, Message(role, (TextBlock(text),)))
            for role, text in zip(
                ("user", "assistant") * PER_CONVERSATION,
                texts[start : start + PER_CONVERSATION],
                strict=False,
            )
        ]
        await store.write(CreateConversation(conversation), *appends)
    return time.perf_counter() - started


def _cut(samples: list[float]) -> tuple[float, float, float]:
    samples = sorted(samples)
    return statistics.median(samples), samples[max(0, int(len(samples) * 0.95) - 1)], samples[-1]


async def time_queries(store: Store, mix: dict[str, list[str]], repeat: int) -> None:
    """Wall time per search (what a caller waits), and CPU time per search: this
    process's, plus on PostgreSQL the server's backends' (what the machine's other work
    does not inflate, unlike the wall time on a busy machine)."""
    every: list[float] = []
    every_cpu: list[float] = []
    print(f"{'query':<22}{'hits':>6}{'median ms':>11}{'p95 ms':>9}{'max ms':>9}{'cpu ms':>9}")
    for kind, texts in mix.items():
        samples: list[float] = []
        hits = 0
        for text in texts:  # warm-up
            hits = max(hits, len(await store.search_messages(text, owner=OWNER)))
        began, server = time.process_time(), await _server_cpu(store)
        for text in texts:
            for _ in range(repeat):
                started = time.perf_counter()
                await store.search_messages(text, owner=OWNER)
                samples.append((time.perf_counter() - started) * 1000)
        after = await _server_cpu(store)
        spent = time.process_time() - began + sum(after[p] - server.get(p, 0.0) for p in after)
        cpu = spent * 1000 / len(samples)
        every += samples
        every_cpu.append(cpu)
        median, p95, most = _cut(samples)
        print(f"{kind:<22}{hits:>6}{median:>11.2f}{p95:>9.2f}{most:>9.2f}{cpu:>9.2f}")
    median, p95, most = _cut(every)
    mean_cpu = statistics.fmean(every_cpu)
    print(f"{'all':<22}{'':>6}{median:>11.2f}{p95:>9.2f}{most:>9.2f}{mean_cpu:>9.2f}")


async def search_bench(args: argparse.Namespace, directory: Path) -> None:
    texts = corpus(args.messages)
    mix = queries(texts)
    urls = {"SQLite": f"sqlite:///{directory}/search.db"}
    if args.postgres:
        urls["PostgreSQL"] = args.postgres
    for label, url in urls.items():
        store = await open_store(url)
        seconds = await fill(store, texts)
        if label == "PostgreSQL":
            await _analyze(store)
        print(f"\n{label}: {len(texts):,} messages stored in {seconds:.0f} s")
        await time_queries(store, mix, args.repeat)
        await store.close()


async def _analyze(store: Store) -> None:
    """Autovacuum would gather the statistics the planner needs in a minute or so."""
    import sqlalchemy as sa

    async with store.engine.begin() as connection:  # type: ignore[attr-defined]
        await connection.execute(sa.text("ANALYZE message_search"))


# --- steps -------------------------------------------------------------------------------


async def noop(i: int) -> int:
    """Return its argument."""
    return i


def script(k: int, pool: list[str], rng: random.Random, texts: bool) -> list[Step]:
    """K steps calling a trivial tool (each reply with a sentence of text when
    ``texts``), then a closing reply of text."""
    calls = [
        tool_step(("noop", {"i": i}, f"call_{new_id()}"), text=rng.choice(pool) if texts else "")
        for i in range(k)
    ]
    return [*calls, text_step(rng.choice(pool))]


async def per_step(
    store: Store, k: int, turns: int, pool: list[str], texts: bool = True
) -> tuple[float, float]:
    """Wall time per step (median of the turns) and CPU time per step (this process's
    and, on PostgreSQL, the server processes serving this database's connections)."""
    rng = random.Random(3)
    runtime = Runtime(
        store,
        model=ScriptedModel(),
        tools=ToolRegistry([function_tool(noop)]),
        agent=AgentConfig(max_model_calls=k + 1),
    )
    samples = []
    conversation = await runtime.create_conversation(owner=OWNER)
    cpu_started, server_started = 0.0, await _server_cpu(store)
    for n in range(turns + 3):
        if n == 3:
            cpu_started, server_started = time.process_time(), await _server_cpu(store)
        if n % 20 == 0:
            conversation = await runtime.create_conversation(owner=OWNER)
        model = ScriptedModel(script(k, pool, rng, texts))
        started = time.perf_counter()
        result = await runtime.run_turn(conversation.id, rng.choice(pool), model=model)
        elapsed = time.perf_counter() - started
        assert result.stop_reason == "end_turn", result
        if n >= 3:
            samples.append(elapsed / (k + 1) * 1e6)
    cpu = time.process_time() - cpu_started
    server = await _server_cpu(store)
    cpu += sum(server[pid] - server_started.get(pid, 0.0) for pid in server)
    await runtime.close()
    return statistics.median(samples), cpu / (turns * (k + 1)) * 1e6


async def _server_cpu(store: Store) -> dict[int, float]:
    """CPU seconds so far of each PostgreSQL backend connected to the store's database
    (none for another store): read from /proc, so the server must run on this machine."""
    if not hasattr(store, "engine"):
        return {}
    import sqlalchemy as sa

    async with store.engine.connect() as connection:
        found = await connection.execute(
            sa.text("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        )
        pids = [row[0] for row in found]
    return _proc_cpu(pids)


def _proc_cpu(pids: list[int]) -> dict[int, float]:
    ticks = os.sysconf("SC_CLK_TCK")
    cpu: dict[int, float] = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu[pid] = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
    return cpu


WORKLOADS = {
    "every reply with text": True,
    "as step_overhead.py (text in the closing reply only)": False,
}


async def steps_bench(args: argparse.Namespace, directory: Path) -> None:
    pool = sentences()
    indexing = ops.index_message
    urls = {
        "SQLite": f"sqlite:///{directory}/steps-{{r}}-{{mode}}-{{w}}.db"
        f"?durability={args.durability}"
    }
    if args.postgres:
        urls["PostgreSQL"] = args.postgres
    results: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    for r in range(args.rounds):
        for mode in ("off", "on") if r % 2 else ("on", "off"):
            ops.index_message = indexing if mode == "on" else (lambda *a: None)  # type: ignore[assignment]
            for w, (workload, texts) in enumerate(WORKLOADS.items()):
                for label, url in urls.items():
                    store = await open_store(url.format(r=r, mode=mode, w=w))
                    measured = await per_step(store, 10, args.turns, pool, texts)
                    results.setdefault((label, workload, mode), []).append(measured)
                    await store.close()
    ops.index_message = indexing
    print(
        f"µs per step, K=10: the median of {args.rounds} rounds' wall-time medians, and of"
        " their CPU time per step (this process, plus the PostgreSQL server's backends)"
    )
    for workload in WORKLOADS:
        print(workload)
        for label in urls:
            for i, what in enumerate(("wall", "cpu")):
                on = [r[i] for r in results[(label, workload, "on")]]
                off = [r[i] for r in results[(label, workload, "off")]]
                ratios = ", ".join(f"{a / b:.3f}" for a, b in zip(on, off, strict=True))
                a, b = statistics.median(on), statistics.median(off)
                print(f"  {label} {what}: on {a:.1f}, off {b:.1f}: x{a / b:.3f} ({ratios})")


async def steps_case(args: argparse.Namespace, directory: Path) -> None:
    """One mode alone (``--case``): under callgrind, two runs of N1 and N2 turns differ by
    the instructions of (N2 - N1) x 11 steps, whatever the machine's load."""
    if args.case == "off":
        ops.index_message = lambda *a: None  # type: ignore[assignment]
    url = f"sqlite:///{directory}/case.db?durability={args.durability}"
    store = await open_store(url)
    await per_step(store, 10, args.turns, sentences(), texts=True)  # closes the store
    # Every row the turns wrote indexed (a search indexes the rows still waiting for a
    # batch first; no message holds this word): two runs differ by whole rows indexed,
    # not by where the last batch fell.
    store = await open_store(url)
    await store.search_messages("xyzzyplugh", owner=None)
    await store.close()
    print(f"case {args.case}: {args.turns} turns of 11 steps")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", nargs="?", choices=("search", "steps"), default="search")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each query")
    parser.add_argument("--rounds", type=int, default=6, help="rounds of steps")
    parser.add_argument("--turns", type=int, default=60, help="measured turns per round")
    parser.add_argument("--postgres", help="also on this scratch PostgreSQL database")
    parser.add_argument(
        "--durability",
        choices=("acknowledged", "relaxed"),
        default="acknowledged",
        help="the SQLite stores' commits (steps): fsynced when they acknowledge, or not",
    )
    parser.add_argument(
        "--case",
        choices=("on", "off"),
        help="steps: only this mode, once, on SQLite, every reply with text (for callgrind)",
    )
    parser.add_argument("--dir", default=None, help="where the SQLite files go")
    args = parser.parse_args()
    directory = Path(args.dir or tempfile.mkdtemp(prefix="ostinato-search-"))
    if args.what == "steps" and args.case:
        await steps_case(args, directory)
    elif args.what == "steps":
        await steps_bench(args, directory)
    else:
        await search_bench(args, directory)


if __name__ == "__main__":
    asyncio.run(main())
