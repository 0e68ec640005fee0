// A turn's timeline, on demand: its steps, and in each step every model call and tool
// call with its start offset from the turn's start and its duration, drawn as a bar on
// the turn's time line (`GET /v1/conversations/{id}/turns/{turn_id}`, written when the
// turn ends). Read when the person asks for it, never before.
import { useEffect, useState } from "preact/hooks";
import { api } from "./api";
import { seconds } from "./hooks";
import type { ModelCallTiming, TimedCall, ToolCallTiming, TurnTimeline } from "./types";

function Bar({ call, total }: { call: TimedCall; total: number }) {
  const left = total > 0 ? Math.min(100, (call.start_s / total) * 100) : 0;
  const width = total > 0 ? Math.max(0.5, ((call.duration_s ?? 0) / total) * 100) : 100;
  // CSSOM (an object), not a style attribute: the page's CSP allows no inline styles
  return (
    <span class="tt-track" aria-hidden="true">
      <span class="tt-bar" style={{ left: `${left}%`, width: `${Math.min(width, 100 - left)}%` }} />
    </span>
  );
}

function When({ call }: { call: TimedCall }) {
  return (
    <>
      <span class="tt-at">+{seconds(call.start_s) || "0 ms"}</span>
      <span class="tt-dur">{call.duration_s === null ? "not ended" : seconds(call.duration_s)}</span>
    </>
  );
}

function ModelLine({ call, total }: { call: ModelCallTiming; total: number }) {
  const ttft = call.time_to_first_token_s;
  return (
    <li class="tt-call tt-model">
      <span class="tt-kind">model</span>
      <span class="tt-name">{call.purpose}</span>
      <span class="tt-what">
        {call.model} · {call.tokens_in} in / {call.tokens_out} out
        {ttft !== null ? ` · first token ${seconds(ttft)}` : ""}
        {call.agent ? ` · ${call.agent}` : ""}
        {call.error ? ` · failed: ${call.error}` : ""}
        {call.retries.length ? ` · retried: ${call.retries.join(", ")}` : ""}
      </span>
      <When call={call} />
      <Bar call={call} total={total} />
    </li>
  );
}

function ToolLine({ call, total }: { call: ToolCallTiming; total: number }) {
  return (
    <li class="tt-call tt-tool" data-tool={call.name}>
      <span class="tt-kind">tool</span>
      <span class="tt-name">{call.name}</span>
      <span class="tt-what">
        {call.status ?? "?"}
        {call.approval ? ` · ${call.approval.toLowerCase()} after ${seconds(call.approval_wait_s)}` : ""}
        {call.agent ? ` · ${call.agent}` : ""}
      </span>
      <When call={call} />
      <Bar call={call} total={total} />
    </li>
  );
}

function Timeline({ turn }: { turn: TurnTimeline }) {
  if (turn.steps === null) {
    return <p class="note">{turn.status === "running" ? "The timeline is written when the turn ends." : "This turn has no timeline (it was closed after a server stop, or ran while timelines were off)."}</p>;
  }
  const total = turn.duration_s ?? 0;
  return (
    <>
      <p class="tt-head">
        {turn.stop_reason ?? turn.status} in {seconds(total)} · {turn.steps.length} step{turn.steps.length === 1 ? "" : "s"}
      </p>
      <ol class="tt-steps">
        {turn.steps.map((step) => (
          <li key={step.index} class="tt-step" data-step={step.index}>
            <div class="tt-call tt-steprow">
              <span class="tt-kind">step</span>
              <span class="tt-name">{step.index}</span>
              <span class="tt-what" />
              <When call={{ ...step, agent: null, under: null }} />
              <Bar call={{ ...step, agent: null, under: null }} total={total} />
            </div>
            <ol class="tt-calls">
              {step.model_calls.map((c, i) => (
                <ModelLine key={`m${i}`} call={c} total={total} />
              ))}
              {step.tool_calls.map((c) => (
                <ToolLine key={c.id} call={c} total={total} />
              ))}
            </ol>
          </li>
        ))}
      </ol>
      {turn.after_turn.length > 0 && (
        <>
          <p class="tt-head">After the turn</p>
          <ol class="tt-calls">
            {turn.after_turn.map((c, i) => (
              <ModelLine key={`a${i}`} call={c} total={Math.max(total, c.start_s + (c.duration_s ?? 0))} />
            ))}
          </ol>
        </>
      )}
    </>
  );
}

/** The timeline of one turn, read from the server when it is shown. */
export function TurnView({ conversationId, turnId }: { conversationId: string; turnId: string }) {
  const [turn, setTurn] = useState<TurnTimeline | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let gone = false;
    api.turn(conversationId, turnId).then(
      (t) => !gone && setTurn(t),
      (e) => !gone && setError(`Could not read the timeline: ${e instanceof Error ? e.message : String(e)}`),
    );
    return () => {
      gone = true;
    };
  }, [conversationId, turnId]);
  return (
    <section class="turn-timeline" aria-label="Turn timeline">
      {error ? <p class="card-error" role="alert">{error}</p> : turn ? <Timeline turn={turn} /> : <p class="note">Reading the timeline…</p>}
    </section>
  );
}
