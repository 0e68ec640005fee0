"""Per-turn overhead against the length of the stored history, and against its branches.

Conversations are filled with 10, 1,000 and 10,000 stored messages (user / assistant
pairs written straight to the store), then each runs turns against a zero-latency
scripted model answering in one text step. A turn reads the history window (the newest
rows after the compaction watermark, at most 40), builds the request, streams, commits the
reply and records the turn; the figure is the wall time per turn. Target: the 10,000
figure within 1.2x of the 10.

``--branches`` measures trees instead (``ostinato.store.tree``): one conversation of one
branch of 100 messages, and two of 100 branches of 100 messages each (every branch forks
its predecessor at a message between its 25th and 74th and is filled up to 100; 5,000-odd
rows), one turned on its newest branch, one switched back to its first. Target: each
tree's figure within 1.2x of the one branch's.

Run:  python bench/history.py [--turns N] [--store sqlite|memory|URL] [--branches]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from ostinato.messages import Message, TextBlock
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.store import open_store
from ostinato.store.base import AppendMessage, Store
from ostinato.store.branches import MoveBranch
from ostinato.tools.registry import ToolRegistry

SIZES = (10, 1_000, 10_000)


async def fill(store: Store, runtime: Runtime, size: int) -> str:
    conversation = await runtime.create_conversation()
    batch = []
    for i in range(size):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"message {i}: " + "lorem ipsum dolor sit amet " * 8
        batch.append(AppendMessage(conversation.id, Message(role, (TextBlock(text),))))
        if len(batch) == 500:
            await store.write(*batch)
            batch = []
    if batch:
        await store.write(*batch)
    return conversation.id


def _row(i: int) -> Message:
    role = "user" if i % 2 == 0 else "assistant"
    text = f"message {i}: " + "lorem ipsum dolor sit amet " * 8
    return Message(role, (TextBlock(text),))


async def fill_tree(store: Store, runtime: Runtime, branches: int, length: int) -> str:
    """A conversation of ``branches`` branches of ``length`` messages each: branch k forks
    branch k - 1 after its message ``25 + k % 50`` and is filled up to ``length``."""
    conversation = await runtime.create_conversation()
    cid = conversation.id
    await store.write(*(AppendMessage(cid, _row(i)) for i in range(length)))
    for k in range(1, branches):
        tree = await store.tree(cid)
        assert tree is not None
        keep = 25 + k % 50  # messages of the branch before that this one shares
        path = [s for lo, hi in tree.path(tree.leaf) for s in range(lo, hi + 1)]
        await store.write(
            MoveBranch(cid, path[keep - 1]),
            *(AppendMessage(cid, _row(i)) for i in range(keep, length)),
        )
    return cid


async def switch_to_first(store: Store, cid: str) -> None:
    tree = await store.tree(cid)
    assert tree is not None
    await store.write(MoveBranch(cid, tree.leaves()[0], leaf_only=True))


async def branches(store: Store, runtime: Runtime, turns: int) -> None:
    one = await fill_tree(store, runtime, 1, 100)
    newest = await fill_tree(store, runtime, 100, 100)
    first = await fill_tree(store, runtime, 100, 100)
    await switch_to_first(store, first)
    cases = {"1 branch of 100": one, "100 x 100, newest": newest, "100 x 100, first": first}
    results: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(3):  # interleaved, as above
        for name, cid in cases.items():
            results[name] += await per_turn(runtime, cid, turns // 3)
    print(f"{'conversation':>20}{'median':>10}{'p90':>10}  (µs per turn)")
    medians = {}
    for name in cases:
        samples = sorted(results[name])
        medians[name] = statistics.median(samples)
        print(f"{name:>20}{medians[name]:>10.0f}{samples[int(len(samples) * 0.9) - 1]:>10.0f}")
    for name in list(cases)[1:]:
        ratio = medians[name] / medians["1 branch of 100"]
        print(f"{name} / 1 branch = {ratio:.2f}x (target <= 1.2x)")


async def per_turn(runtime: Runtime, cid: str, turns: int) -> list[float]:
    samples = []
    for n in range(turns + 5):
        model = ScriptedModel([text_step(f"reply {n}")])
        started = time.perf_counter()
        result = await runtime.run_turn(cid, f"question {n}", model=model)
        elapsed = time.perf_counter() - started
        assert result.stop_reason == "end_turn", result
        if n >= 5:  # warm-up
            samples.append(elapsed * 1e6)
    return samples


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--store", default="sqlite", help="sqlite (a temp file), memory, or a URL")
    parser.add_argument("--branches", action="store_true", help="measure trees (see above)")
    args = parser.parse_args()
    if args.store == "sqlite":
        url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='ostinato-bench-')) / 'history.db'}"
    elif args.store == "memory":
        url = "memory://"
    else:
        url = args.store
    store = await open_store(url)
    runtime = Runtime(store, model=ScriptedModel(), tools=ToolRegistry(), seed_recall=False)
    if args.branches:
        print(f"per-turn overhead by the shape of the tree ({args.store})")
        await branches(store, runtime, args.turns)
        await store.close()
        return
    conversations = {size: await fill(store, runtime, size) for size in SIZES}
    results: dict[int, list[float]] = {size: [] for size in SIZES}
    for _ in range(3):  # interleave the sizes so machine noise hits them alike
        for size in SIZES:
            results[size] += await per_turn(runtime, conversations[size], args.turns // 3)
    print(f"per-turn overhead by stored history ({args.store}), µs")
    print(f"{'messages':>10}{'median':>10}{'p90':>10}")
    medians = {}
    for size in SIZES:
        samples = sorted(results[size])
        medians[size] = statistics.median(samples)
        print(f"{size:>10,}{medians[size]:>10.0f}{samples[int(len(samples) * 0.9) - 1]:>10.0f}")
    print(f"10,000 / 10 = {medians[10_000] / medians[10]:.2f}x (target <= 1.2x)")
    await store.close()


if __name__ == "__main__":
    asyncio.run(main())
