"""OpenTelemetry traces: each observed scope as a span, named and described by the GenAI
semantic conventions (``gen_ai.*`` attributes: operation, provider, request and response
model, token usage, finish reasons, time to the first chunk; tool name and call id).

Spans nest as the scopes do: a turn (``invoke_agent``) holds its model calls (``chat``,
each with its step's number as ``ostinato.step``), tool calls (``execute_tool``),
routing, compaction and approval waits; a sub-agent's turn nests in the tool call that
ran it; background work is a trace of its own linked to its turn. Every span carries
the conversation id (``gen_ai.conversation.id``), ``ostinato.run_id`` and
``ostinato.turn_id`` (a sub-agent's: its parent's conversation and run, its own turn).
Prompts, replies and tool arguments go on spans only with ``capture_content``.

The spans are the SDK's own finished spans (``ReadableSpan``), handed to a span processor
(a batch one to the OTLP exporter, in ``observe.setup``) when their work ends: a scope
gets its span context (trace and span ids) when it starts, so the work nested in it can
name its parent, and its attributes in one pass when it ends. This skips the SDK's live
``Span`` (its locks, per-attribute checks and sampler) to keep the per-step cost small
(bench/step_overhead.py --observe); every span is recorded (no sampling). No span per
step or per streamed delta. This module imports the OpenTelemetry SDK; ``observe.setup``
imports it only when traces are asked for.
"""

from __future__ import annotations

import json
import time
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from ostinato.messages import message_to_json
from ostinato.observe.backend import Backend
from ostinato.observe.scopes import (
    ApprovalScope,
    BackgroundScope,
    CallScope,
    Holder,
    OpScope,
    Scope,
    StepScope,
    ToolScope,
    TurnScope,
)

SCOPE = InstrumentationScope("ostinato")
SAMPLED = TraceFlags(TraceFlags.SAMPLED)
OK = Status(StatusCode.UNSET)


def split_model(model: str) -> tuple[str, str]:
    """``provider:model`` as (provider, model); an id with no provider is its own."""
    provider, sep, name = model.partition(":")
    return (provider, name) if sep else ("unknown", model)


class Open:
    """A span under way: its context, its parent's, its name and attributes so far."""

    __slots__ = ("attributes", "context", "links", "name", "parent", "start")

    def __init__(
        self,
        context: SpanContext,
        parent: SpanContext | None,
        name: str,
        attributes: dict[str, Any],
        links: tuple[Link, ...],
    ) -> None:
        self.context, self.parent, self.name = context, parent, name
        self.attributes, self.links = attributes, links
        self.start = time.time_ns()


class OtelBackend(Backend):
    """Spans for the observed work, handed to ``processor`` as each ends."""

    def __init__(
        self,
        processor: SpanProcessor,
        resource: Resource | None = None,
        *,
        capture_content: bool = False,
    ) -> None:
        self.processor = processor
        self.resource = resource if resource is not None else Resource.create()
        self.capture_content = capture_content
        self.ids = RandomIdGenerator()
        self._models: dict[str, dict[str, Any]] = {}
        self._epoch = time.time_ns() - int(time.perf_counter() * 1e9)

    def _context(self, parent: SpanContext | None) -> SpanContext:
        trace_id = parent.trace_id if parent is not None else self.ids.generate_trace_id()
        return SpanContext(trace_id, self.ids.generate_span_id(), False, SAMPLED)

    # -- starting ---------------------------------------------------------------------

    def started(self, scope: Scope) -> None:
        if isinstance(scope, StepScope | CallScope):
            return  # a step is an attribute of its calls; a model call's span is made at its end
        name, attributes, links = self._describe(scope)
        parent = _parent_context(scope)
        scope.handle = Open(self._context(parent), parent, name, attributes, links)

    def _describe(self, scope: Scope) -> tuple[str, dict[str, Any], tuple[Link, ...]]:
        base = _base(scope)
        if isinstance(scope, ToolScope):
            attributes = _in_step(scope, base)
            attributes["gen_ai.operation.name"] = "execute_tool"
            attributes["gen_ai.tool.name"] = scope.name
            attributes["gen_ai.tool.call.id"] = scope.call_id
            if self.capture_content:
                attributes["gen_ai.tool.call.arguments"] = _dumps(scope.arguments)
            return f"execute_tool {scope.name}", attributes, ()
        if isinstance(scope, OpScope):
            return scope.name, dict(base), ()
        if isinstance(scope, TurnScope):
            attributes = {**base, "gen_ai.operation.name": "invoke_agent"}
            attributes["ostinato.turn.kind"] = scope.turn_kind
            if scope.owner is not None:
                attributes["ostinato.owner"] = scope.owner
            return "invoke_agent", attributes, ()
        if isinstance(scope, BackgroundScope):
            link = scope.link.handle if scope.link is not None else None
            links = (Link(link.context),) if isinstance(link, Open) else ()
            return scope.name, dict(base), links
        return scope.kind, dict(base), ()

    def _model(self, model: str) -> dict[str, Any]:
        found = self._models.get(model)
        if found is None:
            provider, name = split_model(model)
            found = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider,
                "gen_ai.system": provider,  # the older name, still read by many tools
                "gen_ai.request.model": name,
                "gen_ai.response.model": name,
            }
            self._models[model] = found
        return found

    def described(self, scope: Scope) -> None:
        span = scope.handle
        if not isinstance(span, Open) or not isinstance(scope, TurnScope):
            return
        if scope.agent is not None:
            span.name = f"invoke_agent {scope.agent}"
            span.attributes["gen_ai.agent.name"] = scope.agent
        if scope.model is not None:
            span.attributes["gen_ai.request.model"] = split_model(scope.model)[1]

    # -- ending -----------------------------------------------------------------------

    def ended(self, scope: Scope) -> None:
        if isinstance(scope, CallScope):
            self._call(scope)
            return
        span = scope.handle
        if not isinstance(span, Open):
            return
        attributes = span.attributes
        if isinstance(scope, ToolScope):
            self._tool_ended(attributes, scope)
        elif isinstance(scope, ApprovalScope):
            ending = scope.attributes.get("ending") or scope.error or "unknown"
            attributes["ostinato.approval.tool"] = str(scope.attributes.get("tool"))
            attributes["ostinato.approval.ending"] = str(ending)
            attributes["ostinato.approval.waited_s"] = scope.duration
        elif isinstance(scope, OpScope):
            for key, value in scope.attributes.items():
                if isinstance(value, str | int | float | bool):
                    attributes[f"ostinato.{scope.name}.{key}"] = value
        elif isinstance(scope, TurnScope):
            self.described(scope)
            attributes["ostinato.stop_reason"] = scope.stop_reason or "unknown"
        self._emit(
            span.name,
            span.context,
            span.parent,
            attributes,
            scope.error,
            span.links,
            span.start,
            time.time_ns(),
        )

    def _emit(
        self,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        attributes: dict[str, Any],
        error: str | None,
        links: tuple[Link, ...],
        start: int,
        end: int,
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> None:
        status = OK
        if error is not None:
            attributes["error.type"] = error
            status = Status(StatusCode.ERROR, error)
        span = ReadableSpan(
            name,
            context=context,
            parent=parent,
            resource=self.resource,
            attributes=attributes,
            links=links,
            kind=kind,
            status=status,
            start_time=start,
            end_time=end,
            instrumentation_scope=SCOPE,
        )
        self.processor.on_end(span)

    def _call(self, scope: CallScope) -> None:
        """A model call's span, made whole when the call has ended, with the start and
        end times the call recorded."""
        attributes = _in_step(scope, _base(scope))
        attributes.update(self._model(scope.model))
        attributes["ostinato.purpose"] = scope.purpose
        usage = scope.usage
        if usage is not None and usage.source != "unknown":
            attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
            attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
            attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
        if scope.stop_reason is not None:
            attributes["gen_ai.response.finish_reasons"] = (scope.stop_reason,)
        ttft = scope.time_to_first_token
        if ttft is not None:
            attributes["gen_ai.response.time_to_first_chunk"] = ttft
        if scope.retries:
            attributes["ostinato.retries"] = len(scope.retries)
            attributes["ostinato.retry_causes"] = tuple(scope.retries)
        if self.capture_content:
            self._content(scope, attributes)
        parent = _parent_context(scope)
        name = f"chat {split_model(scope.model)[1]}"
        start, end = self._ns(scope.started), self._ns(scope.ended or scope.started)
        context = self._context(parent)
        self._emit(name, context, parent, attributes, scope.error, (), start, end, SpanKind.CLIENT)

    def _content(self, scope: CallScope, attributes: dict[str, Any]) -> None:
        if scope.request is not None:
            messages = [message_to_json(m) for m in scope.request.messages]
            attributes["gen_ai.system_instructions"] = scope.request.system
            attributes["gen_ai.input.messages"] = _dumps(messages)
        if scope.reply is not None:
            attributes["gen_ai.output.messages"] = _dumps(message_to_json(scope.reply))

    def _ns(self, perf: float) -> int:
        """A ``time.perf_counter`` reading as the wall clock's nanoseconds."""
        return self._epoch + int(perf * 1e9)

    def _tool_ended(self, attributes: dict[str, Any], scope: ToolScope) -> None:
        attributes["ostinato.tool.status"] = scope.status or scope.error or "unknown"
        if scope.approval is not None:
            attributes["ostinato.approval.ending"] = scope.approval
        if scope.waited is not None:
            attributes["ostinato.approval.waited_s"] = scope.waited
        if self.capture_content and scope.result is not None:
            attributes["gen_ai.tool.call.result"] = scope.result

    def first_token(self, scope: CallScope) -> None:
        """Nothing per chunk: the time to the first one is set when the call ends."""

    def shutdown(self) -> None:
        self.processor.shutdown()


def _base(scope: Scope) -> dict[str, Any]:
    """The attributes every span of a holder's work carries, computed once a holder: the
    conversation and run of the outermost turn (a sub-agent's spans name the person's
    conversation, and their own as ``ostinato.subagent.conversation_id``)."""
    holder = scope if isinstance(scope, Holder) else scope.holder()
    if holder is None:
        return {}
    if holder.tags is None:
        top, above = holder, holder.holder()
        while above is not None:
            top, above = above, above.holder()
        holder.tags = {
            "gen_ai.conversation.id": top.conversation_id,
            "ostinato.run_id": top.run_id,
            "ostinato.turn_id": holder.turn_id,
        }
        if top is not holder:
            holder.tags["ostinato.subagent.conversation_id"] = holder.conversation_id
    return holder.tags


def _parent_context(scope: Scope) -> SpanContext | None:
    node = scope.parent
    while node is not None:
        if isinstance(node.handle, Open):
            return node.handle.context
        node = node.parent
    return None


def _in_step(scope: Scope, base: dict[str, Any]) -> dict[str, Any]:
    """``base`` and, for work done in a turn's step, the step's number."""
    attributes = dict(base)
    turn = scope.parent
    if isinstance(turn, TurnScope) and turn.step is not None:
        attributes["ostinato.step"] = turn.step.index
    return attributes


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
