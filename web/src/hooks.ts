import { useEffect, useState } from "preact/hooks";
import type { Chat } from "./chat";

/** Re-render when the chat changes (rows and live state, or only the streaming draft). */
export function useChat(chat: Chat, draft = false): number {
  const [, setTick] = useState(0);
  useEffect(() => chat.subscribe(() => setTick((t) => t + 1), draft), [chat, draft]);
  return draft ? chat.draftVersion : chat.version;
}

export function newId(): string {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return "web_" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function resultText(content: string | Array<{ type: string; text?: string }>): string {
  if (typeof content === "string") return content;
  return content.map((b) => (b.type === "text" ? b.text ?? "" : `[${b.type}]`)).join("\n");
}

export function pretty(value: unknown): string {
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

export function seconds(s: number | null | undefined): string {
  if (s === null || s === undefined) return "";
  return s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(s < 10 ? 1 : 0)} s`;
}
