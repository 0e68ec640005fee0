// Who the page acts for, and signing in and out. At start the page asks `GET /v1/caller`:
// in the default mode everyone is the local owner and the page just works; with
// anonymous callers allowed, that first answer gives this browser its own owner. Where
// the server needs a sign-in, the page shows only this screen (nothing of anyone's data)
// until a session cookie is set: by an API key given once (`POST /v1/session`), or by the
// identity provider (oidc.ts). A 401 anywhere, a stream ended because its key was
// revoked, or signing out in another tab brings the screen back.
import { useEffect, useState } from "preact/hooks";
import { ApiError, api, csrf, onUnauthorized } from "./api";
import { beginSignIn, finishSignIn, returning } from "./oidc";
import type { Caller, SignInOptions } from "./types";

const SIGNED_OUT = "ostinato.signedOut"; // written on sign-out: other tabs follow
const LAST_CALLER = "ostinato.caller"; // who the server took this browser for last time

/** Who the page may take itself for before the server says so: the caller of the last
 * visit, if it needs no cookie (the default mode) or its cookie is still here (the CSRF
 * cookie comes and goes with the session's and the anonymous owner's). The page then
 * starts at once and asks `GET /v1/caller` beside its first requests; a 401 there or on
 * any request shows the sign-in screen. Without it (a first visit, after signing out)
 * the page asks first: an anonymous browser must get its cookie before it sends more. */
function remembered(): Caller | null {
  let last: Caller | null = null;
  try {
    last = JSON.parse(localStorage.getItem(LAST_CALLER) ?? "null") as Caller | null;
  } catch {
    return null;
  }
  if (!last) return null;
  if (last.method === "local") return { ...last, csrf_token: null };
  const token = /(?:^|;\s*)ostinato_csrf=([^;]+)/.exec(document.cookie)?.[1];
  return token ? { ...last, csrf_token: decodeURIComponent(token) } : null;
}

function remember(who: Caller | null): void {
  if (who) localStorage.setItem(LAST_CALLER, JSON.stringify({ ...who, csrf_token: null }));
  else localStorage.removeItem(LAST_CALLER);
}
const NO_COOKIE =
  "The browser did not keep the sign-in cookie: serve this page over HTTPS " +
  "(or see cookie_secure in the server's docs/auth.md).";

export interface Session {
  state: "checking" | "signed-in" | "signed-out";
  caller: Caller | null;
  epoch: number; // a new one at each sign-in: the page starts afresh
  notice: string | null; // why the person is asked to sign in
  options: SignInOptions | null;
  signInWithKey: (key: string) => Promise<void>;
  signOut: () => Promise<void>;
  askToSignIn: () => void;
  continueAnonymously: () => void;
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export function useSession(): Session {
  const [first] = useState(() => (returning() ? null : remembered()));
  if (first && csrf.token === null) csrf.token = first.csrf_token;
  const [state, setState] = useState<Session["state"]>(first ? "signed-in" : "checking");
  const [caller, setCaller] = useState<Caller | null>(first);
  const [epoch, setEpoch] = useState(0);
  const [notice, setNotice] = useState<string | null>(null);
  const [options, setOptions] = useState<SignInOptions | null>(null);

  const loadOptions = () =>
    api.signInOptions().then(setOptions, (e) => setNotice(`Cannot reach the server: ${message(e)}`));
  const adopt = (who: Caller, same = false) => {
    csrf.token = who.csrf_token;
    remember(who);
    setCaller(who);
    setNotice(null);
    setState("signed-in");
    if (!same) setEpoch((n) => n + 1); // someone else: the page starts afresh
    if (who.anonymous) loadOptions();
  };
  const out = (why: string | null) => {
    csrf.token = null;
    remember(null);
    setCaller(null);
    setNotice(why);
    setState("signed-out");
    loadOptions();
  };
  /** Who the server takes this browser for now (a 401: the sign-in screen). */
  const check = async () => {
    try {
      const who = await api.caller(false);
      adopt(who, first !== null && who.owner === first.owner && who.method === first.method);
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) out(null);
      else out(`Cannot reach the server: ${message(e)}`);
    }
  };
  /** A session was just made: keep it only if the browser kept its cookie. */
  const confirm = async () => {
    try {
      adopt(await api.caller(false), false);
    } catch (e) {
      throw new Error(e instanceof ApiError && e.status === 401 ? NO_COOKIE : message(e));
    }
  };

  useEffect(() => {
    onUnauthorized.handler = (why) => out(why);
    const onStorage = (e: StorageEvent) => {
      if (e.key === SIGNED_OUT && e.newValue) out("You signed out in another tab.");
    };
    addEventListener("storage", onStorage);
    if (returning()) {
      finishSignIn()
        .then(confirm)
        .catch((e) => out(message(e)));
    } else {
      check();
    }
    return () => {
      onUnauthorized.handler = null;
      removeEventListener("storage", onStorage);
    };
  }, []);

  return {
    state,
    caller,
    epoch,
    notice,
    options,
    signInWithKey: async (key: string) => {
      await api.signIn({ key });
      await confirm();
    },
    signOut: async () => {
      await api.signOut().catch(() => undefined);
      localStorage.setItem(SIGNED_OUT, String(Date.now()));
      out("You signed out.");
    },
    askToSignIn: () => out(null),
    continueAnonymously: () => {
      setState("checking");
      check();
    },
  };
}

export function SignIn({ session }: { session: Session }) {
  const [key, setKey] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const options = session.options;
  const attempt = async (action: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await action();
    } catch (e) {
      setError(message(e));
    } finally {
      setBusy(false);
    }
  };
  const oidc = options?.oidc ?? null;
  return (
    <main class="signin" aria-labelledby="signin-title">
      <h1 id="signin-title">Sign in</h1>
      {session.notice && <p class="note" role="status">{session.notice}</p>}
      {!options && <p class="loading">Loading…</p>}
      {options?.methods.includes("keys") && (
        <form
          aria-label="Sign in with an API key"
          onSubmit={(e) => {
            e.preventDefault();
            attempt(() => session.signInWithKey(key.trim()));
          }}
        >
          <label for="api-key">API key</label>
          <input
            id="api-key"
            type="password"
            autocomplete="off"
            spellcheck={false}
            value={key}
            onInput={(e) => setKey((e.target as HTMLInputElement).value)}
          />
          <button class="primary" disabled={busy || !key.trim()}>Sign in</button>
          <p class="hint">
            The page keeps a session cookie, not the key. <code>ostinato keys create</code> makes one.
          </p>
        </form>
      )}
      {oidc && (
        <button class="primary" disabled={busy} onClick={() => attempt(() => beginSignIn(oidc))}>
          Sign in with {new URL(oidc.authorization_endpoint).host}
        </button>
      )}
      {options?.anonymous && (
        <button class="link" onClick={session.continueAnonymously}>Continue without signing in</button>
      )}
      {options?.problem && <p class="card-error">{options.problem}</p>}
      {options && !options.methods.length && !options.anonymous && (
        <p>This server offers no sign-in for the page: its API takes credentials directly.</p>
      )}
      {error && <p class="card-error" role="alert">{error}</p>}
    </main>
  );
}
