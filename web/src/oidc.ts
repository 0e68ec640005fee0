// Signing in through an identity provider: the authorization code flow with PKCE
// (RFC 7636). The page makes a random verifier and sends the person to the issuer with
// its SHA-256 (the challenge) and a random `state`; the issuer sends the browser back
// with a code; the page hands the code and the verifier to `POST /v1/session`, and the
// server trades them for a token at the issuer. The verifier and state wait in this
// tab's sessionStorage meanwhile; no token ever reaches the page.
import { api } from "./api";
import type { Caller, SignInOptions } from "./types";

const PENDING = "ostinato.signin";
export const CALLBACK = "/signin/callback";

interface Pending {
  state: string;
  verifier: string;
  redirect_uri: string;
  back: string; // where the page was when the sign-in began
}

function base64url(bytes: Uint8Array): string {
  let text = "";
  for (const b of bytes) text += String.fromCharCode(b);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function random(size: number): string {
  const bytes = new Uint8Array(size);
  crypto.getRandomValues(bytes);
  return base64url(bytes);
}

/** Send the browser to the issuer (it comes back to the redirect URI). */
export async function beginSignIn(offer: NonNullable<SignInOptions["oidc"]>): Promise<void> {
  if (!crypto.subtle) throw new Error("signing in needs this page to be served over HTTPS");
  const verifier = random(48);
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  const pending: Pending = {
    state: random(16),
    verifier,
    redirect_uri: offer.redirect_uri ?? `${location.origin}${CALLBACK}`,
    back: location.pathname === CALLBACK ? "/" : location.pathname,
  };
  sessionStorage.setItem(PENDING, JSON.stringify(pending));
  const query = new URLSearchParams({
    ...offer.params,
    response_type: "code",
    client_id: offer.client_id,
    redirect_uri: pending.redirect_uri,
    scope: offer.scope,
    state: pending.state,
    code_challenge: base64url(new Uint8Array(digest)),
    code_challenge_method: "S256",
  });
  const endpoint = offer.authorization_endpoint;
  location.assign(`${endpoint}${endpoint.includes("?") ? "&" : "?"}${query}`);
}

/** Whether this page load is the issuer sending the browser back. */
export function returning(): boolean {
  const query = new URLSearchParams(location.search);
  return query.has("state") && (query.has("code") || query.has("error"));
}

/** Finish a sign-in the issuer sent the browser back from: the caller it made, or an
 * Error saying why not. The code leaves the address bar either way. */
export async function finishSignIn(): Promise<Caller> {
  const query = new URLSearchParams(location.search);
  let pending: Pending | null = null;
  try {
    pending = JSON.parse(sessionStorage.getItem(PENDING) ?? "null") as Pending | null;
  } catch {
    pending = null;
  }
  sessionStorage.removeItem(PENDING);
  history.replaceState(null, "", pending?.back ?? "/");
  const error = query.get("error");
  if (error) throw new Error(`The identity provider said: ${query.get("error_description") ?? error}`);
  const code = query.get("code");
  if (!pending || !code || query.get("state") !== pending.state) {
    throw new Error("This sign-in was not started in this tab: please sign in again.");
  }
  return api.signIn({ code, code_verifier: pending.verifier, redirect_uri: pending.redirect_uri });
}
