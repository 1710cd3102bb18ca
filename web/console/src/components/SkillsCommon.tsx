// What the Skills page's views share: the project (kept in the address as
// ?project=, so a reload or a link keeps it), a skill's state pill, the
// result line of a write.
import { useSyncExternalStore } from "react";
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

