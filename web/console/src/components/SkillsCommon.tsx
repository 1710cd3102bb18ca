// What the Skills page's views share: the project (kept in the address as
// ?project=, so a reload or a link keeps it), a skill's state pill, the
// result line of a write, and a confirmation dialog the keyboard answers.
import { useEffect, useRef, useSyncExternalStore, type ReactNode } from "react";
import { type SkillRow, stateText } from "../lib/skills.ts";

function subscribe(cb: () => void): () => void {
  window.addEventListener("popstate", cb);
  return () => window.removeEventListener("popstate", cb);
}

// useProject is the ?project= of the address.
export function useProject(): string {
  return useSyncExternalStore(subscribe, () => new URLSearchParams(location.search).get("project") ?? "");
}

// setProject changes ?project= in place (no new history entry).
export function setProject(project: string): void {
  const u = new URL(location.href);
  if (project) u.searchParams.set("project", project);
  else u.searchParams.delete("project");
  history.replaceState(null, "", u.pathname + u.search);
  window.dispatchEvent(new PopStateEvent("popstate"));
}

// withProject adds ?project= to a console path.
export function withProject(path: string, project: string): string {
  return project ? path + "?project=" + encodeURIComponent(project) : path;
}

export function StatePill({ row }: { row: SkillRow }) {
  return <span className={"pill skill-state st-" + row.state} data-testid="skill-state">{stateText(row)}</span>;
}

// Outcome is the result of the last write: what happened, or why not.
export type Outcome = { kind: "ok" | "error"; text: string; warnings?: string[] } | null;

export function OutcomeLine({ outcome }: { outcome: Outcome }) {
  if (!outcome) return null;
  return (
    <div className={outcome.kind === "error" ? "error skill-outcome" : "skill-outcome ok"} role={outcome.kind === "error" ? "alert" : "status"} data-testid="skill-outcome" data-kind={outcome.kind}>
      <p>{outcome.text}</p>
      {outcome.warnings && outcome.warnings.length > 0 && (
        <>
          <p className="small">The skills service loaded it with warnings:</p>
          <ul className="warnings" data-testid="upload-warnings">{outcome.warnings.map((w, i) => <li key={i}>{w}</li>)}</ul>
        </>
      )}
    </div>
  );
}

// Confirm is a modal dialog: focus starts on Cancel, Escape cancels, Tab
// reaches the action.
export function Confirm({ open, title, children, action, onAnswer }: { open: boolean; title: string; children: ReactNode; action: string; onAnswer: (yes: boolean) => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  return (
    <dialog ref={ref} className="card skill-confirm" aria-labelledby="skill-confirm-title" onCancel={(e) => { e.preventDefault(); onAnswer(false); }}>
      <h2 id="skill-confirm-title">{title}</h2>
      <div>{children}</div>
      <div className="row-actions">
        <button type="button" className="secondary" autoFocus onClick={() => onAnswer(false)}>Cancel</button>
        <button type="button" className="danger" data-testid="confirm-yes" onClick={() => onAnswer(true)}>{action}</button>
      </div>
    </dialog>
  );
}
