// The conversation's live stream: /events as an EventSource, opened after the rows the
// page already has (`after_seq`), so the server replays what came since and then streams
// live frames, with no gap and no duplicate. When the stream breaks (the network, a
// server restart, the server closing it), it is opened again after the newest seq the
// page holds, and what the frames would have told meanwhile (approvals, the state) is
// read again.
import { api } from "./api";
import type { Chat } from "./chat";
import { FRAME_TYPES, type Frame } from "./types";

const MAX_DELAY_MS = 5000;

export class Live {
  private source: EventSource | null = null;
  private timer: number | null = null;
  private failures = 0;
  private stopped = false;
  private markOpen: () => void = () => undefined;
  // Resolved when the stream first opens. What the server sends only live (an `error`
  // frame, a retry notice, deltas) reaches the page only once it is open: a message
  // sent before could start a turn that ends before the stream connects.
  readonly opened: Promise<void> = new Promise((resolve) => (this.markOpen = resolve));

  constructor(private readonly chat: Chat) {}

  // `opened`, or after `ms` if the stream cannot open (the message then goes anyway: the
  // stored rows tell what happened once the stream is back).
  openedWithin(ms: number): Promise<void> {
    return Promise.race([this.opened, new Promise<void>((resolve) => window.setTimeout(resolve, ms))]);
  }

  start(): void {
    this.stopped = false;
    this.open();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.source?.close();
    this.source = null;
  }

  private open(): void {
    const chat = this.chat;
    const url = `/v1/conversations/${encodeURIComponent(chat.id)}/events?after_seq=${chat.maxSeq}`;
    const source = new EventSource(url);
    this.source = source;
    const onFrame = (event: MessageEvent) => {
      // an `error` frame and the EventSource's own error event share a name
      if (this.source !== source || typeof event.data !== "string") return;
      chat.apply(JSON.parse(event.data) as Frame);
    };
    for (const type of FRAME_TYPES) source.addEventListener(type, onFrame as EventListener);
    source.onopen = () => {
      this.failures = 0;
      this.markOpen();
      chat.setConnected(true);
      // after the stream is open, so nothing decided or requested from now on is missed
      chat.refresh().catch(() => undefined);
    };
    source.onerror = () => {
      if (this.source !== source) return;
      source.close();
      this.source = null;
      chat.setConnected(false);
      if (this.stopped) return;
      api.caller().catch(() => undefined); // a 401 (signed out elsewhere) shows the sign-in
      const delay = Math.min(MAX_DELAY_MS, 250 * 2 ** this.failures++);
      this.timer = window.setTimeout(() => this.open(), delay);
    };
  }
}
