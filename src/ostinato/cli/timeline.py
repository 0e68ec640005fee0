"""``ostinato replay CONVERSATION_ID --timeline``: each stored turn's timeline, printed.

Nothing is re-run: the turns' timelines are read from the store (``GET
/v1/conversations/{id}/turns/{turn_id}`` serves the same), one line per step, model call
and tool call, each with its start offset from the turn's start and its duration::

    turn 1 (01JF…, user): end_turn in 2.310 s, 3 model calls, 300 in / 33 out, $0.0011
      step 0 +  0.000 s   0.190 s
        model  router      openai:gpt-4.1-mini          +  0.001 s   0.188 s  ttft 0.150 s  20/1
      step 1 +  0.190 s   1.802 s
        model  step        openai:gpt-4.1               +  0.191 s   0.900 s  ttft 0.310 s  120/12
        tool   clock       ok                           +  1.092 s   0.003 s
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any, TextIO

from ostinato.store import open_store
from ostinato.store.base import Turn


def _seconds(value: float | None) -> str:
    return f"{value:7.3f} s" if value is not None else "      ? s"


def _call_line(call: dict[str, Any]) -> str:
    ttft = call.get("time_to_first_token_s")
    who = f"  [{call['agent']} under {call['under']}]" if call.get("agent") else ""
    failed = f"  failed: {call['error']}" if call.get("error") else ""
    retried = f"  retries: {', '.join(call['retries'])}" if call.get("retries") else ""
    return (
        f"    model  {call['purpose']:<11} {call['model']:<28} +{_seconds(call['start_s'])}"
        f" {_seconds(call['duration_s'])}"
        + (f"  ttft {ttft:.3f} s" if ttft is not None else "")
        + f"  {call['tokens_in']}/{call['tokens_out']}{who}{failed}{retried}"
    )


def _tool_line(call: dict[str, Any]) -> str:
    approval = (
        f"  approval {call['approval']} after {call['approval_wait_s']:.3f} s"
        if call.get("approval")
        else ""
    )
    who = f"  [{call['agent']}]" if call.get("agent") else ""
    return (
        f"    tool   {call['name']:<11} {call['status'] or '?':<28} +{_seconds(call['start_s'])}"
        f" {_seconds(call['duration_s'])}{approval}{who}"
    )


def turn_lines(number: int, turn: Turn) -> Iterator[str]:
    metrics, timeline = turn.metrics, turn.timeline
    cost = metrics.get("cost_usd")
    route = metrics.get("route") or {}
    version = route.get("version")
    agent = (
        f", {route['skill']}" + (f" v{version}" if version else "") if route.get("skill") else ""
    )
    head = (
        f"turn {number} ({turn.id}, {turn.kind}{agent}): {turn.stop_reason or turn.status}"
        + (f" in {timeline['duration_s']:.3f} s" if timeline else "")
        + f", {metrics.get('model_calls', 0)} model calls,"
        f" {metrics.get('tokens_in', 0)} in / {metrics.get('tokens_out', 0)} out"
        + (f", ${cost:.4f}" if cost is not None else "")
    )
    yield head
    if timeline is None:
        yield "  no timeline (the turn is running, closed after a crash, or timelines were off)"
        return
    for step in timeline["steps"]:
        yield f"  step {step['index']} +{_seconds(step['start_s'])} {_seconds(step['duration_s'])}"
        for entry in sorted(
            [*step["model_calls"], *step["tool_calls"]], key=lambda e: e["start_s"]
        ):
            yield _call_line(entry) if "purpose" in entry else _tool_line(entry)
    if timeline.get("after_turn"):
        yield "  after the turn"
        for call in timeline["after_turn"]:
            yield _call_line(call)


async def print_timelines(
    conversation_id: str, database_url: str | None, *, out: TextIO | None = None
) -> int:
    """The ``--timeline`` command: 0, or 2 when the store or the conversation is missing."""
    try:
        store = await open_store(database_url)
    except ValueError as exc:
        print(f"ostinato replay: {exc}", file=sys.stderr)
        return 2
    try:
        if await store.get_conversation(conversation_id) is None:
            print(f"ostinato replay: no conversation with id {conversation_id!r}", file=sys.stderr)
            return 2
        turns = await store.list_turns(conversation_id)
    finally:
        await store.close()
    out = out or sys.stdout
    print(f"timeline of conversation {conversation_id}", file=out)
    for number, turn in enumerate(turns, 1):
        for line in turn_lines(number, turn):
            print(line, file=out)
    if not turns:
        print("no turns", file=out)
    return 0
