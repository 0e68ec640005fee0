"""The sandbox shared fairly (issue 25, item 3): before, two workers served the whole
server in arrival order, so twelve infinite loops from one caller made another owner's
forged tool wait past its deadline. Now each owner runs one at a time, a freed worker
goes to the owner who waited longest, runs a minute are bounded, and a trial run counts
like a call."""

from __future__ import annotations

import asyncio

import pytest

from ostinato.errors import InvalidRequest
from ostinato.store.memory import MemoryStore
from ostinato.tools.forge import Limits, Sandbox
from ostinato.tools.forge.fairness import FairSlots, RunRate
from ostinato.tools.forge.forging import forge
from ostinato.tools.forge.limits import SandboxError

LOOP = "() => { while (true) {} }"
QUICK = "(args) => args.n + 1"


async def test_one_owners_flood_delays_anothers_call_by_at_most_one_run() -> None:
    sandbox = Sandbox(limits=Limits(wall_s=1.0, cpu_s=5.0), workers=2)
    ended: list[str] = []

    async def flood(i: int) -> None:
        with pytest.raises(SandboxError):
            await sandbox.run(LOOP, {}, owner="mallory")
        ended.append(f"flood {i}")

    floods = [asyncio.create_task(flood(i)) for i in range(12)]
    await asyncio.sleep(0.1)  # every flood run asked for a worker first
    assert await sandbox.run(QUICK, {"n": 1}, owner="ann") == 2
    ended.append("ann")
    assert ended.index("ann") <= 1, ended  # at most one of the flood's runs ended first
    for task in floods:
        task.cancel()
    await asyncio.gather(*floods, return_exceptions=True)
    await sandbox.aclose()


async def test_a_freed_worker_goes_to_the_owner_who_waited_longest() -> None:
    slots = FairSlots(total=1, per_owner=1)
    order: list[str] = []
    release = asyncio.Event()

    async def run(owner: str, hold: bool = False) -> None:
        async with slots.slot(owner):
            order.append(owner)
            if hold:
                await release.wait()

    first = asyncio.create_task(run("a", hold=True))
    await asyncio.sleep(0)
    waiting = [asyncio.create_task(run(o)) for o in ("a", "a", "b", "a", "c")]
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(first, *waiting)
    assert order == ["a", "a", "b", "c", "a", "a"]  # b and c are not behind all of a's


def test_runs_a_minute_are_bounded_per_owner() -> None:
    rate = RunRate(2)
    rate.count("ann")
    rate.count("ann")
    with pytest.raises(SandboxError) as refused:
        rate.count("ann")
    assert refused.value.limit == "rate" and "2 a minute" in refused.value.message
    rate.count("bob")  # another owner's runs are apart


async def test_a_trial_run_counts_like_a_call() -> None:
    sandbox = Sandbox(runs_per_minute=1)
    store = MemoryStore()
    body = {"description": "Add one.", "parameters": {"type": "object"}, "code": QUICK}
    await forge(store, sandbox, "ann", name="one", example={"n": 1}, **body)
    with pytest.raises(InvalidRequest, match="too many runs"):
        await forge(store, sandbox, "ann", name="two", example={"n": 1}, **body)
    await sandbox.aclose()
