"""OpenTelemetry traces: each observed scope as a span, named and described by the GenAI
semantic conventions (``gen_ai.*`` attributes: operation, provider, request and response
model, token usage, finish reasons, time to the first chunk; tool name and call id).

Spans nest as the scopes do: a turn (``invoke_agent``) holds its model calls (``chat``,
each with its step's number as ``ostinato.step``), tool calls (``execute_tool``),
routing, compaction and approval waits; a sub-agent's turn nests in the tool call that
ran it; background work is a trace of its own linked to its turn, and a job (a
schedule's firing) a trace of its own linked to the turns it started. Every span carries
the conversation id (``gen_ai.conversation.id``), ``ostinato.run_id`` and
``ostinato.turn_id`` (a sub-agent's: its parent's conversation and run, its own turn).
A turn that nests in nothing is the root of a trace whose id is its run id's
(``turn_trace``), so a run id finds its trace. Prompts, replies and tool arguments go on
spans only with ``capture_content``.

The spans are the SDK's finished spans (``ReadableSpan``) handed to a span processor (a
batch one to the OTLP exporter, in ``observe.setup``) when their work ends. They skip
the SDK's live ``Span`` (its locks, per-attribute checks and sampler: every span is
recorded) and are made in one step (``FastSpan``, its context without the API's checks:
``span_context``); a span's attributes are a copy of a dict its holder's spans share
(``Shared``) and its own keys. No span per step or per streamed delta; a model call's
span is made when the call has ended. This module imports the OpenTelemetry SDK;
``observe.setup`` imports it only when traces are asked for.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from random import getrandbits
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import DEFAULT_TRACE_STATE

from ostinato.messages import message_to_json
from ostinato.observe.backend import Backend
from ostinato.observe.scopes import (
    ApprovalScope,
    BackgroundScope,
    CallScope,
    Holder,
    JobScope,
    OpScope,
    Scope,
    ToolScope,
    TurnScope,
)

SCOPE = InstrumentationScope("ostinato")
SAMPLED = TraceFlags(TraceFlags.SAMPLED)
OK = Status(StatusCode.UNSET)
SPAN_BITS = (1 << 64) - 1


def split_model(model: str) -> tuple[str, str]:
    """``provider:model`` as (provider, model); an id with no provider is its own."""
    provider, sep, name = model.partition(":")
    return (provider, name) if sep else ("unknown", model)


_new = tuple.__new__


def span_context(trace_id: int, span_id: int) -> SpanContext:
    """``SpanContext(trace_id, span_id, False, SAMPLED)`` for ids known to be valid
    (non-zero, in range), made as the tuple it is without its checks (the API declares
    its layout; ``tests/observe/test_traces.py`` compares the two)."""
    return _new(SpanContext, (trace_id, span_id, False, SAMPLED, DEFAULT_TRACE_STATE, True))


def turn_trace(turn_id: str, run_id: str) -> SpanContext:
    """The span context of a turn that nests in nothing: its trace id is its run id read
    as hex (``ids.new_id``: 27 hex digits; the trace id shows it zero-padded), its span id
    its turn id's last 16 hex digits; an id that is not hex is hashed."""
    return span_context(_id(run_id, 16), _id(turn_id, 8))


def _id(text: str, size: int) -> int:
    try:
        value = int(text, 16) & ((1 << (size * 8)) - 1)
    except ValueError:
        value = 0
    if not value:
        value = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=size).digest())
    return value


class FastSpan(ReadableSpan):
    """A finished span as the SDK's processors and exporters read it, made with only the
    fields that differ from span to span: what ``ReadableSpan.__init__`` sets alike for
    all of ours (no events, links, kind, status) is held by the class. Its work's end
    sets ``_end_time`` (and an error's ``_status``) before it goes to the processor.
    ``tests/observe/test_traces.py`` checks it has every field the SDK's own sets."""

    _attributes: dict[str, Any]
    _events: Sequence[Event] = ()
    _links: Sequence[Link] = ()
    _kind = SpanKind.INTERNAL
    _status = OK
    _instrumentation_info = None
    _instrumentation_scope = SCOPE
    _end_time: int | None = None

    def __init__(  # the SDK's __init__ is skipped on purpose: its fields are set here
        self,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        attributes: dict[str, Any],
        start: int,
        resource: Resource,
    ) -> None:
        self._name, self._context, self._parent = name, context, parent
        self._attributes, self._start_time, self._resource = attributes, start, resource


class ClientSpan(FastSpan):
    """A model call's span (kind ``CLIENT``)."""

    _kind = SpanKind.CLIENT


class OtelBackend(Backend):
    """Spans for the observed work, handed to ``processor`` as each ends."""

    starts = frozenset({"turn", "tool_call", "operation", "background", "job"})

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
        self._models: dict[str, tuple[str, dict[str, Any]]] = {}
        self._epoch = time.time_ns() - int(time.perf_counter() * 1e9)

    def _context(self, parent: SpanContext | None) -> SpanContext:
        """A new span's context: in its parent's trace (``parent[0]``), or a new one; its
        span id made as the SDK's are (``span_context`` inlined: this runs per span)."""
        trace_id = parent[0] if parent is not None else self.ids.generate_trace_id()
        span_id = getrandbits(64) or 1
        return _new(SpanContext, (trace_id, span_id, False, SAMPLED, DEFAULT_TRACE_STATE, True))

    def _span(self, scope: Scope, name: str, attributes: dict[str, Any]) -> FastSpan:
        parent = _parent_context(scope)
        start = self._epoch + int(scope.started * 1e9)
        return FastSpan(name, self._context(parent), parent, attributes, start, self.resource)

    # -- starting ---------------------------------------------------------------------

    def started(self, scope: Scope) -> None:
        if isinstance(scope, ToolScope):
            attributes = _in_step(_shared(scope).tools.copy(), scope)  # copy, add: cheapest
            attributes["gen_ai.tool.name"] = scope.name
            attributes["gen_ai.tool.call.id"] = scope.call_id
            if self.capture_content:
                attributes["gen_ai.tool.call.arguments"] = _dumps(scope.arguments)
            scope.handle = self._span(scope, f"execute_tool {scope.name}", attributes)
        elif isinstance(scope, OpScope):
            scope.handle = self._span(scope, scope.name, dict(_base(scope)))
        elif isinstance(scope, TurnScope):
            self._turn_started(scope)
        elif isinstance(scope, BackgroundScope):
            span = self._span(scope, scope.name, dict(_base(scope)))
            link = scope.link.handle if scope.link is not None else None
            if isinstance(link, FastSpan):
                span._links = (Link(link.context),)
            scope.handle = span
        elif isinstance(scope, JobScope):
            tags = dict(_base(scope))
            if scope.owner is not None:
                tags["ostinato.owner"] = scope.owner
            scope.handle = self._span(scope, scope.name, tags)

    def _turn_started(self, scope: TurnScope) -> None:
        attributes = {
            **_base(scope),
            "gen_ai.operation.name": "invoke_agent",
            "ostinato.turn.kind": scope.turn_kind,
        }
        if scope.owner is not None:
            attributes["ostinato.owner"] = scope.owner
        parent = _parent_context(scope)
        context = (
            self._context(parent) if parent is not None else turn_trace(scope.turn_id, scope.run_id)
        )
        start = self._epoch + int(scope.started * 1e9)
        scope.handle = FastSpan("invoke_agent", context, parent, attributes, start, self.resource)

    def _model(self, model: str) -> tuple[str, dict[str, Any]]:
        """A model's span name and the attributes every call of it carries."""
        found = self._models.get(model)
        if found is None:
            provider, name = split_model(model)
            found = self._models[model] = (
                f"chat {name}",
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": provider,
                    "gen_ai.system": provider,  # the older name, still read by many tools
                    "gen_ai.request.model": name,
                    "gen_ai.response.model": name,
                },
            )
        return found

    def described(self, scope: Scope) -> None:
        span = scope.handle
        if not isinstance(span, FastSpan) or not isinstance(scope, TurnScope):
            return
        if scope.agent is not None:
            span._name = f"invoke_agent {scope.agent}"
            span._attributes["gen_ai.agent.name"] = scope.agent
        if scope.version is not None:
            span._attributes["ostinato.agent.version"] = scope.version
        if scope.model is not None:
            span._attributes["gen_ai.request.model"] = split_model(scope.model)[1]

    # -- ending -----------------------------------------------------------------------

    def ended(self, scope: Scope) -> None:
        if isinstance(scope, CallScope):
            self._call(scope)
            return
        span = scope.handle
        if not isinstance(span, FastSpan):
            return
        attributes = span._attributes
        if isinstance(scope, ToolScope):
            attributes["ostinato.tool.status"] = scope.status or scope.error or "unknown"
            if scope.approval is not None:
                attributes["ostinato.approval.ending"] = scope.approval
            if scope.waited is not None:
                attributes["ostinato.approval.waited_s"] = scope.waited
            if self.capture_content and scope.result is not None:
                attributes["gen_ai.tool.call.result"] = scope.result
        elif isinstance(scope, ApprovalScope):
            ending = scope.attributes.get("ending") or scope.error or "unknown"
            attributes["ostinato.approval.tool"] = str(scope.attributes.get("tool"))
            attributes["ostinato.approval.ending"] = str(ending)
            attributes["ostinato.approval.waited_s"] = scope.duration
        elif isinstance(scope, OpScope | JobScope):
            _described(attributes, scope.name, scope.attributes)
            if isinstance(scope, JobScope) and scope.turns:
                span._links = tuple(Link(turn_trace(t, r)) for t, r in scope.turns)
                attributes["ostinato.run_ids"] = tuple(r for _, r in scope.turns)
        elif isinstance(scope, TurnScope):
            self.described(scope)
            attributes["ostinato.stop_reason"] = scope.stop_reason or "unknown"
        self._end(span, scope)

    def _end(self, span: FastSpan, scope: Scope) -> None:
        span._end_time = self._epoch + int((scope.ended or scope.started) * 1e9)
        error = scope.error
        if error is not None:
            span._attributes["error.type"] = error
            span._status = Status(StatusCode.ERROR, error)
        self.processor.on_end(span)

    def _call(self, scope: CallScope) -> None:
        """A model call's span, made whole when the call has ended, with the start and
        end times the call recorded."""
        name, fixed = self._model(scope.model)
        shared = _shared(scope)
        base = shared.calls.get(scope.model)
        if base is None:
            base = shared.calls[scope.model] = {**shared.tags, **fixed}
        attributes = _in_step(base.copy(), scope)
        attributes["ostinato.purpose"] = scope.purpose
        usage = scope.usage
        if usage is not None and usage.source != "unknown":
            attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
            attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
            attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
        if scope.stop_reason is not None:
            attributes["gen_ai.response.finish_reasons"] = _reasons(scope.stop_reason)
        if scope.first is not None:
            attributes["gen_ai.response.time_to_first_chunk"] = scope.first - scope.started
        if scope.retries:
            attributes["ostinato.retries"] = len(scope.retries)
            attributes["ostinato.retry_causes"] = tuple(scope.retries)
        if self.capture_content:
            self._content(scope, attributes)
        parent = _parent_context(scope)
        start = self._epoch + int(scope.started * 1e9)
        span = ClientSpan(name, self._context(parent), parent, attributes, start, self.resource)
        self._end(span, scope)

    def _content(self, scope: CallScope, attributes: dict[str, Any]) -> None:
        if scope.request is not None:
            messages = [message_to_json(m) for m in scope.request.messages]
            attributes["gen_ai.system_instructions"] = scope.request.system
            attributes["gen_ai.input.messages"] = _dumps(messages)
        if scope.reply is not None:
            attributes["gen_ai.output.messages"] = _dumps(message_to_json(scope.reply))

    def shutdown(self) -> None:
        self.processor.shutdown()


_REASONS: dict[str, tuple[str]] = {}


def _reasons(stop_reason: str) -> tuple[str]:
    """``(stop_reason,)``, one tuple per reason (the collector stops tracking it)."""
    found = _REASONS.get(stop_reason)
    if found is None:
        found = _REASONS[stop_reason] = (stop_reason,)
    return found


class Shared:
    """What the spans of one holder's work share, made once for the holder (kept in its
    ``tags``): the attributes every one carries (``tags``: the conversation and run of the
    outermost turn; a sub-agent's spans name the person's conversation, and their own as
    ``ostinato.subagent.conversation_id``), and those a tool call's (``tools``) and each
    model's calls' (``calls``) begin with, so a span's attributes are one copy and its
    own keys."""

    __slots__ = ("calls", "tags", "tools")

    def __init__(self, tags: dict[str, Any]) -> None:
        self.tags = tags
        self.tools = {**tags, "gen_ai.operation.name": "execute_tool"}
        self.calls: dict[str, dict[str, Any]] = {}


NO_HOLDER = Shared({})


def _shared(scope: Scope) -> Shared:
    holder = scope if isinstance(scope, Holder) else scope.holder()
    if holder is None:
        return NO_HOLDER
    if holder.tags is None:
        top, above = holder, holder.holder()
        while above is not None:
            top, above = above, above.holder()
        tags = {}
        if top.conversation_id:  # an owner's job is no conversation's
            tags["gen_ai.conversation.id"] = top.conversation_id
        if top.run_id:  # a job is no turn's
            tags["ostinato.run_id"] = top.run_id
            tags["ostinato.turn_id"] = holder.turn_id
        if top is not holder:
            tags["ostinato.subagent.conversation_id"] = holder.conversation_id
        holder.tags = Shared(tags)
    shared: Shared = holder.tags
    return shared


def _base(scope: Scope) -> dict[str, Any]:
    return _shared(scope).tags


def _in_step(attributes: dict[str, Any], scope: Scope) -> dict[str, Any]:
    """``attributes`` with, for work done in a turn's step, the step's number."""
    turn = scope.parent
    if isinstance(turn, TurnScope) and turn.step is not None:
        attributes["ostinato.step"] = turn.step.index
    return attributes


def _parent_context(scope: Scope) -> SpanContext | None:
    node = scope.parent
    while node is not None:
        if isinstance(node.handle, FastSpan):
            return node.handle._context
        node = node.parent
    return None


def _described(attributes: dict[str, Any], name: str, described: dict[str, Any]) -> None:
    for key, value in described.items():
        if isinstance(value, str | int | float | bool):
            attributes[f"ostinato.{name}.{key}"] = value


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
