// The tenants a pattern is shared with (read-only to them): GET
// /v1/patterns/grants?id=, shared with POST …/grants, revoked with DELETE
// …/grants/{grantee}.
import { useId, useState } from "react";
import { fmtTime, patternsApi } from "../lib/patterns.ts";
import { useAsync } from "../lib/useAsync.ts";
import { Empty, ErrorBox, Loading } from "./States.tsx";

export function PatternGrants({ id }: { id: string }) {
  const grants = useAsync((signal) => patternsApi.grants(id, signal), [id]);
  const [grantee, setGrantee] = useState("");
  const [busy, setBusy] = useState("");
  const [error, setError] = useState("");
  const inputId = useId();
  const run = async (what: string, f: () => Promise<unknown>) => {
    setBusy(what);
    setError("");
    try {
      await f();
      grants.reload();
      return true;
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
      return false;
    } finally {
      setBusy("");
    }
  };
  const list = grants.data?.grants ?? [];
  return (
    <section className="card pat-section" aria-labelledby={inputId + "h"} data-testid="grants">
      <h2 id={inputId + "h"}>Shared with</h2>
      {grants.status === "loading" && !grants.data && <Loading what="the grants" />}
      {grants.status === "error" && <ErrorBox what="The grants" error={grants.error} retry={grants.reload} />}
      {grants.data && list.length === 0 && <Empty>Not shared with any tenant.</Empty>}
      {list.length > 0 && (
        <ul className="pat-grants">
          {list.map((g) => (
            <li key={g.grantee_tenant} data-grantee={g.grantee_tenant}>
              <strong>{g.grantee_tenant}</strong> <span className="muted small">since {fmtTime(g.created_at)}</span>
              <button type="button" className="link" disabled={busy !== ""} onClick={() => void run("revoke", () => patternsApi.revoke(id, g.grantee_tenant ?? ""))}>
                Revoke<span className="sr-only"> the grant to {g.grantee_tenant}</span>
              </button>
            </li>
          ))}
        </ul>
      )}
      <form
        className="pat-inline"
        onSubmit={(e) => {
          e.preventDefault();
          const t = grantee.trim();
          if (t) void run("grant", () => patternsApi.grant(id, t)).then((ok) => ok && setGrantee(""));
        }}
      >
        <label htmlFor={inputId}>Share read-only with tenant</label>
        <input id={inputId} value={grantee} onChange={(e) => setGrantee(e.target.value)} placeholder="tenant name" autoComplete="off" />
        <button type="submit" disabled={busy !== "" || !grantee.trim()}>{busy === "grant" ? "Sharing…" : "Share"}</button>
      </form>
      {error && <p className="error" role="alert">{error}</p>}
    </section>
  );
}
