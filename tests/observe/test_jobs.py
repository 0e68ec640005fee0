"""Background jobs (observe.job: a schedule's firing): a trace of their own for a
conversation, linked to the turns they start (each a trace of its own, whose trace id is
its run id's); failures, model calls made in a job, and its log lines."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from ostinato import observe
from ostinato.messages import Message, TextBlock
from ostinato.models.assembly import complete
from ostinato.models.base import ModelRequest, Usage
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.observe.logs import JsonFormatter
from ostinato.observe.otel import OtelBackend, turn_trace
from ostinato.observe.prometheus import PrometheusBackend
from ostinato.runtime import Runtime
from ostinato.store.memory import MemoryStore


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    previous = observe.install(OtelBackend(processor))
    try:
        yield exporter
    finally:
        observe.install(previous)
        processor.shutdown()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_job_is_a_trace_of_its_own_linked_to_the_turns_it_started(
    spans: InMemorySpanExporter,
) -> None:
    rt = Runtime(MemoryStore(), model=ScriptedModel([text_step("Reminded.")]))
    cid = (await rt.create_conversation(owner="ann")).id
    with observe.job(
        "schedule", conversation_id=cid, owner="ann", id="sch_1", mode="prompt"
    ) as job:
        handle = await rt.start_turn(cid, "remind me")
        observe.caused(handle.turn)
        result = await handle.result()
        job.note(outcome="delivered", late_s=0.25)
    await rt.settle()
    finished = spans.get_finished_spans()
    (fired,) = [s for s in finished if s.name == "schedule"]
    assert fired.parent is None  # a trace of its own
    a = attrs(fired)
    assert a["gen_ai.conversation.id"] == cid and a["ostinato.owner"] == "ann"
    assert a["ostinato.schedule.id"] == "sch_1" and a["ostinato.schedule.mode"] == "prompt"
    assert a["ostinato.schedule.outcome"] == "delivered" and a["ostinato.schedule.late_s"] == 0.25
    assert a["ostinato.run_ids"] == (result.run_id,)
    assert fired.status.status_code is StatusCode.UNSET

    (turn,) = [s for s in finished if s.name.startswith("invoke_agent")]
    assert turn.parent is None and turn.context.trace_id != fired.context.trace_id
    assert turn.context.trace_id == int(result.run_id, 16)  # the run id finds the trace
    assert turn.context == turn_trace(result.turn_id, result.run_id)
    (link,) = fired.links
    assert (link.context.trace_id, link.context.span_id) == (
        turn.context.trace_id,
        turn.context.span_id,
    )
    chat = next(s for s in finished if s.name.startswith("chat"))
    assert chat.context.trace_id == turn.context.trace_id  # the turn's work is in its trace


async def test_a_failed_job_says_how_and_caused_outside_a_job_does_nothing(
    spans: InMemorySpanExporter,
) -> None:
    rt = Runtime(MemoryStore(), model=ScriptedModel([text_step("Hi.")]))
    cid = (await rt.create_conversation()).id
    handle = await rt.start_turn(cid, "hello")
    observe.caused(handle.turn)  # no job under way: nothing to link
    await handle.result()
    with pytest.raises(TimeoutError), observe.job("schedule", conversation_id=cid, id="sch_2"):
        raise TimeoutError
    (fired,) = [s for s in spans.get_finished_spans() if s.name == "schedule"]
    assert attrs(fired)["error.type"] == "timeout" and not fired.links
    assert fired.status.status_code is StatusCode.ERROR
    assert "ostinato.owner" not in attrs(fired)


async def test_a_model_call_in_a_job_is_in_its_trace_and_metrics_and_logs_name_it() -> None:
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    metrics = PrometheusBackend(CollectorRegistry())
    previous = observe.install([OtelBackend(processor), metrics])
    model = ScriptedModel([text_step("ok", usage=Usage(5, 2))], name="test:jobs")
    request = ModelRequest(system="x", messages=(Message("user", (TextBlock("y"),)),))
    record = logging.LogRecord("ostinato.background", logging.INFO, "", 0, "fired", (), None)
    try:
        with observe.job("schedule", conversation_id="c-1", owner="bob", id="sch_3"):
            await complete(model, request, deadline=5.0, what="step")
            line = json.loads(JsonFormatter().format(record))
    finally:
        observe.install(previous)
        processor.shutdown()
    by_name = {s.name: s for s in exporter.get_finished_spans()}
    assert by_name["chat jobs"].parent == by_name["schedule"].context
    assert attrs(by_name["chat jobs"])["gen_ai.conversation.id"] == "c-1"
    assert "ostinato.run_id" not in attrs(by_name["chat jobs"])  # a job is no turn's
    found = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for s in family.samples
    }
    assert found[("ostinato_model_tokens_total", (("kind", "input"), ("model", "test:jobs")))] == 5
    assert found[("ostinato_model_call_duration_seconds_count", (("model", "test:jobs"),))] == 1
    assert line["conversation_id"] == "c-1" and line["owner"] == "bob"
    assert "run_id" not in line


async def test_a_scheduled_prompts_firing_is_one_trace_linked_to_both_stages(
    spans: InMemorySpanExporter,
) -> None:
    """The firer's own use of ``observe.job``: a prompt's firing is a ``schedule`` trace
    linked to stage one's turn (in the background conversation) and stage two's."""
    from datetime import UTC, datetime, timedelta

    from ostinato.background.firer import Firer
    from ostinato.background.schedules import Schedules
    from ostinato.config.background import BackgroundSection

    now = [datetime.now(UTC)]
    model = ScriptedModel([text_step("Plan: rest."), text_step("Your plan: rest.")])
    rt = Runtime(MemoryStore(), model=model)
    cid = (await rt.create_conversation(owner="ann")).id
    schedules = Schedules(rt.store, BackgroundSection(), lambda: now[0])
    made = await schedules.create("ann", cid, "in 1 minute", "Plan my day")
    now[0] += timedelta(minutes=1)
    await Firer(rt, schedules, "h1").tick()
    running = rt.running(cid)
    if running is not None:
        await running.result()
    await rt.settle()
    finished = spans.get_finished_spans()
    (fired,) = [s for s in finished if s.name == "schedule"]
    assert fired.parent is None and attrs(fired)["ostinato.schedule.id"] == made.id
    turns = [s for s in finished if s.name.startswith("invoke_agent")]
    assert len(turns) == 2
    linked = {link.context.trace_id for link in fired.links}
    assert linked == {t.context.trace_id for t in turns}
    await rt.close()
