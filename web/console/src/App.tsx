// The console's shell: the API key screen, then the navigation between the
// pages this version has and the page of the current route.
import { useEffect, useState } from "react";
import { ChatPage } from "./pages/Chat.tsx";
import { linkProps, navigate, usePath } from "./router.ts";
import { useSession } from "./stores/session.ts";

// The console's pages. Only pages that exist are listed.
const PAGES = [{ path: "/chat", title: "Agent chat" }];

export function App() {
  const { status, tenant, keysRequired, error, check, signOut } = useSession();
  const path = usePath();
  useEffect(() => {
    void check();
  }, [check]);
  useEffect(() => {
    if (!PAGES.some((p) => path === p.path || path.startsWith(p.path + "/"))) navigate("/chat", true);
  }, [path]);

  if (status === "checking") return <div className="center" role="status">Connecting to the gateway…</div>;
  if (status === "need-key") return <KeyScreen error={error} />;
  if (status === "error")
    return (
      <div className="center" role="alert">
        <p>The gateway could not be reached: {error}</p>
        <button type="button" onClick={() => void check()}>Try again</button>
      </div>
    );
  return (
    <div className="shell">
      <header className="topbar">
        <span className="brand">BA-Agent console</span>
        <nav aria-label="Pages">
          {PAGES.map((p) => (
            <a key={p.path} {...linkProps(p.path)} aria-current={path.startsWith(p.path) ? "page" : undefined}>{p.title}</a>
          ))}
        </nav>
        <span className="spacer" />
        <span className="tenant" data-testid="tenant">tenant {tenant}</span>
        {keysRequired && <button type="button" className="link" onClick={signOut}>Sign out</button>}
        <a className="link" href="/">Dashboard</a>
      </header>
      <main className="page">{path.startsWith("/chat") && <ChatPage path={path} />}</main>
    </div>
  );
}

function KeyScreen({ error }: { error: string }) {
  const signIn = useSession((s) => s.signIn);
  const [key, setKey] = useState("");
  const [busy, setBusy] = useState(false);
  return (
    <div className="center">
      <form
        className="card keyform"
        onSubmit={(e) => {
          e.preventDefault();
          setBusy(true);
          void signIn(key).finally(() => setBusy(false));
        }}
      >
        <h1>BA-Agent console</h1>
        <label htmlFor="api-key">Your tenant's API key</label>
        <input id="api-key" type="password" autoComplete="off" autoFocus value={key} onChange={(e) => setKey(e.target.value)} required />
        <p className="hint">Kept in this browser tab only (sessionStorage) and sent as a bearer token.</p>
        {error && <p className="error" role="alert">{error}</p>}
        <button type="submit" disabled={busy || !key.trim()}>Open the console</button>
      </form>
    </div>
  );
}
