// Opening a conversation at one of its rows (`/c/<id>#seq-<n>`, where a search hit
// points): the rows up to it are read, then it is scrolled to and marked.
import type { Chat } from "./chat";

/** The seq the address points at, if any. */
export function seqInHash(): number | null {
  const match = /^#seq-(\d+)$/.exec(location.hash);
  return match ? Number(match[1]) : null;
}

/** Read older rows until `seq` is held (or there are no more); whether it is. */
export async function loadUpTo(chat: Chat, seq: number): Promise<boolean> {
  while (!chat.rows.has(seq) && chat.olderBefore !== null && seq < chat.olderBefore) {
    if (!(await chat.loadOlder())) break;
  }
  return chat.rows.has(seq);
}

/** Scroll to the row of `seq` in `container` and mark it; whether it was there. */
export function reveal(container: HTMLElement | null, seq: number): boolean {
  const row = container?.querySelector<HTMLElement>(`[data-seq="${seq}"]`);
  if (!row) return false;
  container?.querySelectorAll(".msg.found").forEach((el) => el.classList.remove("found"));
  row.classList.add("found");
  row.scrollIntoView({ block: "center" });
  return true;
}
