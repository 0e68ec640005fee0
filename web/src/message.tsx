// Messages: the user's (text, images, files), the assistant's (markdown, thinking
// collapsed, tool steps, rich cards, metrics and the turn's timeline on demand), the streaming draft, and the
// notes a turn leaves when it did not end plainly.
import { Component } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import type { Chat, PendingSend } from "./chat";
import { Suggestions, options } from "./cards";
import { useChat, resultText, seconds } from "./hooks";
import { renderMarkdown } from "./markdown";
import { Show } from "./show";
import { Timeline } from "./timeline";
import { TurnView } from "./turnview";
import type { Json, JsonObject, MediaBlock, Row, SiblingRef, ToolUseBlock, TurnRecord } from "./types";

const CARD_TOOLS = new Set(["ask_user", "ask_form", "choose"]);

function Markdown({ text, keep = true }: { text: string; keep?: boolean }) {
  return <div class="md" dangerouslySetInnerHTML={{ __html: renderMarkdown(text, keep) }} />;
}

function safeUrl(url: string | undefined): string | undefined {
  return url && /^(https?:|\/)/i.test(url) ? url : undefined;
}

function Media({ block }: { block: MediaBlock }) {
  const src = block.data ? `data:${block.media_type};base64,${block.data}` : safeUrl(block.url);
  if (block.type === "image" && src && /^image\/(png|jpeg|gif|webp)$/.test(block.media_type)) {
    return <img class="attachment-image" src={src} alt={block.name ?? "attached image"} />;
  }
  const name = block.name ?? "file";
  return src ? (
    <a class="attachment-file" href={src} download={name}>
      {name}
    </a>
  ) : (
    <span class="attachment-file">{name}</span>
  );
}

/** "< 2/3 >": the versions of this point of the conversation (edits of a message, or
 * answers given again); an arrow makes the next or previous one current (its newest leaf). */
export function Versions({ versions, enabled, onSwitch }: {
  versions: SiblingRef[];
  enabled: boolean;
  onSwitch: (leaf: number) => void;
}) {
  const at = Math.max(0, versions.findIndex((v) => v.current));
  const go = (to: number) => onSwitch(versions[to].leaf);
  return (
    <nav class="versions" aria-label="Versions">
      <button type="button" class="link" aria-label="Previous version" disabled={!enabled || at === 0} onClick={() => go(at - 1)}>
        &lt;
      </button>
      <span class="versions-at" aria-live="polite">{at + 1}/{versions.length}</span>
      <button type="button" class="link" aria-label="Next version" disabled={!enabled || at === versions.length - 1} onClick={() => go(at + 1)}>
        &gt;
      </button>
    </nav>
  );
}

export interface TreeProps {
  /** The versions of this point, where the branch forks here (else null). */
  versions: SiblingRef[] | null;
  /** No turn runs: the branch may move (an edit, a regenerate, a switch). */
  idle: boolean;
  onSwitch: (leaf: number) => void;
}

function EditBox({ text, onSave, onCancel }: { text: string; onSave: (text: string) => Promise<boolean>; onCancel: () => void }) {
  const [value, setValue] = useState(text);
  const box = useRef<HTMLTextAreaElement>(null);
  useEffect(() => box.current?.focus({ preventScroll: true }), []);
  const save = async () => {
    if (value.trim()) await onSave(value);
  };
  return (
    <form class="edit-box" onSubmit={(e) => { e.preventDefault(); save(); }}>
      <textarea
        aria-label="Edit your message"
        value={value}
        ref={box}
        onInput={(e) => setValue((e.target as HTMLTextAreaElement).value)}
        onKeyDown={(e) => {
          if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
            e.preventDefault();
            save();
          } else if (e.key === "Escape") {
            e.preventDefault();
            e.stopPropagation();
            onCancel();
          }
        }}
      />
      <div class="edit-actions">
        <button type="submit" class="primary" disabled={!value.trim()}>Save and send</button>
        <button type="button" onClick={onCancel}>Cancel</button>
      </div>
    </form>
  );
}

interface UserProps extends TreeProps {
  row: Row;
  onEdit: (seq: number, text: string) => Promise<boolean>;
}

export function UserRow({ row, versions, idle, onSwitch, onEdit }: UserProps) {
  const [editing, setEditing] = useState(false);
  const text = row.blocks.map((b) => (b.type === "text" ? b.text : "")).join("");
  const media = row.blocks.filter((b): b is MediaBlock => b.type === "image" || b.type === "file");
  return (
    <div class="msg-wrap user">
      <article class="msg user" data-seq={row.seq} aria-label="You">
        {editing ? (
          <EditBox
            text={text}
            onCancel={() => setEditing(false)}
            onSave={async (t) => {
              const sent = await onEdit(row.seq, t);
              if (sent) setEditing(false);
              return sent;
            }}
          />
        ) : (
          text && <div class="user-text">{text}</div>
        )}
        {media.length > 0 && (
          <div class="attachments">
            {media.map((m, i) => (
              <Media key={i} block={m} />
            ))}
          </div>
        )}
      </article>
      {(versions || (!editing && idle)) && (
        <div class="row-tools">
          {versions && <Versions versions={versions} enabled={idle} onSwitch={onSwitch} />}
          {!editing && idle && (
            <button type="button" class="link" aria-label="Edit message" onClick={() => setEditing(true)}>
              Edit
            </button>
          )}
        </div>
      )}
    </div>
  );
}

export function PendingRow({ send }: { send: PendingSend }) {
  return (
    <article class="msg user pending" aria-label="You (not sent yet)" data-client-id={send.client_message_id}>
      <div class="user-text">{send.text}</div>
      {send.files.length > 0 && <div class="attachments">{send.files.map((f) => <span key={f} class="attachment-file">{f}</span>)}</div>}
      <div class="pending-label">
        {!send.queued ? "Sending…" : send.steer ? "Sends at the next step of the current reply" : "Queued: runs after the current reply"}
      </div>
    </article>
  );
}

interface MetricsProps { metrics: JsonObject; route: JsonObject | null; chatId: string; turnId: string | null }

function Metrics({ metrics, route, chatId, turnId }: MetricsProps) {
  const [open, setOpen] = useState(false);
  const [timeline, setTimeline] = useState(false);
  const tools = metrics.tools && typeof metrics.tools === "object" ? Object.entries(metrics.tools) : [];
  return (
    <div class="metrics">
      <button class="link" aria-expanded={open} onClick={() => setOpen(!open)}>
        Details
      </button>
      {turnId && (
        <button class="link" aria-expanded={timeline} onClick={() => setTimeline(!timeline)}>
          Timeline
        </button>
      )}
      {timeline && turnId && <TurnView conversationId={chatId} turnId={turnId} />}
      {open && (
        <dl class="metrics-list">
          {metrics.model != null && (<><dt>Model</dt><dd>{String(metrics.model)}</dd></>)}
          {route?.tier != null && (<><dt>Tier</dt><dd>{String(route.tier)}</dd></>)}
          {route?.skill != null && (<><dt>Skill</dt><dd>{String(route.skill)}</dd></>)}
          <dt>Tokens</dt>
          <dd>{String(metrics.tokens_in ?? 0)} in · {String(metrics.tokens_out ?? 0)} out</dd>
          <dt>Model calls</dt>
          <dd>{String(metrics.model_calls ?? 0)}</dd>
          <dt>Time</dt>
          <dd>{seconds(Number(metrics.response_time_s ?? 0))}</dd>
          {tools.length > 0 && (<><dt>Tools</dt><dd>{tools.map(([n, c]) => `${n} ×${c}`).join(", ")}</dd></>)}
        </dl>
      )}
    </div>
  );
}

/** What the person picked, in the words they saw: a `choose` answer's ids as the labels
 * of those options, a form's answers as "question: answer" lines. */
function answerShown(call: ToolUseBlock, value: Json): string | null {
  if (typeof value === "string") return value;
  if (Array.isArray(value)) return value.map((v) => (typeof v === "string" ? v : JSON.stringify(v))).join(", ");
  if (!value || typeof value !== "object") return null;
  if (call.name === "choose") {
    const labels = new Map(options(call.input.options).map((o) => [o.id, o.label]));
    const ids = "ids" in value && Array.isArray(value.ids) ? value.ids : "id" in value ? [value.id] : null;
    return ids ? ids.map((id) => labels.get(String(id)) ?? String(id)).join(", ") : null;
  }
  if (call.name === "ask_form" && value.answers && typeof value.answers === "object" && !Array.isArray(value.answers)) {
    const questions = Array.isArray(call.input.questions) ? (call.input.questions as JsonObject[]) : [];
    return Object.entries(value.answers)
      .map(([qid, answer]) => {
        const question = questions.find((q, i) => String(q.id ?? i) === qid);
        const picked = Array.isArray(answer) ? answer.map(String).join(", ") : String(answer);
        return `${question?.question ?? qid}: ${picked}`;
      })
      .join("; ");
  }
  return null;
}

function answeredText(chat: Chat, call: ToolUseBlock): string {
  const result = chat.results.get(call.id);
  if (!result) return "Waiting for your answer";
  const text = resultText(result.content);
  let value: Json;
  try {
    value = JSON.parse(text) as Json;
  } catch {
    return `Answered: ${text}`;
  }
  if (value && typeof value === "object" && !Array.isArray(value) && value.dismissed) {
    return "Not answered (the conversation moved on)";
  }
  return `Answered: ${answerShown(call, value) ?? text}`;
}

interface AssistantProps extends TreeProps {
  chat: Chat;
  row: Row;
  showLookups: boolean;
  latest: boolean;
  route: JsonObject | null;
  version: number; // the chat's version: live tool state changes re-render the row
  onSend: (text: string) => void;
  onRegenerate: (seq: number) => void;
}

function AssistantBody(props: AssistantProps) {
  const { chat, row, showLookups, latest, route, onSend, versions, idle } = props;
  const steps: ToolUseBlock[] = [];
  const parts = [];
  for (const [i, block] of row.blocks.entries()) {
    if (block.type === "text" && block.text.trim()) parts.push(<Markdown key={i} text={block.text} />);
    else if (block.type === "thinking" && block.text.trim()) {
      parts.push(
        <details key={i} class="thinking">
          <summary>Thinking</summary>
          <div class="thinking-text">{block.text}</div>
        </details>,
      );
    } else if (block.type === "image" || block.type === "file") parts.push(<Media key={i} block={block} />);
    else if (block.type === "tool_use") {
      // a `show` that failed draws nothing: its line (and error) is in the tool timeline
      if (block.name === "show") {
        if (chat.results.get(block.id)?.is_error) steps.push(block);
        else parts.push(<Show key={i} input={block.input} />);
      }
      else if (block.name === "suggest_replies") {
        const replies = Array.isArray(block.input.replies) ? block.input.replies.map(String) : [];
        if (latest && chat.state === "idle") parts.push(<Suggestions key={i} replies={replies} onSend={onSend} />);
      } else if (CARD_TOOLS.has(block.name)) {
        parts.push(<p key={i} class="card-note">{String(block.input.question ?? block.input.title ?? "A question")} — {answeredText(chat, block)}</p>);
      } else if (showLookups || chat.category(block.name, block.id) !== "read") steps.push(block);
    }
  }
  const metrics = row.metadata?.metrics as JsonObject | undefined;
  if (!parts.length && !steps.length && !versions) return null;
  return (
    <>
      <article class="msg assistant" data-seq={row.seq} aria-label="Assistant">
        {parts}
        <Timeline chat={chat} calls={steps} />
        {metrics && <Metrics metrics={metrics} route={route} chatId={chat.id} turnId={row.turn_id} />}
      </article>
      {(versions || (metrics && idle)) && (
        <div class="row-tools answer">
          {versions && <Versions versions={versions} enabled={idle} onSwitch={props.onSwitch} />}
          {metrics && idle && (
            <button type="button" class="link" aria-label="Regenerate answer" onClick={() => props.onRegenerate(row.seq)}>
              Regenerate
            </button>
          )}
        </div>
      )}
    </>
  );
}

/** Re-renders only when its row, the display options or what its calls' lines show
 * change (live, or read again from the store). */
export class AssistantRow extends Component<AssistantProps> {
  private shownCalls = "";
  shouldComponentUpdate(next: AssistantProps): boolean {
    const p = this.props;
    return (
      next.row !== p.row ||
      next.showLookups !== p.showLookups ||
      next.latest !== p.latest ||
      next.versions !== p.versions ||
      next.idle !== p.idle ||
      (next.version !== p.version &&
        (rowIsLive(next.chat, next.row, next.latest) || callsShown(next.chat, next.row) !== this.shownCalls))
    );
  }
  render(props: AssistantProps) {
    this.shownCalls = callsShown(props.chat, props.row);
    return <AssistantBody {...props} />;
  }
}

/** What the row's call lines show from the chat's call records: status and duration. */
function callsShown(chat: Chat, row: Row): string {
  let shown = "";
  for (const b of row.blocks) {
    if (b.type !== "tool_use") continue;
    const live = chat.tools.get(b.id);
    if (live) shown += `${b.id}:${live.status}:${live.duration_s};`;
  }
  return shown;
}

/** Whether live state (tool progress, results, approvals) can still change this row. */
function rowIsLive(chat: Chat, row: Row, latest: boolean): boolean {
  if (latest) return true;
  for (const b of row.blocks) {
    if (b.type !== "tool_use") continue;
    const live = chat.tools.get(b.id);
    if (!chat.results.has(b.id) || (live && (live.status === "running" || live.status === "waiting"))) return true;
  }
  return false;
}

/** The reply as it streams (text deltas since the last row), re-rendered per frame. */
export function DraftRow({ chat }: { chat: Chat }) {
  useChat(chat, true);
  const draft = chat.draft;
  if (!draft || (!draft.text && !draft.thinking)) return null;
  return (
    <article class="msg assistant streaming" aria-label="Assistant (writing)" aria-busy="true">
      {draft.thinking && (
        <details class="thinking">
          <summary>Thinking…</summary>
          <div class="thinking-text">{draft.thinking}</div>
        </details>
      )}
      {draft.text && <Markdown text={(draft.partial ? "… " : "") + draft.text} keep={false} />}
    </article>
  );
}

const STOP_TEXT: Record<string, string> = {
  cancelled: "Stopped: the turn was cancelled.",
  budget_exhausted: "Stopped: the turn ran out of its budget of model calls.",
  failed: "The turn failed.",
  crashed: "Stopped: the model kept repeating itself.",
  interrupted: "Interrupted: the server stopped during this turn.",
};

export function StopNote({ turn }: { turn: TurnRecord }) {
  const text = STOP_TEXT[turn.stop_reason ?? ""] ?? `Stopped: ${turn.stop_reason}`;
  return (
    <p class={`note stop stop-${turn.stop_reason}`} role="note">
      {text}
      {turn.error ? ` ${turn.error}` : ""}
    </p>
  );
}
