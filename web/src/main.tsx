// The chat page: a list of conversations (a navigation named "Conversations") and the
// open one, at `/` (a new conversation) or `/c/<id>`. Served by `ostinato serve`.
import { render } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { api } from "./api";
import { ConversationView } from "./conversation";
import { Composer } from "./composer";
import { navigate } from "./nav";
import { Sidebar } from "./sidebar";
import { type Session, SignIn, useSession } from "./signin";
import { Spend } from "./spend";
import "./app.css";

function route(): string | null {
  const match = /^\/c\/([^/]+)\/?$/.exec(location.pathname);
  return match ? decodeURIComponent(match[1]) : null;
}


function NewConversation({ onCreated }: { onCreated: (id: string, text: string, files: File[]) => void }) {
  const [files, setFiles] = useState<File[]>([]);
  const [error, setError] = useState<string | null>(null);
  const send = async (text: string) => {
    setError(null);
    try {
      const title = text.trim().split("\n")[0].slice(0, 80) || (files[0]?.name ?? null);
      const conversation = await api.createConversation(title);
      onCreated(conversation.id, text, files);
      return true;
    } catch (e) {
      setError(`Not sent: ${e instanceof Error ? e.message : String(e)}`);
      return false;
    }
  };
  return (
    <section class="conversation new" aria-label="New conversation">
      <div class="scroller">
        <div class="welcome">
          <h1>What shall we do?</h1>
          <p>Your message starts a new conversation. Try <code>/tool calculator {'{"expression": "2*(3+4)"}'}</code>.</p>
        </div>
      </div>
      <Composer running={false} disabledReason={null} hint={null} error={error} files={files} onFiles={setFiles} onSend={send} onStop={() => undefined} />
    </section>
  );
}

function Account({ session }: { session: Session }) {
  const caller = session.caller;
  if (caller?.method === "key" || caller?.method === "oidc") {
    return (
      <span class="account">
        <span class="owner" title="Signed in as">{caller.owner}</span>
        <button class="link" onClick={session.signOut}>Sign out</button>
      </span>
    );
  }
  if (caller?.anonymous && session.options?.methods.length) {
    return <button class="link" onClick={session.askToSignIn}>Sign in</button>;
  }
  return null;
}

function App({ session }: { session: Session }) {
  const [current, setCurrent] = useState<string | null>(route());
  // a new conversation's first message, held until its view takes it: sent once, never
  // again when the person comes back to the conversation
  const first = useRef<{ id: string; text: string; files: File[] } | null>(null);
  const [listVersion, setListVersion] = useState(0);
  const [navOpen, setNavOpen] = useState(false);
  const [visits, setVisits] = useState(0); // each navigation opens its view afresh
  const [showLookups, setShowLookups] = useState(localStorage.getItem("ostinato.showLookups") === "1");

  useEffect(() => {
    const onPop = () => {
      setCurrent(route());
      setVisits((n) => n + 1);
      setNavOpen(false);
    };
    const onFocus = () => setListVersion((v) => v + 1);
    addEventListener("popstate", onPop);
    addEventListener("focus", onFocus);
    return () => {
      removeEventListener("popstate", onPop);
      removeEventListener("focus", onFocus);
    };
  }, []);
  const refreshList = useCallback(() => setListVersion((v) => v + 1), []);

  const toggleLookups = () => {
    localStorage.setItem("ostinato.showLookups", showLookups ? "0" : "1");
    setShowLookups(!showLookups);
  };
  return (
    <div class={navOpen ? "app nav-open" : "app"}>
      <header class="topbar">
        <button class="icon nav-toggle" aria-expanded={navOpen} aria-controls="conversations" onClick={() => setNavOpen(!navOpen)}>
          ☰<span class="sr-only">Conversations</span>
        </button>
        <a class="brand" href="/" onClick={(e) => { e.preventDefault(); navigate("/"); }}>ostinato</a>
        <label class="toggle">
          <input type="checkbox" checked={showLookups} onChange={toggleLookups} /> Show lookups
        </label>
        <Spend version={listVersion} />
        <Account session={session} />
      </header>
      <Sidebar current={current} version={listVersion} onChanged={refreshList} />
      <main>
        {current === null ? (
          <NewConversation
            key={visits}
            onCreated={(id, text, files) => {
              first.current = { id, text, files };
              refreshList();
              navigate(`/c/${encodeURIComponent(id)}`);
            }}
          />
        ) : (
          <ConversationView
            key={current}
            id={current}
            showLookups={showLookups}
            takeFirstMessage={() => {
              const held = first.current;
              if (!held || held.id !== current) return null;
              first.current = null;
              return held;
            }}
            onActivity={refreshList}
          />
        )}
      </main>
    </div>
  );
}

/** The page: nothing but the sign-in screen until the server knows who this is. */
function Root() {
  const session = useSession();
  if (session.state === "checking") return <p class="loading">Loading…</p>;
  if (session.state === "signed-out") return <SignIn session={session} />;
  return <App key={session.epoch} session={session} />;
}

render(<Root />, document.getElementById("app")!);
