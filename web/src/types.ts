// The wire shapes the page reads: rows (as /messages and `message` frames carry them),
// conversations, approvals, turns, tool calls, frames. See docs/api.md.

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export interface TextBlock { type: "text"; text: string }
export interface ThinkingBlock { type: "thinking"; text: string }
export interface ToolUseBlock { type: "tool_use"; id: string; name: string; input: JsonObject }
export interface MediaBlock {
  type: "image" | "file";
  media_type: string;
  data?: string;
  url?: string;
  name?: string;
}
export interface ToolResultBlock {
  type: "tool_result";
  tool_use_id: string;
  content: string | Array<TextBlock | MediaBlock>;
  is_error: boolean;
}
export type Block = TextBlock | ThinkingBlock | ToolUseBlock | ToolResultBlock | MediaBlock;

export interface Row {
  id: string;
  seq: number;
  role: "user" | "assistant" | "tool" | "system";
  blocks: Block[];
  hidden: boolean;
  metadata: JsonObject;
  turn_id: string | null;
  created_at: string;
  /** The row it follows in the conversation's tree (0: a first row). */
  parent_seq?: number | null;
  /** Where the branch forks: the versions of this point (docs/api.md, trees). */
  siblings?: SiblingRef[] | null;
}

/** One version of a point where the conversation forks: its first row, its newest leaf
 * (where a switch to it goes), and whether it is on the current branch. */
export interface SiblingRef { seq: number; leaf: number; current: boolean }

export type ConversationState = "idle" | "running" | "paused" | "failed";

export interface Conversation {
  id: string;
  state: ConversationState;
  created_at: string;
  updated_at: string;
  title: string | null;
  persona?: string | null;
  metadata?: JsonObject;
  pinned?: boolean;
  archived_at?: string | null;
}

export interface SearchHit {
  conversation_id: string;
  conversation_title: string | null;
  archived: boolean;
  message_id: string | null;
  seq: number | null;
  role: string | null;
  created_at: string | null;
  snippet: Array<{ text: string; match: boolean }>;
  score: number;
}

export interface Approval {
  id: string;
  tool_use_id: string;
  tool: string;
  arguments: JsonObject;
  risk: string;
  family: string | null;
  status: string;
  ending: string | null;
  expires_in_s?: number | null;
}

export interface UsageBudget {
  applies_to: "owner" | "anonymous" | "deployment";
  period: "day" | "month";
  spent_usd: number;
  reserved_usd: number;
  soft_usd: number | null;
  hard_usd: number | null;
  resets_at: string;
}

/** `GET /v1/usage`, the parts the page shows: today's total and the caller's budget. */
export interface Usage {
  currency: string;
  total: { calls: number; cost_usd: number | null; priced_cost_usd: number; unpriced_calls: number };
  budgets: UsageBudget[];
}

export interface TurnRecord {
  id: string;
  run_id: string;
  kind: string;
  status: string;
  stop_reason: string | null;
  error: string | null;
  metrics: JsonObject;
}

/** One call in a turn's timeline: its start offset from the turn's start, its duration. */
export interface TimedCall {
  start_s: number;
  duration_s: number | null;
  agent: string | null;
  under: string | null;
}

export interface ModelCallTiming extends TimedCall {
  purpose: string;
  model: string;
  time_to_first_token_s: number | null;
  tokens_in: number;
  tokens_out: number;
  stop_reason: string | null;
  error: string | null;
  retries: string[];
}

export interface ToolCallTiming extends TimedCall {
  id: string;
  name: string;
  status: string | null;
  approval: string | null;
  approval_wait_s: number | null;
}

export interface StepTiming {
  index: number;
  start_s: number;
  duration_s: number | null;
  model_calls: ModelCallTiming[];
  tool_calls: ToolCallTiming[];
}

/** `GET /v1/conversations/{id}/turns/{turn_id}`: a turn with its timeline. */
export interface TurnTimeline {
  id: string;
  status: string;
  stop_reason: string | null;
  duration_s: number | null;
  steps: StepTiming[] | null;
  after_turn: ModelCallTiming[];
}

export interface ToolCallRecord {
  id: string;
  turn_id: string;
  name: string;
  status: string;
  duration_s: number | null;
}

export interface QueuedRecord {
  id: string;
  client_message_id: string | null;
  text: string;
  position: number;
  /** Sent with `steer`: the running turn takes it before its next model call. */
  steer: boolean;
}

export interface Frame {
  type: string;
  run_id: string;
  seq: number;
  [field: string]: unknown;
}

export const FRAME_TYPES = [
  "turn.started",
  "message",
  "text.delta",
  "thinking.delta",
  "tool.started",
  "tool.finished",
  "tool.progress",
  "agent.token",
  "input.requested",
  "approval.requested",
  "approval.decided",
  "input.queued",
  "input.changed",
  "branch.changed",
  "context.compacted",
  "model.retrying",
  "turn.finished",
  "error",
] as const;

/** `GET /v1/caller`: who the server takes this page for. */
export interface Caller {
  owner: string;
  method: "local" | "key" | "oidc" | "anonymous";
  anonymous: boolean;
  csrf_token: string | null;
}

/** `GET /v1/session`: the ways to sign in on this server. */
export interface SignInOptions {
  methods: Array<"keys" | "oidc">;
  anonymous: boolean;
  oidc: {
    authorization_endpoint: string;
    client_id: string;
    redirect_uri: string | null;
    scope: string;
    params: Record<string, string>;
  } | null;
  problem: string | null;
}
