"""An approval's wait as a span (observe.otel, read back from the SDK's in-memory
exporter): nested in the tool call that waits, with the tool, the ending and the time
waited, which the tool call's span carries too; counted by ending in the metrics."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # makes `tests` importable

from ostinato import observe
from ostinato.approvals import ApprovalPolicy
from ostinato.bus import Subscription
from ostinato.frames import ApprovalRequested
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.observe.otel import OtelBackend
from ostinato.observe.prometheus import PrometheusBackend
from ostinato.runtime import Runtime
from ostinato.store.memory import MemoryStore
from ostinato.tools.registry import ToolRegistry
from tests.observe.test_metrics import samples
from tests.server.people import deploy_tool

WAIT_S = 0.05  # how long the person takes to decide


@pytest.fixture
def observed() -> Iterator[tuple[InMemorySpanExporter, PrometheusBackend]]:
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    metrics = PrometheusBackend(CollectorRegistry())
    previous = observe.install([OtelBackend(processor), metrics])
    try:
        yield exporter, metrics
    finally:
        observe.install(previous)
        processor.shutdown()


def runtime(runs: list[str], timeout: float) -> Runtime:
    model = ScriptedModel([tool_step(("deploy", {"target": "prod"})), text_step("Done.")])
    return Runtime(
        MemoryStore(),
        model=model,
        tools=ToolRegistry([deploy_tool(runs)]),
        approvals=ApprovalPolicy(timeout=timeout),
    )


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def asked(watching: Subscription) -> str:
    """The approval the turn asks for (its id), as a surface sees it."""
    async with asyncio.timeout(10):
        async for frame in watching:
            if isinstance(frame, ApprovalRequested):
                return frame.approval_id
    raise AssertionError("the stream ended before an approval was asked for")


def wait_and_tool(exporter: InMemorySpanExporter) -> tuple[ReadableSpan, ReadableSpan]:
    finished = exporter.get_finished_spans()
    (wait,) = [s for s in finished if s.name == "approval"]
    (tool,) = [s for s in finished if s.name == "execute_tool deploy"]
    return wait, tool


async def test_an_approved_wait_is_a_span_in_its_tool_call_with_ending_and_time(
    observed: tuple[InMemorySpanExporter, PrometheusBackend],
) -> None:
    exporter, metrics = observed
    runs: list[str] = []
    rt = runtime(runs, timeout=60)
    cid = (await rt.create_conversation()).id
    watching = rt.bus.subscribe(cid)  # a surface to ask through
    handle = await rt.start_turn(cid, "ship it")
    approval_id = await asked(watching)
    await asyncio.sleep(WAIT_S)
    await rt.decide(cid, approval_id, approve=True)
    result = await asyncio.wait_for(handle.result(), 10)
    watching.close()
    assert result.stop_reason == "end_turn" and runs == ["prod"]

    wait, tool = wait_and_tool(exporter)
    assert wait.parent is not None and wait.parent.span_id == tool.context.span_id
    assert wait.context.trace_id == tool.context.trace_id
    a = attrs(wait)
    assert a["ostinato.approval.tool"] == "deploy"
    assert a["ostinato.approval.ending"] == "APPROVED"
    assert WAIT_S <= a["ostinato.approval.waited_s"] < 10
    assert a["ostinato.run_id"] == result.run_id and a["gen_ai.conversation.id"] == cid
    assert wait.status.status_code is StatusCode.UNSET
    assert wait.start_time is not None and wait.end_time is not None
    assert tool.start_time is not None and tool.end_time is not None
    assert tool.start_time <= wait.start_time < wait.end_time <= tool.end_time
    assert (wait.end_time - wait.start_time) / 1e9 == pytest.approx(
        a["ostinato.approval.waited_s"], abs=0.01
    )
    t = attrs(tool)  # the tool call says how its wait ended too
    assert t["ostinato.approval.ending"] == "APPROVED" and t["ostinato.tool.status"] == "ok"
    assert t["ostinato.approval.waited_s"] == a["ostinato.approval.waited_s"]
    got = samples(metrics.exposition().decode())
    assert got[("ostinato_approvals_total", (("ending", "APPROVED"),))] == 1


@pytest.mark.parametrize(
    ("ending", "deadline", "surface"),
    [("UNANSWERED", WAIT_S, True), ("UNREACHABLE", 60, False), ("DECLINED", 60, True)],
)
async def test_a_wait_that_is_not_approved_says_how_it_ended(
    observed: tuple[InMemorySpanExporter, PrometheusBackend],
    ending: str,
    deadline: float,
    surface: bool,
) -> None:
    exporter, metrics = observed
    runs: list[str] = []
    rt = runtime(runs, timeout=deadline)
    cid = (await rt.create_conversation()).id
    watching = rt.bus.subscribe(cid) if surface else None
    handle = await rt.start_turn(cid, "ship it")
    if ending == "DECLINED":
        assert watching is not None
        await rt.decide(cid, await asked(watching), approve=False)
    result = await asyncio.wait_for(handle.result(), 10)
    if watching is not None:
        watching.close()
    assert result.stop_reason == "end_turn" and runs == []  # never ran

    wait, tool = wait_and_tool(exporter)
    assert wait.parent is not None and wait.parent.span_id == tool.context.span_id
    a = attrs(wait)
    assert a["ostinato.approval.ending"] == ending and a["ostinato.approval.tool"] == "deploy"
    assert 0 <= a["ostinato.approval.waited_s"] < 10
    if ending == "UNANSWERED":
        assert a["ostinato.approval.waited_s"] >= deadline  # it waited for the deadline
    assert attrs(tool)["ostinato.approval.ending"] == ending
    got = samples(metrics.exposition().decode())
    assert got[("ostinato_approvals_total", (("ending", ending),))] == 1
