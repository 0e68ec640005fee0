// HTTP calls to the ostinato API. Every error answer has one JSON shape
// ({"error": {"code", "message"}}); ApiError carries it.
import type {
  Approval,
  Caller,
  Conversation,
  QueuedRecord,
  Row,
  SignInOptions,
  SearchHit,
  ToolCallRecord,
  TurnRecord,
  TurnTimeline,
  Usage,
} from "./types";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Called when the server answers 401 (or a stream says the credential ended): the page
 * shows the sign-in screen, with the server's reason. */
export const onUnauthorized: { handler: ((message: string) => void) | null } = { handler: null };

export function signedOut(message: string): void {
  onUnauthorized.handler?.(message);
}

/** The CSRF token of a caller whose requests ride a cookie (a session, or an anonymous
 * owner): sent with every state-changing request. */
export const csrf: { token: string | null } = { token: null };

function headersFor(method: string, headers: Record<string, string>): Record<string, string> {
  if (method !== "GET" && csrf.token) headers["x-csrf-token"] = csrf.token;
  return headers;
}

async function fail(response: Response, notify = true): Promise<never> {
  let code = "http_" + response.status;
  let message = `the server answered ${response.status}`;
  try {
    const body = await response.json();
    if (body && body.error) {
      code = String(body.error.code ?? code);
      message = String(body.error.message ?? message);
    }
  } catch {
    // not JSON: keep the status line
  }
  if (response.status === 401 && notify) signedOut(message);
  throw new ApiError(response.status, code, message);
}

export async function request<T>(
  method: string,
  path: string,
  body?: unknown,
  notify = true,
): Promise<T> {
  const init: RequestInit = { method, headers: headersFor(method, { accept: "application/json" }) };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    (init.headers as Record<string, string>)["content-type"] = "application/json";
  }
  let response: Response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError(0, "unreachable", "the server cannot be reached");
  }
  if (!response.ok) return fail(response, notify);
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}

const base = (id: string) => `/v1/conversations/${encodeURIComponent(id)}`;

export const api = {
  caller: (notify = true) => request<Caller>("GET", "/v1/caller", undefined, notify),
  signInOptions: () => request<SignInOptions>("GET", "/v1/session", undefined, false),
  signIn: (proof: Record<string, string>) =>
    request<Caller>("POST", "/v1/session", proof, false),
  signOut: () => request<void>("DELETE", "/v1/session", undefined, false),
  listConversations: (before?: string | null, archived = false) =>
    request<{ conversations: Conversation[]; next: string | null }>(
      "GET",
      `/v1/conversations?limit=50${before ? `&before=${encodeURIComponent(before)}` : ""}` +
        (archived ? "&archived=true" : ""),
    ),
  search: (q: string) =>
    request<{ hits: SearchHit[] }>("GET", `/v1/search?limit=30&q=${encodeURIComponent(q)}`),
  archive: (id: string, archived: boolean) =>
    request<Conversation>("PATCH", base(id), { archived }),
  createConversation: (title: string | null) =>
    request<Conversation>("POST", "/v1/conversations", title ? { title } : {}),
  conversation: (id: string) => request<Conversation>("GET", base(id)),
  rename: (id: string, title: string) => request<Conversation>("PATCH", base(id), { title }),
  update: (id: string, fields: Record<string, string | null>) => request<Conversation>("PATCH", base(id), fields),
  models: () =>
    request<{ data: Array<{ id: string; ostinato?: Record<string, unknown> & { tiers?: string[] } }> }>(
      "GET",
      "/v1/models",
    ),
  messages: (id: string, afterSeq: number, limit: number) =>
    request<{ messages: Row[]; next_after_seq: number | null }>(
      "GET",
      `${base(id)}/messages?after_seq=${afterSeq}&limit=${limit}&include_hidden=true`,
    ),
  newestMessages: (id: string, count: number) =>
    request<{ messages: Row[]; older: boolean }>(
      "GET",
      `${base(id)}/messages?newest=${count}&include_hidden=true`,
    ),
  pendingApprovals: (id: string) =>
    request<{ approvals: Approval[] }>("GET", `${base(id)}/approvals?pending=true`),
  turns: (id: string) => request<{ turns: TurnRecord[] }>("GET", `${base(id)}/turns`),
  turn: (id: string, turnId: string) =>
    request<TurnTimeline>("GET", `${base(id)}/turns/${encodeURIComponent(turnId)}`),
  toolCalls: (id: string) =>
    request<{ tool_calls: ToolCallRecord[] }>("GET", `${base(id)}/tool-calls`),
  queue: (id: string) => request<{ queued: QueuedRecord[] }>("GET", `${base(id)}/queue`),
  editQueued: (id: string, queuedId: string, text: string) =>
    request<QueuedRecord>("PATCH", `${base(id)}/queue/${encodeURIComponent(queuedId)}`, { text }, false),
  withdrawQueued: (id: string, queuedId: string) =>
    request<QueuedRecord>("DELETE", `${base(id)}/queue/${encodeURIComponent(queuedId)}`, undefined, false),
  tools: (id: string) =>
    request<{ tools: Array<{ name: string; category: string }> }>(
      "GET",
      `/v1/tools?conversation_id=${encodeURIComponent(id)}`,
    ),
  decide: (id: string, approvalId: string, decision: "approve" | "decline", remember: string) =>
    request<Approval>("POST", `${base(id)}/approvals/${encodeURIComponent(approvalId)}`, {
      decision,
      remember,
    }),
  switchBranch: (id: string, leaf: number) =>
    request<{ leaf: number; ranges: number[][]; since: number }>("PUT", `${base(id)}/branch`, { leaf }),
  cancel: (id: string) => request<unknown>("POST", `${base(id)}/cancel`),
  usageOn: (day: string) => request<Usage>("GET", `/v1/usage?since=${day}&until=${day}`),
};

/** Send a file the person chose (an export file, or ChatGPT's conversations.json) to
 * `POST /v1/import` as it is; the new conversations' ids, or an ApiError with the
 * server's message (a 422 names the place in the file). */
export async function importFile(file: Blob): Promise<{ conversations: string[] }> {
  const headers = headersFor("POST", { accept: "application/json", "content-type": "application/json" });
  let response: Response;
  try {
    response = await fetch("/v1/import", { method: "POST", headers, body: file });
  } catch {
    throw new ApiError(0, "unreachable", "the server cannot be reached");
  }
  if (!response.ok) return fail(response);
  return (await response.json()) as { conversations: string[] };
}

/**
 * Start a turn: a message (JSON, or a multipart form when files are attached) or a card's
 * answer. The request asks for the turn's frames and stops reading after the first one
 * (`turn.started`, or `input.queued` when the message waits): the turn goes on without
 * this request, and its frames reach the page on the conversation's stream. So a refused
 * message is an error here, and an accepted one returns at once. `path` starts the turn
 * another way: `messages/{seq}/edit` (a new version of a message) or
 * `messages/{seq}/regenerate` (a new answer), each on a new branch.
 */
export async function startTurn(
  id: string,
  body: Record<string, unknown>,
  files: File[] = [],
  path = "turns",
): Promise<string | undefined> {
  const controller = new AbortController();
  const headers = headersFor("POST", { accept: "text/event-stream" });
  let payload: BodyInit;
  if (files.length) {
    const form = new FormData();
    for (const [name, value] of Object.entries(body)) {
      if (value !== undefined && value !== null) form.append(name, String(value));
    }
    for (const file of files) form.append("files", file, file.name);
    payload = form;
  } else {
    headers["content-type"] = "application/json";
    payload = JSON.stringify(body);
  }
  let response: Response;
  try {
    response = await fetch(`${base(id)}/${path}`, {
      method: "POST",
      headers,
      body: payload,
      signal: controller.signal,
    });
  } catch {
    throw new ApiError(0, "unreachable", "the server cannot be reached");
  }
  if (!response.ok) return fail(response);
  const reader = response.body?.getReader();
  try {
    let seen = "";
    const decoder = new TextDecoder();
    while (reader) {
      const { done, value } = await reader.read();
      if (done) break;
      seen += decoder.decode(value, { stream: true });
      if (seen.includes("\n\n")) break;
    }
    const event = /^event: (.*)$/m.exec(seen)?.[1];
    const data = /^data: (.*)$/m.exec(seen)?.[1];
    if (event === "error" && data) {
      const frame = JSON.parse(data);
      throw new ApiError(409, String(frame.code), String(frame.message));
    }
    return event;
  } finally {
    controller.abort();
  }
}
