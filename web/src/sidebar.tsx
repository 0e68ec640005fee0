// The conversations: newest first, paged; new, open, rename.
import { useEffect, useState } from "preact/hooks";
import { api } from "./api";
import { navigate } from "./nav";
import type { Conversation } from "./types";

function title(c: Conversation): string {
  return c.title?.trim() || `Untitled · ${new Date(c.created_at).toLocaleString()}`;
}

function Entry({ c, current, onChanged }: { c: Conversation; current: boolean; onChanged: () => void }) {
  const [editing, setEditing] = useState(false);
  const [value, setValue] = useState(c.title ?? "");
  const [error, setError] = useState<string | null>(null);
  const save = async () => {
    try {
      await api.rename(c.id, value.trim());
      setEditing(false);
      setError(null);
      onChanged();
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };
  if (editing) {
    return (
      <li>
        <form class="rename" onSubmit={(e) => { e.preventDefault(); save(); }}>
          <input
            aria-label="New title"
            value={value}
            ref={(el) => el?.focus()}
            onInput={(e) => setValue((e.target as HTMLInputElement).value)}
            onKeyDown={(e) => e.key === "Escape" && setEditing(false)}
          />
          <button class="link">Save</button>
        </form>
        {error && <p class="card-error" role="alert">{error}</p>}
      </li>
    );
  }
  const href = `/c/${encodeURIComponent(c.id)}`;
  return (
    <li class={current ? "current" : ""}>
      <a href={href} aria-current={current ? "page" : undefined} onClick={(e) => { e.preventDefault(); navigate(href); }}>
        <span class="title">{title(c)}</span>
        {c.state !== "idle" && <span class={`badge badge-${c.state}`}>{c.state}</span>}
      </a>
      <button class="icon rename-button" aria-label={`Rename ${title(c)}`} onClick={() => setEditing(true)}>
        ✎
      </button>
    </li>
  );
}

export function Sidebar({ current, version, onChanged }: { current: string | null; version: number; onChanged: () => void }) {
  const [items, setItems] = useState<Conversation[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    api.listConversations().then(
      (page) => {
        setItems(page.conversations);
        setNext(page.next);
        setError(null);
      },
      (e) => setError(e.message),
    );
  }, [version]);
  const more = async () => {
    if (!next) return;
    const page = await api.listConversations(next);
    setItems([...items, ...page.conversations]);
    setNext(page.next);
  };
  return (
    <nav id="conversations" aria-label="Conversations">
      <button class="primary new-button" onClick={() => navigate("/")}>New conversation</button>
      {error && <p class="card-error" role="alert">{error}</p>}
      <ul class="conversation-list">
        {items.map((c) => (
          <Entry key={c.id} c={c} current={c.id === current} onChanged={onChanged} />
        ))}
      </ul>
      {next && <button class="link" onClick={more}>Older conversations</button>}
    </nav>
  );
}
