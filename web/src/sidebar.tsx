// The conversations: newest first, paged; new, open, rename, archive, export, import; the
// archived ones on request; a search of them all as the person types.
import { useEffect, useRef, useState } from "preact/hooks";
import { api, importFile } from "./api";
import { navigate } from "./nav";
import type { Conversation, SearchHit } from "./types";

const SEARCH_DELAY_MS = 150; // after the last key, before the search is asked

function title(c: Conversation): string {
  return c.title?.trim() || `Untitled · ${new Date(c.created_at).toLocaleString()}`;
}

function Entry({ c, current, onChanged }: { c: Conversation; current: boolean; onChanged: () => void }) {
  const [editing, setEditing] = useState(false);
  const [value, setValue] = useState(c.title ?? "");
  const [error, setError] = useState<string | null>(null);
  const act = async (work: () => Promise<unknown>) => {
    try {
      await work();
      setEditing(false);
      setError(null);
      onChanged();
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };
  const save = () => act(() => api.rename(c.id, value.trim()));
  const archived = Boolean(c.archived_at);
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
      <button
        class="icon archive-button"
        aria-label={`${archived ? "Restore" : "Archive"} ${title(c)}`}
        title={archived ? "Restore" : "Archive"}
        onClick={() => act(() => api.archive(c.id, !archived))}
      >
        {archived ? "↩" : "🗄"}
      </button>
      <a
        class="icon export-button"
        href={`/v1/conversations/${encodeURIComponent(c.id)}/export`}
        download
        aria-label={`Export ${title(c)}`}
        title="Export (JSON: every branch, for ostinato import)"
      >
        ⤓
      </a>
      {error && <p class="card-error" role="alert">{error}</p>}
    </li>
  );
}

function Snippet({ hit }: { hit: SearchHit }) {
  return (
    <span class="snippet">
      {hit.snippet.map((part, i) => (part.match ? <mark key={i}>{part.text}</mark> : part.text))}
    </span>
  );
}

function Hits({ hits, query }: { hits: SearchHit[] | null; query: string }) {
  if (hits === null) return <p class="muted search-status" role="status">Searching…</p>;
  if (!hits.length) return <p class="muted search-status" role="status">Nothing matches “{query}”.</p>;
  return (
    <ul class="search-hits" aria-label="Search results">
      {hits.map((hit) => {
        const href = `/c/${encodeURIComponent(hit.conversation_id)}` + (hit.seq !== null ? `#seq-${hit.seq}` : "");
        return (
          <li key={`${hit.conversation_id}:${hit.seq}`}>
            <a href={href} onClick={(e) => { e.preventDefault(); navigate(href); }}>
              <span class="title">
                {hit.conversation_title?.trim() || "Untitled"}
                {hit.archived && <span class="badge">archived</span>}
              </span>
              <Snippet hit={hit} />
            </a>
          </li>
        );
      })}
    </ul>
  );
}

function useSearch(query: string): SearchHit[] | null {
  const [hits, setHits] = useState<SearchHit[] | null>(null);
  const asked = useRef(0);
  useEffect(() => {
    setHits(null);
    if (!query.trim()) return;
    const number = ++asked.current;
    const timer = setTimeout(() => {
      api.search(query).then(
        (found) => number === asked.current && setHits(found.hits),
        () => number === asked.current && setHits([]),
      );
    }, SEARCH_DELAY_MS);
    return () => clearTimeout(timer);
  }, [query]);
  return hits;
}

/** A file picker (a labelled input, reachable with Tab) that sends the chosen file to
 * `POST /v1/import`, then says how many conversations came in (and refreshes the list) or
 * shows the server's message. */
function Import({ onChanged }: { onChanged: () => void }) {
  const [status, setStatus] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const chosen = async (input: HTMLInputElement) => {
    const file = input.files?.[0];
    if (!file) return;
    setStatus(`Importing ${file.name}…`);
    setError(null);
    try {
      const made = await importFile(file);
      const n = made.conversations.length;
      setStatus(`Imported ${n} conversation${n === 1 ? "" : "s"}.`);
      onChanged();
    } catch (e) {
      setStatus(null);
      setError(e instanceof Error ? e.message : String(e));
    } finally {
      input.value = ""; // the same file can be chosen again
    }
  };
  return (
    <div class="import">
      <input
        id="import-file"
        class="sr-only import-input"
        type="file"
        accept=".json,application/json"
        onChange={(e) => chosen(e.target as HTMLInputElement)}
      />
      <label for="import-file" class="link import-button" title="An ostinato export file, or ChatGPT's conversations.json">
        Import conversations
      </label>
      {status && <p class="muted import-status" role="status">{status}</p>}
      {error && <p class="card-error import-error" role="alert">Import refused: {error}</p>}
    </div>
  );
}

export function Sidebar({ current, version, onChanged }: { current: string | null; version: number; onChanged: () => void }) {
  const [items, setItems] = useState<Conversation[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [archived, setArchived] = useState(false);
  const [query, setQuery] = useState("");
  const hits = useSearch(query);
  useEffect(() => {
    api.listConversations(null, archived).then(
      (page) => {
        setItems(page.conversations);
        setNext(page.next);
        setError(null);
      },
      (e) => setError(e.message),
    );
  }, [version, archived]);
  const more = async () => {
    if (!next) return;
    const page = await api.listConversations(next, archived);
    setItems([...items, ...page.conversations]);
    setNext(page.next);
  };
  const searching = query.trim() !== "";
  return (
    <nav id="conversations" aria-label="Conversations">
      <button class="primary new-button" onClick={() => navigate("/")}>New conversation</button>
      <input
        type="search"
        class="search"
        aria-label="Search conversations"
        placeholder="Search"
        value={query}
        onInput={(e) => setQuery((e.target as HTMLInputElement).value)}
        onKeyDown={(e) => e.key === "Escape" && setQuery("")}
      />
      {searching ? (
        <Hits hits={hits} query={query} />
      ) : (
        <>
          {error && <p class="card-error" role="alert">{error}</p>}
          {archived && <h2 class="list-heading">Archived</h2>}
          <ul class="conversation-list">
            {items.map((c) => (
              <Entry key={c.id} c={c} current={c.id === current} onChanged={onChanged} />
            ))}
          </ul>
          {archived && !items.length && <p class="muted">Nothing is archived.</p>}
          {next && <button class="link" onClick={more}>Older conversations</button>}
          <button class="link archived-toggle" aria-pressed={archived} onClick={() => setArchived(!archived)}>
            {archived ? "Back to conversations" : "Archived conversations"}
          </button>
          <Import onChanged={onChanged} />
        </>
      )}
    </nav>
  );
}
