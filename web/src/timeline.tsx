// The tool timeline: one step per tool call (name, arguments, status, duration, result),
// collapsed by default; a live "still running" line from `tool.progress`; a sub-agent's
// streamed text in its own nested timeline.
import type { Chat, ToolLive } from "./chat";
import { pretty, resultText, seconds } from "./hooks";
import type { ToolUseBlock } from "./types";

const STATUS_LABEL: Record<string, string> = {
  running: "running",
  waiting: "waiting for approval",
  ok: "done",
  error: "failed",
  timeout: "timed out",
  interrupted: "interrupted",
  skipped: "skipped",
  refused: "refused",
  dismissed: "dismissed",
  unknown: "outcome unknown",
};

function status(chat: Chat, call: ToolUseBlock, live: ToolLive | undefined): string {
  const result = chat.results.get(call.id);
  if (live && live.status !== "running" && live.status !== "waiting") return live.status;
  if (result) return result.is_error ? "error" : "ok";
  for (const a of chat.approvals.values()) if (a.tool_use_id === call.id) return "waiting";
  if (live) return live.status;
  return chat.state === "running" ? "running" : "interrupted";
}

const RESULT_PREVIEW = 4000;

export function Step({ chat, call }: { chat: Chat; call: ToolUseBlock }) {
  const live = chat.tools.get(call.id);
  const state = status(chat, call, live);
  const result = chat.results.get(call.id);
  const text = result ? resultText(result.content) : "";
  const agents = live ? [...live.agents] : [];
  return (
    <li class={`step step-${state}`} data-tool={call.name}>
      <details>
        <summary>
          <span class="step-dot" aria-hidden="true" />
          <span class="step-name">{call.name}</span>
          <span class="step-status">{STATUS_LABEL[state] ?? state}</span>
          {live?.duration_s != null && <span class="step-time">{seconds(live.duration_s)}</span>}
        </summary>
        <div class="step-body">
          <div class="step-label">Arguments</div>
          <pre class="step-args">{pretty(call.input)}</pre>
          {result && (
            <>
              <div class="step-label">{result.is_error ? "Error" : "Result"}</div>
              <pre class="step-result">
                {text.length > RESULT_PREVIEW ? text.slice(0, RESULT_PREVIEW) + "…" : text}
              </pre>
            </>
          )}
        </div>
      </details>
      {live?.progress && (state === "running" || state === "waiting") && (
        <div class="step-progress" role="status">
          {live.progress}
        </div>
      )}
      {agents.length > 0 && (
        <ol class="agents" aria-label={`${call.name}: sub-agents`}>
          {agents.map(([agent, streamed]) => (
            <li key={agent} class="agent">
              <details open={state === "running"}>
                <summary>{agent}</summary>
                <pre class="agent-text">{streamed}</pre>
              </details>
            </li>
          ))}
        </ol>
      )}
    </li>
  );
}

export function Timeline({ chat, calls }: { chat: Chat; calls: ToolUseBlock[] }) {
  if (!calls.length) return null;
  return (
    <ol class="timeline" aria-label="Tool calls">
      {calls.map((call) => (
        <Step key={call.id} chat={chat} call={call} />
      ))}
    </ol>
  );
}
