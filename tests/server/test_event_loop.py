"""Nothing a caller or a model sends runs unbounded work on the event loop (issue 25,
item 2): while each hostile input of the issue is being handled, the loop keeps turning
and ``/healthz`` answers.

Each input froze the whole server before: a ``pattern`` of ``^(a+)+$`` against ``a``s
and a ``!`` (the issue's 24 ``a``s took 0.6 s here, each extra one doubles it: 28 are
used), ``uniqueItems`` over small objects (quadratic: the issue's 1,200 took 1.3 s
here, 3,000 are used), a 12 KB PDF whose one page is a compressed stream of a hundred
thousand text operators (5.5 s of pypdf on the loop). A monitor task
wakes every 5 ms and keeps the longest gap between two wakings: the loop's longest
stall while the input was handled.

The bound asserted on that stall is one second: ten times the issue's 100 ms target, so
a loaded two-core runner does not fail it, and still a fraction of what each input
stalled the loop before (4 to 45 s). The measured stalls are printed (``-s``) and kept
in the closing note of issue 25; the target itself is measured, not asserted.
"""

from __future__ import annotations

import asyncio
import gc
import time
import zlib
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from ostinato import attachments
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.server import build_routes, create_app
from ostinato.store.base import Store
from ostinato.store.forged import SaveForgedTool
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.forge import Limits, Sandbox
from ostinato.tools.forge.tools import forged_source
from ostinato.tools.mounting import Mount, Source

STALL_BOUND_S = 1.0
BACKTRACKS = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^(a+)+$"}}}
UNIQUE = {"type": "object", "properties": {"x": {"type": "array", "uniqueItems": True}}}


def slow_pdf(repeats: int) -> bytes:
    """A one-page PDF whose content stream is ``repeats`` text operators, compressed."""
    content = zlib.compress(b"BT /F1 12 Tf 1 0 0 1 72 712 Tm (a) Tj ET\n" * repeats, 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content)
        + content
        + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


@dataclass
class Watch:
    """The loop's longest stall and how many ``/healthz`` answers came while watching."""

    stall_s: float = 0.0
    health: list[float] = field(default_factory=list)


async def _watched(client: httpx.AsyncClient, work: Awaitable[Any]) -> tuple[Any, Watch]:
    watch = Watch()
    done = asyncio.Event()

    async def tick() -> None:
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(0.005)
            now = time.monotonic()
            watch.stall_s = max(watch.stall_s, now - last)
            last = now

    async def poll() -> None:
        while not done.is_set():
            started = time.monotonic()
            assert (await client.get("/healthz")).status_code == 200
            watch.health.append(time.monotonic() - started)
            await asyncio.sleep(0.02)

    # The collector's full pass is not the hostile input's doing: in a test process that
    # has run hundreds of tests (a gigabyte of objects) one pass stalled this loop for
    # seconds on a slow machine. It runs before the window and not during it.
    gc.collect()
    gc.disable()
    watchers = [asyncio.create_task(tick()), asyncio.create_task(poll())]
    await asyncio.sleep(0.03)  # both running before the work starts
    watch.health.clear()
    try:
        result = await work
    finally:
        done.set()
        await asyncio.gather(*watchers)
        gc.enable()
    slowest = max(watch.health, default=0.0)
    print(
        f"stall {watch.stall_s * 1000:.1f} ms, healthz {len(watch.health)} answers, "
        f"slowest {slowest * 1000:.1f} ms"
    )
    return result, watch


@pytest.fixture
async def served(
    store: Store, model: ScriptedModel
) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient]]:
    sandbox = Sandbox(limits=Limits(wall_s=20.0))
    runtime = Runtime(
        store,
        model=model,
        mount=Mount(
            [Source("builtins", builtin_tools(), builtin=True), forged_source(store, sandbox)]
        ),
        sandbox=sandbox,
    )
    app = create_app(runtime, ping_interval=0.2)
    await build_routes(app)  # as serve does once it listens (not the hostile input's doing)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        yield runtime, c
    await runtime.close()


def _forge(parameters: dict[str, Any], example: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "probe",
        "description": "A probe.",
        "parameters": parameters,
        "code": "(args) => 1",
        "example": example,
    }


async def test_a_backtracking_pattern_from_a_caller_does_not_stall_the_loop(
    served: tuple[Runtime, httpx.AsyncClient],
) -> None:
    _, client = served
    body = _forge(BACKTRACKS, {"x": "a" * 28 + "!"})
    answer, watch = await _watched(client, client.post("/v1/tools/forged", json=body))
    assert answer.status_code == 422 and "does not match" in answer.text
    assert watch.stall_s < STALL_BOUND_S


async def test_unique_items_over_many_objects_does_not_stall_the_loop(
    served: tuple[Runtime, httpx.AsyncClient],
) -> None:
    _, client = served
    items = [{"n": i, "tag": f"t{i}"} for i in range(3000)]
    body = _forge(UNIQUE, {"x": [*items, {"tag": "t5", "n": 5}]})
    answer, watch = await _watched(client, client.post("/v1/tools/forged", json=body))
    assert answer.status_code == 422 and "non-unique" in answer.text
    assert watch.stall_s < STALL_BOUND_S


async def test_a_models_arguments_to_a_stored_tool_are_checked_off_the_loop(
    served: tuple[Runtime, httpx.AsyncClient], model: ScriptedModel, store: Store
) -> None:
    _, client = served
    await store.write(SaveForgedTool("local", "probe", "A probe.", BACKTRACKS, "(a) => 1", None))
    cid = (await client.post("/v1/conversations")).json()["id"]
    model.add(tool_step(("my_probe", {"x": "a" * 28 + "!"})), text_step("No match."))
    turn = client.post(f"/v1/conversations/{cid}/turns", json={"text": "probe it"})
    answer, watch = await _watched(client, turn)
    assert answer.status_code == 200, answer.text
    (call,) = await store.list_tool_calls(cid)
    assert call.is_error and "does not match" in (call.result or "")
    assert watch.stall_s < STALL_BOUND_S


async def test_a_slow_pdf_is_read_off_the_loop_and_stopped_at_its_budget(
    served: tuple[Runtime, httpx.AsyncClient],
    model: ScriptedModel,
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The PDF takes pypdf several seconds on one core; its reader is given one."""
    monkeypatch.setattr(attachments, "PDF_SECONDS", 1.0, raising=False)
    _, client = served
    cid = (await client.post("/v1/conversations")).json()["id"]
    model.add(text_step("It could not be read."))
    turn = client.post(
        f"/v1/conversations/{cid}/turns",
        data={"text": "what does it say?"},
        files=[("files", ("slow.pdf", slow_pdf(100_000), "application/pdf"))],
    )
    answer, watch = await _watched(client, turn)
    assert answer.status_code == 200, answer.text
    (read,) = await store.list_tool_calls(cid)
    assert read.is_error and "took longer than its 1 s" in (read.result or "")
    assert watch.stall_s < STALL_BOUND_S
    assert len(watch.health) >= 5  # it answered all along the second the reader had
