// The messages waiting to be sent into the conversation, above the composer: each says
// when it goes (at the running turn's next step, or after its answer) and can be edited
// or withdrawn until a turn takes it. The list is the server's queue (every surface's
// messages), read again whenever a frame says it changed.
import { useState } from "preact/hooks";
import { api } from "./api";
import type { Chat } from "./chat";
import type { QueuedRecord } from "./types";

const WHEN_STEERED = "Sends at the next step of the current reply";
const WHEN_QUEUED = "Queued: runs after the current reply";

export function WaitingList({ chat }: { chat: Chat }) {
  if (!chat.waiting.length) return null;
  return (
    <section class="waiting" aria-label="Waiting messages">
      <ul>
        {chat.waiting.map((q) => (
          <WaitingItem key={q.id} chat={chat} item={q} />
        ))}
      </ul>
    </section>
  );
}

function WaitingItem({ chat, item }: { chat: Chat; item: QueuedRecord }) {
  const [editing, setEditing] = useState(false);
  const [text, setText] = useState(item.text);
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<string | null>(null);
  const act = async (what: () => Promise<unknown>, failed: string) => {
    setBusy(true);
    setProblem(null);
    try {
      await what();
      setEditing(false);
      chat.refreshQueue();
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      setProblem(`${failed}: ${message}`);
      chat.refreshQueue();
    } finally {
      setBusy(false);
    }
  };
  const save = () => {
    if (!text.trim()) return;
    void act(() => api.editQueued(chat.id, item.id, text), "Not saved");
  };
  const withdraw = () => void act(() => api.withdrawQueued(chat.id, item.id), "Not withdrawn");
  return (
    <li class="waiting-item" aria-label={`Waiting message: ${item.text}`}>
      <div class="pending-label">{item.steer ? WHEN_STEERED : WHEN_QUEUED}</div>
      {editing ? (
        <form
          class="waiting-edit"
          onSubmit={(e) => {
            e.preventDefault();
            save();
          }}
        >
          <textarea
            aria-label="Edit the waiting message"
            value={text}
            rows={2}
            autoFocus
            onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
            onKeyDown={(e) => {
              if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
                e.preventDefault();
                save();
              } else if (e.key === "Escape") {
                e.preventDefault();
                e.stopPropagation(); // Esc here leaves the edit, it does not stop the turn
                setEditing(false);
                setText(item.text);
              }
            }}
          />
          <button type="submit" class="primary" disabled={busy || !text.trim()}>
            Save
          </button>
          <button type="button" onClick={() => { setEditing(false); setText(item.text); }}>
            Cancel
          </button>
        </form>
      ) : (
        <div class="waiting-row">
          <span class="waiting-text">{item.text}</span>
          <button type="button" class="link" disabled={busy} onClick={() => { setText(item.text); setEditing(true); }}>
            Edit
          </button>
          <button type="button" class="link" disabled={busy} onClick={withdraw}>
            Withdraw
          </button>
        </div>
      )}
      {problem && <p class="waiting-problem" role="alert">{problem}</p>}
    </li>
  );
}
