// The console's shell: the API key screen, then the navigation between the
// pages and the page of the current route. The chat page is in the first
// chunk; every other page is loaded when first opened, so the chat route
// does not carry their code.
import { lazy, Suspense, useEffect, useState, type ComponentType, type LazyExoticComponent } from "react";
import { Loading } from "./components/States.tsx";
import { ChatPage } from "./pages/Chat.tsx";
import { linkProps, navigate, usePath } from "./router.ts";
import { useSession } from "./stores/session.ts";

type PageProps = { path: string };

// The console's pages: path prefix, title, component. A page receives the
// route's path (its own prefix included) and reads its parameters from it.
const PAGES: { path: string; title: string; page: ComponentType<PageProps> | LazyExoticComponent<ComponentType<PageProps>> }[] = [
  { path: "/chat", title: "Agent chat", page: ChatPage },
  { path: "/activity", title: "Activity", page: lazy(() => import("./pages/Activity.tsx")) },
  { path: "/overview", title: "Tenant overview", page: lazy(() => import("./pages/Overview.tsx")) },
  { path: "/skills", title: "Skills", page: lazy(() => import("./pages/Skills.tsx")) },
  { path: "/memory", title: "Memory", page: lazy(() => import("./pages/Memory.tsx")) },
  { path: "/patterns", title: "Patterns", page: lazy(() => import("./pages/Patterns.tsx")) },
];

function pageOf(path: string) {
  return PAGES.find((p) => path === p.path || path.startsWith(p.path + "/"));
}

export function App() {
  const { status, tenant, keysRequired, error, check, signOut } = useSession();
  const path = usePath();
  useEffect(() => {
    void check();
  }, [check]);
  useEffect(() => {
    if (!pageOf(path)) navigate("/chat", true);
  }, [path]);

  const current = pageOf(path);
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
        <span className="brand">BA-Agent<span className="wide-only"> console</span></span>
        <nav aria-label="Pages">
          {PAGES.map((p) => (
            <a key={p.path} {...linkProps(p.path)} aria-current={pageOf(path) === p ? "page" : undefined}>{p.title}</a>
          ))}
        </nav>
        <span className="spacer" />
        <span className="tenant" data-testid="tenant"><span className="wide-only">tenant </span>{tenant}</span>
        {keysRequired && <button type="button" className="link" onClick={signOut}>Sign out</button>}
        <a className="link" href="/">Dashboard</a>
      </header>
      <main className="page">
        <Suspense fallback={<Loading what="the page" />}>{current && <current.page path={path} />}</Suspense>
      </main>
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
