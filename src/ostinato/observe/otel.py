"""OpenTelemetry traces: each observed scope as a span, named and described by the GenAI
semantic conventions (``gen_ai.*`` attributes: operation, provider, request and response
model, token usage, finish reasons, time to the first chunk; tool name and call id).

Spans nest as the scopes do: a turn (``invoke_agent``) holds its model calls (``chat``,
each with its step's number as ``ostinato.step``), tool calls (``execute_tool``),
routing, compaction and approval waits; a sub-agent's turn nests in the tool call that
ran it; background work is a trace of its own linked to its turn. Every span carries
the conversation id (``gen_ai.conversation.id``), ``ostinato.run_id`` and
``ostinato.turn_id`` (a sub-agent's: its parent's conversation and run, its own turn). Prompts,
replies and tool arguments go on spans only with ``capture_content``.

This module imports the OpenTelemetry SDK; ``observe.setup`` imports it only when traces
are asked for. The per-step work is kept small (bench/step_overhead.py --observe): each
holder's shared attributes are computed once, a model's once; a model call's span is made
whole when it ends (one attribute pass, its recorded start and end times); no span per
step or per streamed delta.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer

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

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

SCOPE_NAME = "ostinato"


def split_model(model: str) -> tuple[str, str]:
    """``provider:model`` as (provider, model); an id with no provider is its own."""
    provider, sep, name = model.partition(":")
    return (provider, name) if sep else ("unknown", model)


class OtelBackend(Backend):
    """Spans for the observed work, made by ``provider``'s tracer."""

    def __init__(self, provider: TracerProvider, *, capture_content: bool = False) -> None:
        self.provider = provider
        self.tracer: Tracer = provider.get_tracer(SCOPE_NAME)
        self.capture_content = capture_content
        self._models: dict[str, dict[str, Any]] = {}
        self._epoch = time.time_ns() - int(time.perf_counter() * 1e9)

    # -- starting ---------------------------------------------------------------------

    def started(self, scope: Scope) -> None:
        if isinstance(scope, StepScope | CallScope):
            return  # a step is an attribute of its calls; a model call's span is made at its end
        name, attributes, links = self._describe(scope)
        parent = _parent_span(scope)
        context = trace.set_span_in_context(parent) if parent is not None else None
        span = self.tracer.start_span(name, context=context, attributes=attributes, links=links)
        scope.handle = span

    def _describe(self, scope: Scope) -> tuple[str, dict[str, Any], list[Link] | None]:
        base = _base(scope)
        if isinstance(scope, ToolScope):
            attributes = _in_step(scope, base)
            attributes["gen_ai.operation.name"] = "execute_tool"
            attributes["gen_ai.tool.name"] = scope.name
            attributes["gen_ai.tool.call.id"] = scope.call_id
            if self.capture_content:
                attributes["gen_ai.tool.call.arguments"] = _dumps(scope.arguments)
            return f"execute_tool {scope.name}", attributes, None
        if isinstance(scope, OpScope):
            return scope.name, base, None
        if isinstance(scope, TurnScope):
            attributes = {**base, "gen_ai.operation.name": "invoke_agent"}
            attributes["ostinato.turn.kind"] = scope.turn_kind
            if scope.owner is not None:
                attributes["ostinato.owner"] = scope.owner
            return "invoke_agent", attributes, None
        if isinstance(scope, BackgroundScope):
            link = scope.link.handle if scope.link is not None else None
            links = [Link(link.get_span_context())] if isinstance(link, Span) else None
            return scope.name, dict(base), links
        return scope.kind, dict(base), None

    def _model(self, model: str) -> dict[str, Any]:
        found = self._models.get(model)
        if found is None:
            provider, name = split_model(model)
            found = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider,
                "gen_ai.system": provider,  # the older name, still read by many tools
                "gen_ai.request.model": name,
            }
            self._models[model] = found
        return found

    def described(self, scope: Scope) -> None:
        span = scope.handle
        if not isinstance(span, Span) or not isinstance(scope, TurnScope):
            return
        if scope.agent is not None:
            span.update_name(f"invoke_agent {scope.agent}")
            span.set_attribute("gen_ai.agent.name", scope.agent)
        if scope.model is not None:
            span.set_attribute("gen_ai.request.model", split_model(scope.model)[1])

    # -- ending -----------------------------------------------------------------------

    def ended(self, scope: Scope) -> None:
        if isinstance(scope, CallScope):
            self._call(scope)
            return
        span = scope.handle
        if not isinstance(span, Span):
            return
        if isinstance(scope, ToolScope):
            self._tool_ended(span, scope)
        elif isinstance(scope, ApprovalScope):
            ending = scope.attributes.get("ending") or scope.error or "unknown"
            span.set_attribute("ostinato.approval.tool", str(scope.attributes.get("tool")))
            span.set_attribute("ostinato.approval.ending", str(ending))
            span.set_attribute("ostinato.approval.waited_s", scope.duration)
        elif isinstance(scope, OpScope):
            for key, value in scope.attributes.items():
                if isinstance(value, str | int | float | bool):
                    span.set_attribute(f"ostinato.{scope.name}.{key}", value)
        elif isinstance(scope, TurnScope):
            self.described(scope)  # a turn that ended before it was described keeps its name
            span.set_attribute("ostinato.stop_reason", scope.stop_reason or "unknown")
        if scope.error is not None:
            span.set_attribute("error.type", scope.error)
            span.set_status(Status(StatusCode.ERROR, scope.error))
        span.end()

    def _call(self, scope: CallScope) -> None:
        """A model call's span, made whole when the call has ended: its attributes are
        set in one go, with the start and end times the call recorded."""
        model = split_model(scope.model)[1]
        attributes = _in_step(scope, _base(scope))
        attributes.update(self._model(scope.model))
        attributes["ostinato.purpose"] = scope.purpose
        attributes["gen_ai.response.model"] = model
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
        if scope.error is not None:
            attributes["error.type"] = scope.error
        if self.capture_content:
            self._content(scope, attributes)
        parent = _parent_span(scope)
        span = self.tracer.start_span(
            f"chat {model}",
            context=trace.set_span_in_context(parent) if parent is not None else None,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=self._ns(scope.started),
        )
        if scope.error is not None:
            span.set_status(Status(StatusCode.ERROR, scope.error))
        span.end(end_time=self._ns(scope.ended or scope.started))

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

    def _tool_ended(self, span: Span, scope: ToolScope) -> None:
        span.set_attribute("ostinato.tool.status", scope.status or scope.error or "unknown")
        if scope.approval is not None:
            span.set_attribute("ostinato.approval.ending", scope.approval)
        if scope.waited is not None:
            span.set_attribute("ostinato.approval.waited_s", scope.waited)
        if self.capture_content and scope.result is not None:
            span.set_attribute("gen_ai.tool.call.result", scope.result)

    def first_token(self, scope: CallScope) -> None:
        """Nothing per chunk: the time to the first one is set when the call ends."""

    def shutdown(self) -> None:
        self.provider.shutdown()


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


def _parent_span(scope: Scope) -> Span | None:
    node = scope.parent
    while node is not None:
        if isinstance(node.handle, Span):
            return node.handle
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
