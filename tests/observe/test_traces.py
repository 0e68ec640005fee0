"""OpenTelemetry traces (observe.otel): spans read back from the SDK's in-memory exporter
for a turn with a router call, compaction, a sub-agent run by a tool call, and fact
extraction after it; GenAI semantic-convention attributes; content only when asked; the
spans made without the SDK's checks read as its own."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # makes `tests` importable

from ostinato import observe
from ostinato.observe.otel import SAMPLED, SCOPE, ClientSpan, FastSpan, OtelBackend, span_context
from tests.observe.scenario import run_scenario


def tracing(capture_content: bool = False) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    previous = observe.install(OtelBackend(processor, capture_content=capture_content))
    try:
        yield exporter
    finally:
        observe.install(previous)
        processor.shutdown()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    yield from tracing()


@pytest.fixture
def content_spans() -> Iterator[InMemorySpanExporter]:
    yield from tracing(capture_content=True)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def parent_of(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> ReadableSpan | None:
    return by_id.get(span.parent.span_id) if span.parent is not None else None


async def test_a_turn_is_a_tree_of_genai_spans(spans: InMemorySpanExporter) -> None:
    ran = await run_scenario()
    finished = spans.get_finished_spans()
    turn_id = ran.result.turn_id
    mine = [s for s in finished if attrs(s).get("ostinato.turn_id") == turn_id]
    by_id = {s.context.span_id: s for s in finished}
    names = [s.name for s in mine]
    for expected in ("invoke_agent lead", "route", "compaction", "chat lead"):
        assert expected in names, (expected, names)
    assert "execute_tool delegate" in names
    assert len({attrs(span)["ostinato.run_id"] for span in mine}) == 1
    for span in mine:  # the conversation and run on every span of the turn
        assert attrs(span)["gen_ai.conversation.id"] == ran.conversation_id
        assert attrs(span)["ostinato.run_id"]
    turn = next(s for s in mine if s.name == "invoke_agent lead")
    assert turn.parent is None and attrs(turn)["gen_ai.operation.name"] == "invoke_agent"
    assert attrs(turn)["gen_ai.agent.name"] == "lead"
    assert attrs(turn)["ostinato.stop_reason"] == "end_turn"
    route = next(s for s in mine if s.name == "route")
    assert parent_of(route, by_id) is turn
    router_call = next(s for s in mine if s.name == "chat router")
    assert parent_of(router_call, by_id) is route
    assert attrs(router_call)["ostinato.purpose"] == "router"

    calls = [s for s in mine if s.name == "chat lead"]
    first = calls[0]
    a = attrs(first)
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "test" and a["gen_ai.system"] == "test"
    assert a["gen_ai.request.model"] == "lead" and a["gen_ai.response.model"] == "lead"
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (100, 10)
    assert a["gen_ai.usage.cache_read.input_tokens"] == 0
    assert a["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert a["gen_ai.response.time_to_first_chunk"] >= 0
    assert parent_of(first, by_id) is turn and a["ostinato.step"] == 1
    assert first.start_time is not None and first.end_time is not None
    assert turn.start_time <= first.start_time <= first.end_time <= turn.end_time  # type: ignore[operator]

    tool = next(s for s in mine if s.name == "execute_tool delegate")
    t = attrs(tool)
    assert t["gen_ai.operation.name"] == "execute_tool" and t["gen_ai.tool.name"] == "delegate"
    assert t["gen_ai.tool.call.id"] and t["ostinato.tool.status"] == "ok"
    assert parent_of(tool, by_id) is turn and t["ostinato.step"] == 1
    assert "gen_ai.tool.call.arguments" not in t  # content is off by default
    sub = next(s for s in finished if s.name == "invoke_agent helper")
    assert parent_of(sub, by_id) is tool  # the sub-agent nests in the call that ran it
    helper_call = next(s for s in finished if s.name == "chat helper")
    node = parent_of(helper_call, by_id)
    while node is not None and node is not sub:
        node = parent_of(node, by_id)
    assert node is sub
    assert attrs(helper_call)["gen_ai.conversation.id"] == ran.conversation_id
    compaction = next(s for s in mine if s.name == "compaction")
    summary = next(s for s in mine if s.name == "chat sum")
    assert parent_of(summary, by_id) is compaction

    extraction = [s for s in finished if s.name == "chat extract"]
    background = parent_of(extraction[-1], by_id)
    assert background is not None and background.parent is None  # a trace of its own...
    assert background.links and background.links[0].context.span_id == turn.context.span_id
    assert attrs(background)["ostinato.turn_id"] == turn_id  # ...linked to the turn
    for span in finished:
        assert "gen_ai.input.messages" not in attrs(span)


async def test_content_goes_on_spans_only_when_switched_on(
    content_spans: InMemorySpanExporter,
) -> None:
    await run_scenario()
    finished = content_spans.get_finished_spans()
    call = next(s for s in finished if s.name == "chat helper")
    assert "add 2 and 2" in attrs(call)["gen_ai.input.messages"]
    assert "It is 4." in attrs(call)["gen_ai.output.messages"]
    tool = next(s for s in finished if s.name == "execute_tool delegate")
    assert "add 2 and 2" in attrs(tool)["gen_ai.tool.call.arguments"]
    assert "It is 4." in attrs(tool)["gen_ai.tool.call.result"]


def test_a_fast_span_reads_as_the_sdks_own_finished_span() -> None:
    """observe.otel makes spans without ReadableSpan.__init__ (FastSpan) and contexts
    without SpanContext's checks (span_context): both read as the SDK's own."""
    context = span_context(5, 7)
    assert context == SpanContext(5, 7, False, SAMPLED) and type(context) is SpanContext
    assert context.is_valid and context.trace_state == SpanContext(5, 7, False).trace_state
    parent = span_context(5, 3)
    resource = Resource.create({"service.name": "t"})
    sdk = ReadableSpan(
        "x",
        context=context,
        parent=parent,
        resource=resource,
        attributes={"a": 1},
        start_time=10,
        end_time=20,
        instrumentation_scope=SCOPE,
    )
    fast = FastSpan("x", context, parent, {"a": 1}, 10, resource)
    fast._end_time = 20
    for name in vars(sdk):  # every field the SDK's __init__ sets
        assert hasattr(fast, name), name
    public = [p for p, v in vars(ReadableSpan).items() if isinstance(v, property)]
    for name in public:
        if name not in ("instrumentation_info", "status"):  # deprecated (it warns); below
            assert getattr(fast, name) == getattr(sdk, name), name
    assert (fast.status.status_code, fast.status.description) == (
        sdk.status.status_code,
        sdk.status.description,
    )
    assert fast.to_json() == sdk.to_json()
    assert ClientSpan("x", context, None, {}, 1, resource).kind is SpanKind.CLIENT
