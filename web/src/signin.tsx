// Sign-in. In the default mode (no identity) the page just works; when the server
// answers 401, the page shows this screen instead of anyone's data.
import { useEffect, useState } from "preact/hooks";

export interface Session {
  state: "checking" | "signed-in" | "signed-out";
  canSignOut: boolean;
  signOut: () => void;
}

export function useSession(): Session {
  const [state, setState] = useState<Session["state"]>("signed-in");
  useEffect(() => {
    const out = () => setState("signed-out");
    addEventListener("ostinato:signed-out", out);
    return () => removeEventListener("ostinato:signed-out", out);
  }, []);
  return { state, canSignOut: false, signOut: () => undefined };
}

export function SignIn(_: { session: Session }) {
  return (
    <main class="signin">
      <h1>Sign in</h1>
      <p>This server needs you to sign in.</p>
    </main>
  );
}
