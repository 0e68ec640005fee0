// One conversation on the page: its rows keyed by seq (from /messages pages and from
// `message` frames: one row per seq, so nothing shows twice), and what the live frames
// add on top of the rows (the streaming text, tool progress, cards and approvals that
// wait, queued messages, retries, errors). The view reads it; nothing else keeps state.
import { api, signedOut } from "./api";
import type {
  Approval,
  ConversationState,
  Frame,
  JsonObject,
  Row,
  ToolCallRecord,
  QueuedRecord,
  ToolResultBlock,
  TurnRecord,
} from "./types";

export interface ToolLive {
  status: string; // running | ok | error | timeout | interrupted | skipped | waiting
  duration_s: number | null;
  progress: string | null;
  category: string | null;
  agents: Map<string, string>; // a sub-agent's streamed text, by agent name
}

export interface Draft {
  run_id: string;
  text: string;
  thinking: string;
  partial: boolean; // deltas were missed (a reconnect): the text starts mid-way
}

export interface PendingSend {
  client_message_id: string;
  text: string;
  files: string[];
  queued: boolean;
  steer?: boolean; // sent with "Send now": the running turn takes it at its next step
}

export interface Notice {
  seq: number;
  kind: "error" | "compacted";
  text: string;
}

const UI_TOOLS = new Set(["ask_user", "ask_form", "choose"]);
/** Frames after which a waiting message may be gone (a user row too: one was taken). */
const TAKING_FRAMES = new Set(["turn.started", "turn.finished"]);
const TAIL = 150; // rows read when a conversation opens
const OLDER_PAGE = 500; // rows read each time the person reaches the oldest ones held

export class Chat {
  readonly rows = new Map<number, Row>();
  order: number[] = [];
  maxSeq = 0;
  readonly results = new Map<string, ToolResultBlock>();
  readonly tools = new Map<string, ToolLive>();
  readonly categories = new Map<string, string>();
  readonly turns = new Map<string, TurnRecord>();
  approvals = new Map<string, Approval>();
  private decided = new Set<string>();
  private requestedSince = new Set<string>();
  pendingSends: PendingSend[] = [];
  /** The messages waiting in the queue (every surface's), in the order they run. */
  waiting: QueuedRecord[] = [];
  private queueEpoch = 0;
  queuedElsewhere = new Map<string, number>(); // queued ids of other surfaces -> position
  private queuedCids = new Map<string, string>(); // queued id -> client_message_id
  notices: Notice[] = [];
  draft: Draft | null = null;
  retrying: { attempt: number; delay_s: number; error: string; at: number } | null = null;
  state: ConversationState = "idle";
  connected = false;
  loaded = false;
  missing = false;
  /** Older rows are stored before this seq and not read yet (null: none). */
  olderBefore: number | null = null;
  private loadingOlder = false;
  private stateEpoch = 0;
  private branchEpoch = 0;
  private rereadOnRow = false; // the branch moved: read it again once its first row comes
  /** Bumped when rows (or anything rendered with them) change; the draft has its own. */
  version = 0;
  draftVersion = 0;
  private listeners = new Set<() => void>();
  private draftListeners = new Set<() => void>();
  private scheduled = false;
  private draftScheduled = false;

  constructor(readonly id: string) {}

  // --- subscriptions: batched to one notification per animation frame --------------
  subscribe(listener: () => void, draft = false): () => void {
    const set = draft ? this.draftListeners : this.listeners;
    set.add(listener);
    return () => set.delete(listener);
  }

  changed(): void {
    this.version++;
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => {
      this.scheduled = false;
      for (const l of this.listeners) l();
    });
  }

  private draftChanged(): void {
    this.draftVersion++;
    if (this.draftScheduled) return;
    this.draftScheduled = true;
    requestAnimationFrame(() => {
      this.draftScheduled = false;
      for (const l of this.draftListeners) l();
    });
  }

  // --- rows ------------------------------------------------------------------------
  addRows(rows: Row[]): void {
    let appended = true;
    for (const row of rows) {
      if (row.seq > this.maxSeq) this.maxSeq = row.seq;
      if (this.rows.has(row.seq)) continue;
      this.rows.set(row.seq, row);
      const last = this.order[this.order.length - 1];
      if (last !== undefined && row.seq < last) appended = false;
      this.order.push(row.seq);
      this.indexRow(row);
    }
    if (!appended) this.order.sort((a, b) => a - b);
    this.changed();
  }

  private indexRow(row: Row): void {
    const cid = row.metadata?.client_message_id;
    if (typeof cid === "string") {
      this.pendingSends = this.pendingSends.filter((p) => p.client_message_id !== cid);
      this.waiting = this.waiting.filter((q) => q.client_message_id !== cid);
      for (const [qid, qcid] of this.queuedCids) {
        if (qcid === cid) this.queuedElsewhere.delete(qid);
      }
    }
    for (const block of row.blocks) {
      if (block.type === "tool_result") {
        this.results.set(block.tool_use_id, block);
        const live = this.tools.get(block.tool_use_id);
        if (live && (live.status === "running" || live.status === "waiting")) {
          live.status = block.is_error ? "error" : "ok";
        }
      }
    }
  }

  /** The question card that waits: an assistant row's `metadata.awaiting` call that no
   * result answers yet. */
  waitingCard(): { row: Row; id: string; name: string; input: JsonObject } | null {
    for (let i = this.order.length - 1; i >= 0; i--) {
      const row = this.rows.get(this.order[i])!;
      const awaiting = row.metadata?.awaiting;
      if (row.role !== "assistant" || typeof awaiting !== "string") continue;
      if (this.results.has(awaiting)) return null;
      for (const block of row.blocks) {
        if (block.type === "tool_use" && block.id === awaiting) {
          return { row, id: block.id, name: block.name, input: block.input };
        }
      }
      return null;
    }
    return null;
  }

  category(name: string, toolUseId?: string): string {
    const live = toolUseId ? this.tools.get(toolUseId) : undefined;
    if (live?.category) return live.category;
    return this.categories.get(name) ?? (UI_TOOLS.has(name) ? "ui" : "action");
  }

  // --- loading ---------------------------------------------------------------------
  /** Read the newest stored rows (older ones come as the person scrolls up:
   * `loadOlder`), so a long conversation opens as fast as a short one. The live
   * stream's `refresh` adds what the rows alone do not say. */
  async load(): Promise<void> {
    const tools = api.tools(this.id).then(
      (r) => r.tools.forEach((t) => this.categories.set(t.name, t.category)),
      () => undefined,
    );
    // the calls' records come with the rows, so a call's line reads the same at once as
    // it did live (its status and duration are the stored ones, not guessed from a result)
    const calls = api.toolCalls(this.id).then(
      (r) => this.setToolCalls(r.tool_calls),
      () => undefined,
    );
    const tail = await api.newestMessages(this.id, TAIL);
    this.addRows(tail.messages);
    if (tail.older && !tail.messages.length) await this.loadAll(); // all of it summarised
    else this.olderBefore = tail.older ? tail.messages[0].seq : null;
    // the newest rows stop at the last summary's watermark (what the model still sees):
    // a short tail reads on, so a reload shows what the page showed live
    if (this.olderBefore !== null && tail.messages.length < TAIL) await this.loadOlder();
    await Promise.all([tools, calls]);
    this.loaded = true;
    this.changed();
  }

  private async loadAll(): Promise<void> {
    let after = 0;
    for (;;) {
      const page = await api.messages(this.id, after, 1000);
      this.addRows(page.messages);
      if (page.next_after_seq === null) break;
      after = page.next_after_seq;
    }
    this.olderBefore = null;
  }

  /** The stored rows just before the oldest one held (a page of them); false when
   * there are none, or they are being read already. */
  async loadOlder(): Promise<boolean> {
    const before = this.olderBefore;
    if (before === null || this.loadingOlder) return false;
    this.loadingOlder = true;
    try {
      // the rows with seq in (after, before): all of them, whether seqs are dense or not
      const after = Math.max(0, before - 1 - OLDER_PAGE);
      const page = await api.messages(this.id, after, OLDER_PAGE);
      const rows = page.messages.filter((r) => r.seq < before);
      this.olderBefore = after === 0 ? null : rows.length ? rows[0].seq : after + 1;
      this.addRows(rows);
      return true;
    } finally {
      this.loadingOlder = false;
    }
  }

  /** What the frames would have said while the page was away: the conversation's state,
   * the approvals that wait, the turns' endings, the tool calls' timings, the queue. */
  async refresh(): Promise<void> {
    const epoch = ++this.stateEpoch;
    this.requestedSince = new Set();
    const [conversation, approvals, turns, calls, queue] = await Promise.all([
      api.conversation(this.id),
      api.pendingApprovals(this.id),
      api.turns(this.id).catch(() => ({ turns: [] as TurnRecord[] })),
      api.toolCalls(this.id).catch(() => ({ tool_calls: [] as ToolCallRecord[] })),
      api.queue(this.id).catch(() => ({ queued: [] })),
    ]);
    if (epoch === this.stateEpoch) this.state = conversation.state;
    // pending now = what the list says, plus what was requested while it was read,
    // less anything decided (a decision frame may overtake the list)
    const fresh = new Map<string, Approval>(approvals.approvals.map((a) => [a.id, a]));
    for (const [aid, a] of this.approvals) if (this.requestedSince.has(aid)) fresh.set(aid, a);
    this.approvals = new Map([...fresh].filter(([aid]) => !this.decided.has(aid)));
    for (const turn of turns.turns) this.turns.set(turn.id, turn);
    this.setToolCalls(calls.tool_calls);
    this.setWaiting(queue.queued);
    for (const q of queue.queued) {
      if (q.client_message_id && this.pendingSends.some((p) => p.client_message_id === q.client_message_id)) continue;
      this.queuedElsewhere.set(q.id, q.position);
      if (q.client_message_id) this.queuedCids.set(q.id, q.client_message_id);
    }
    this.changed();
  }

  /** The queue as read. A message of this page's that was listed and is gone without
   * its row was withdrawn (its row, if a turn took it, comes by its own frame). */
  private setWaiting(queued: QueuedRecord[]): void {
    const listed = new Set(this.waiting.map((q) => q.client_message_id));
    const now = new Set(queued.map((q) => q.client_message_id));
    this.pendingSends = this.pendingSends.filter(
      (p) => !(p.queued && listed.has(p.client_message_id) && !now.has(p.client_message_id)),
    );
    this.waiting = queued;
  }

  /** Whether the frame may mean a waiting message was taken (a turn began or ended, or
   * a user row came: a running turn took a steered one). */
  private mayTakeWaiting(frame: Frame): boolean {
    if (TAKING_FRAMES.has(frame.type)) return true;
    return frame.type === "message" && (frame.message as Row | undefined)?.role === "user";
  }

  /** Read the queue again (a message was queued, changed, taken, or a turn began or
   * ended); an older answer that comes last is dropped. */
  refreshQueue(): void {
    const epoch = ++this.queueEpoch;
    api.queue(this.id).then(
      (queue) => {
        if (epoch !== this.queueEpoch) return;
        this.setWaiting(queue.queued);
        this.changed();
      },
      () => undefined, // the next frame (or a reconnect's refresh) reads it again
    );
  }

  // --- frames ----------------------------------------------------------------------
  apply(frame: Frame): void {
    const f = frame as Frame & Record<string, never>;
    if (frame.type === "input.queued" || frame.type === "input.changed") this.refreshQueue();
    else if (this.waiting.length && this.mayTakeWaiting(frame)) this.refreshQueue();
    switch (frame.type) {
      case "message":
        return this.onMessage(f.message as unknown as Row, frame.run_id);
      case "turn.started":
        this.stateEpoch++;
        this.state = "running";
        this.retrying = null;
        this.draft = null;
        this.draftChanged();
        return this.changed();
      case "text.delta":
      case "thinking.delta":
        return this.onDelta(frame);
      case "tool.started":
        this.tools.set(String(f.tool_use_id), {
          status: "running",
          duration_s: null,
          progress: null,
          category: String(f.category ?? "action"),
          agents: new Map(),
        });
        this.categories.set(String(f.name), String(f.category ?? "action"));
        return this.changed();
      case "tool.finished":
        return this.onToolFinished(f);
      case "tool.progress":
        return this.onProgress(f);
      case "agent.token":
        return this.onAgentToken(f);
      case "approval.requested":
        return this.onApprovalRequested(f);
      case "approval.decided":
        return this.markDecided(String(f.approval_id));
      case "branch.changed":
        return this.onBranchChanged(f);
      case "input.changed":
        if (f.withdrawn) this.queuedElsewhere.delete(String(f.queued_id));
        return this.changed();
      case "input.queued":
        if (!this.pendingSends.some((p) => p.client_message_id === f.client_message_id)) {
          this.queuedElsewhere.set(String(f.queued_id), Number(f.position));
          if (f.client_message_id) this.queuedCids.set(String(f.queued_id), String(f.client_message_id));
        }
        return this.changed();
      case "model.retrying":
        this.retrying = {
          attempt: Number(f.attempt),
          delay_s: Number(f.delay_s),
          error: String(f.error),
          at: Date.now(),
        };
        return this.changed();
      case "context.compacted":
        this.notices.push({ seq: frame.seq, kind: "compacted", text: "Older messages were summarised to fit the model's window." });
        return this.changed();
      case "turn.finished":
        return this.onTurnFinished(f);
      case "error":
        if (f.code === "closing" || f.code === "overflow") return; // the stream reconnects
        if (f.code === "unauthorized") return signedOut(String(f.message)); // key revoked
        this.notices.push({ seq: frame.seq, kind: "error", text: String(f.message) });
        return this.changed();
      default:
        return; // input.requested: the card is the row that awaits it
    }
  }

  private onMessage(row: Row, runId: string): void {
    if (row.role === "assistant" && this.draft && this.draft.run_id === runId) {
      this.draft = null;
      this.draftChanged();
    }
    this.retrying = null;
    this.addRows([row]);
    if (this.rereadOnRow) {
      this.rereadOnRow = false;
      this.rereadBranch().catch(() => undefined); // now with the versions of its fork
    }
  }

  /** The current branch moved (an edit, a regenerate, a switch; here or elsewhere): the
   * rows held that are not on it go at once, and the branch is read again (its rows, and
   * where it forks), now and once more when the moved turn's first row comes. */
  private onBranchChanged(f: Record<string, unknown>): void {
    const ranges = (f.ranges ?? []) as number[][];
    const since = Number(f.since);
    const on = (seq: number) => seq > since || ranges.some(([a, b]) => a <= seq && seq <= b);
    this.order = this.order.filter((seq) => on(seq) || !this.rows.delete(seq));
    this.rereadOnRow = true; // an edit's or a regenerate's rows follow (a switch's: none)
    this.changed();
    this.rereadBranch().catch(() => undefined);
  }

  /** Read the current branch's newest rows again, in place of those held (the same seq
   * may now say where it forks). A newer read wins over an older one. */
  async rereadBranch(): Promise<void> {
    const epoch = ++this.branchEpoch;
    const tail = await api.newestMessages(this.id, TAIL);
    if (epoch !== this.branchEpoch) return;
    for (const row of tail.messages) {
      if (row.seq > this.maxSeq) this.maxSeq = row.seq;
      if (!this.rows.has(row.seq)) this.order.push(row.seq);
      this.rows.set(row.seq, row);
      this.indexRow(row);
    }
    this.order.sort((a, b) => a - b);
    this.olderBefore = tail.older && tail.messages.length ? tail.messages[0].seq : null;
    this.changed();
  }

  private onDelta(frame: Frame): void {
    this.retrying = null;
    if (!this.draft || this.draft.run_id !== frame.run_id) {
      this.draft = { run_id: frame.run_id, text: "", thinking: "", partial: false };
    }
    const text = String(frame.text ?? "");
    if (frame.type === "text.delta") this.draft.text += text;
    else this.draft.thinking += text;
    this.draftChanged();
  }

  private onToolFinished(f: Record<string, unknown>): void {
    const id = String(f.tool_use_id);
    const live = this.tools.get(id) ?? {
      status: "running", duration_s: null, progress: null, category: null, agents: new Map(),
    };
    live.status = String(f.status);
    live.duration_s = typeof f.duration_s === "number" ? f.duration_s : null;
    live.progress = null;
    this.tools.set(id, live);
    this.changed();
  }

  private onProgress(f: Record<string, unknown>): void {
    const live = this.tools.get(String(f.tool_use_id));
    if (!live) return;
    live.progress = f.heartbeat ? live.progress ?? "still running" : String(f.text);
    if (f.heartbeat && !live.progress) live.progress = "still running";
    this.changed();
  }

  private onAgentToken(f: Record<string, unknown>): void {
    const id = String(f.tool_use_id);
    const live = this.tools.get(id) ?? {
      status: "running", duration_s: null, progress: null, category: "agent", agents: new Map(),
    };
    const agent = String(f.agent);
    live.agents.set(agent, (live.agents.get(agent) ?? "") + String(f.text));
    this.tools.set(id, live);
    this.changed();
  }

  private onApprovalRequested(f: Record<string, unknown>): void {
    const id = String(f.approval_id);
    if (this.decided.has(id)) return;
    this.requestedSince.add(id);
    this.approvals.set(id, {
      id,
      tool_use_id: String(f.tool_use_id),
      tool: String(f.tool),
      arguments: (f.input ?? {}) as JsonObject,
      risk: String(f.risk),
      family: (f.family as string | null) ?? null,
      status: "pending",
      ending: null,
      expires_in_s: (f.expires_in_s as number | null) ?? null,
    });
    const live = this.tools.get(String(f.tool_use_id));
    if (live) live.status = "waiting";
    this.changed();
  }

  private onTurnFinished(f: Record<string, unknown>): void {
    this.stateEpoch++;
    this.state = String(f.state) as ConversationState;
    this.retrying = null;
    const turnId = String(f.turn_id);
    this.turns.set(turnId, {
      id: turnId,
      run_id: String(f.run_id),
      kind: "user",
      status: "finished",
      stop_reason: String(f.stop_reason),
      error: (f.error as string | null) ?? null,
      metrics: (f.metrics ?? {}) as JsonObject,
    });
    if (this.draft && this.draft.run_id === f.run_id) {
      this.draft = null;
      this.draftChanged();
    }
    this.changed();
    // the calls' endings as stored (a cancelled call is `interrupted`, whatever its row says)
    api.toolCalls(this.id).then((r) => this.setToolCalls(r.tool_calls), () => undefined);
  }

  private setToolCalls(calls: ToolCallRecord[]): void {
    for (const call of calls) {
      const live = this.tools.get(call.id);
      if (live && (live.status === "running" || live.status === "waiting") && call.status === "running") continue;
      this.tools.set(call.id, {
        status: call.status,
        duration_s: call.duration_s,
        progress: null,
        category: live?.category ?? null,
        agents: live?.agents ?? new Map(),
      });
    }
    this.changed();
  }

  // --- the connection says ---------------------------------------------------------
  setConnected(connected: boolean): void {
    if (this.connected === connected) return;
    this.connected = connected;
    if (!connected && this.draft) {
      this.draft.partial = true; // frames will be missed: what streams next is a part
      this.draft.text = "";
      this.draft.thinking = "";
      this.draftChanged();
    }
    this.changed();
  }

  markDecided(approvalId: string): void {
    this.decided.add(approvalId);
    const approval = this.approvals.get(approvalId);
    this.approvals.delete(approvalId);
    const live = approval ? this.tools.get(approval.tool_use_id) : undefined;
    if (live && live.status === "waiting") live.status = "running"; // runs, or ends soon
    this.changed();
  }
}
