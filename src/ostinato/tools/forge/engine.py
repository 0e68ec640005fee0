"""One run of a forged tool's code in QuickJS (the quickjs-ng engine), inside a worker.

This module runs in the sandbox's worker process (``worker.py``), never in the server:
the engine's CPU limit reads the process's CPU clock, which is the code's own only in a
process that runs nothing else. It imports nothing but the standard library and the
engine, so a worker starts in a few milliseconds; limits come as a plain dict (the
fields of ``limits.Limits``) and failures as ``RunFailed``.

A run: a fresh context (nothing survives from one run to the next) with the memory and
stack limits set; a prelude that installs ``fetch`` when the run may use the network;
the code evaluated as one function expression; the function called with the arguments
object; then the job loop: run every pending promise job, and while the function's
promise has not settled, hand the requests the code has made to the host (the server,
which fetches them through its SSRF-safe fetcher) and settle them with what it answers.
The CPU budget spans the whole run: each time the engine is entered it gets what is
left. The context has what ECMAScript defines and nothing of the host: no file system,
no processes, no modules (``import`` finds nothing), no environment, no timers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import _quickjs


class RunFailed(Exception):
    """The code threw, or passed a limit (``limit``: cpu, memory, stack, output, error)."""

    def __init__(self, message: str, limit: str = "error") -> None:
        super().__init__(message)
        self.message = message
        self.limit = limit


Host = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
"""Takes the requests the code made (``id``, ``url``, ``method``) and returns one answer
each: ``{"id", "ok": true, "response": {...}}`` or ``{"id", "ok": false, "error"}``."""

ERROR_TEXT = 2_000  # characters of an exception's message passed on

# The prelude runs before the code. Its names are non-writable properties, so the code
# cannot swap them (it could only break its own run). ``fetch`` exists only when the run
# may reach the network: it queues a request and returns a promise that the host settles
# once the engine has run out of jobs. No Python function is reachable from the code.
_PRELUDE = r"""
((network) => {
  const queue = [];
  const waiting = new Map();
  let next = 1;
  let outcome = null;
  const fix = (name, value) => Object.defineProperty(globalThis, name, {value});
  const describe = (e) => (e instanceof Error ? `${e.name}: ${e.message}` : String(e));
  if (network) {
    fix("fetch", (url, options) => new Promise((resolve, reject) => {
      const id = next++;
      waiting.set(id, {resolve, reject});
      const method = String((options && options.method) || "GET").toUpperCase();
      queue.push({id, url: String(url), method});
    }));
  }
  fix("__ostinato_requests", () => JSON.stringify(queue.splice(0)));
  fix("__ostinato_settle", (id, ok, payload) => {
    const entry = waiting.get(id);
    if (!entry) return;
    waiting.delete(id);
    if (!ok) { entry.reject(new Error(payload)); return; }
    const response = Object.assign({}, payload);
    response.json = () => JSON.parse(response.text);
    entry.resolve(response);
  });
  fix("__ostinato_start", (fn, args) => {
    Promise.resolve().then(() => fn(args)).then(
      (value) => {
        try {
          outcome = {ok: true, json: JSON.stringify(value === undefined ? null : value)};
          if (outcome.json === undefined) outcome.json = "null";
        } catch (e) {
          outcome = {ok: false, error: `the result is not JSON: ${describe(e)}`};
        }
      },
      (e) => { outcome = {ok: false, error: describe(e)}; });
  });
  fix("__ostinato_outcome", () => outcome);
  fix("__ostinato_kind", (value) => typeof value);
})(NETWORK);
"""


class _Budget:
    """The CPU time a run has left, handed to the engine each time it is entered."""

    def __init__(self, context: Any, seconds: float) -> None:
        self.context = context
        self.seconds = seconds
        self.start = time.process_time()

    def enter(self) -> None:
        left = self.seconds - (time.process_time() - self.start)
        if left <= 0:
            raise RunFailed(_CPU_MESSAGE.format(self.seconds), "cpu")
        self.context.set_time_limit(left)


_CPU_MESSAGE = "the code used its {:g} s of CPU time and was stopped"


def _classify(exc: Exception, limits: dict[str, Any]) -> RunFailed:
    """The engine's exception as a ``RunFailed`` naming the limit, if one was hit."""
    stack = isinstance(exc, _quickjs.StackOverflow)
    return _error(str(exc).strip() or type(exc).__name__, limits, stack=stack)


def _error(text: str, limits: dict[str, Any], *, stack: bool = False) -> RunFailed:
    """An error's text (an engine exception, or what the function's promise rejected
    with) as a ``RunFailed``: a limit when it names one, else the code's own error."""
    first = text.splitlines()[0] if text else ""
    if first.startswith("InternalError: interrupted"):
        return RunFailed(_CPU_MESSAGE.format(limits["cpu_s"]), "cpu")
    if first.startswith("InternalError: out of memory"):
        mib = limits["memory_bytes"] / (1024 * 1024)
        return RunFailed(f"the code ran out of its {mib:g} MiB of memory", "memory")
    if stack or first.startswith("RangeError: Maximum call stack size"):
        return RunFailed("the code recursed too deeply (stack limit)", "stack")
    if first.startswith(_NOT_JSON):
        return RunFailed(text[:ERROR_TEXT], "error")
    return RunFailed(f"the code threw: {text[:ERROR_TEXT]}", "error")


_NOT_JSON = "the result is not JSON"


def run(code: str, args_json: str, limits: dict[str, Any], host: Host, *, network: bool) -> str:
    """Run ``code`` (one function expression) on the arguments; returns the JSON text of
    its result. ``RunFailed`` when the code throws or passes a limit."""
    context = _quickjs.Context()
    context.set_memory_limit(limits["memory_bytes"])
    context.set_max_stack_size(limits["stack_bytes"])
    budget = _Budget(context, limits["cpu_s"])
    try:
        budget.enter()
        context.eval(_PRELUDE.replace("NETWORK", "true" if network else "false"))
        budget.enter()
        function = context.eval(f"(\n{code}\n)")
        if context.get("__ostinato_kind")(function) != "function":
            raise RunFailed("the code must be one JavaScript function expression", "error")
        start = context.get("__ostinato_start")
        budget.enter()
        start(function, context.parse_json(args_json))
        return _drive(context, budget, limits, host)
    except RunFailed:
        raise
    except Exception as exc:  # the engine's errors: limits, the code's own exceptions
        raise _classify(exc, limits) from None


def _drive(context: Any, budget: _Budget, limits: dict[str, Any], host: Host) -> str:
    """Run jobs until the function's promise settles, serving its requests meanwhile."""
    outcome_of = context.get("__ostinato_outcome")
    settle = context.get("__ostinato_settle")
    take_requests = context.get("__ostinato_requests")
    made = 0
    while True:
        budget.enter()
        while context.execute_pending_job():
            budget.enter()
        outcome = outcome_of()
        if isinstance(outcome, _quickjs.Object):
            return _result(json.loads(outcome.json()), limits)
        batch: list[dict[str, Any]] = json.loads(take_requests())
        if not batch:
            raise RunFailed("the function's promise never settles", "error")
        allowed = batch[: max(0, limits["fetches"] - made)]
        made += len(batch)
        answers = host(allowed) if allowed else []
        over = [
            {"id": r.get("id"), "ok": False, "error": f"at most {limits['fetches']} requests a run"}
            for r in batch[len(allowed) :]
        ]
        for answer in [*answers, *over]:
            payload = answer.get("response") if answer.get("ok") else answer.get("error", "")
            budget.enter()
            settle(
                answer.get("id"), bool(answer.get("ok")), context.parse_json(json.dumps(payload))
            )


def _result(outcome: dict[str, Any], limits: dict[str, Any]) -> str:
    if not outcome.get("ok"):
        raise _error(str(outcome.get("error")), limits)
    text = str(outcome.get("json"))
    if len(text.encode("utf-8", "replace")) > limits["output_bytes"]:
        raise RunFailed(
            f"the result is over {limits['output_bytes']:,} bytes of JSON; return less", "output"
        )
    return text
