// The loading, empty and error states every page shows the same way.
import type { ReactNode } from "react";

export function Loading({ what }: { what: string }) {
  return <p className="muted" role="status">Loading {what}…</p>;
}

export function Empty({ children }: { children: ReactNode }) {
  return <p className="muted empty-state">{children}</p>;
}

// ErrorBox says what failed and offers a retry when one is given.
export function ErrorBox({ what, error, retry }: { what: string; error: unknown; retry?: () => void }) {
  const msg = error instanceof Error ? error.message : String(error);
  return (
    <div className="error" role="alert">
      <p>{what} could not be loaded: {msg}</p>
      {retry && <button type="button" onClick={retry}>Retry</button>}
    </div>
  );
}
