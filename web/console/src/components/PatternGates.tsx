// A pattern's state and its quality gates as chips: each gate passed (✓)
// or failed (✗), with what the pattern has in the chip's title (and, when
// not compact, beside the gate).
import { stateName, stateReason, type Gate, type StateName } from "../lib/patterns.ts";

export function StatePill({ state }: { state: string | undefined }) {
  const s = stateName(state);
  return <span className={"pill pat-state pat-" + (s || "unknown")} data-state={s}>{s || "unknown"}</span>;
}

export function GateChips({ gates, compact = false }: { gates: Gate[]; compact?: boolean }) {
  return (
    <ul className={"pat-gates" + (compact ? " compact" : "")} aria-label="Quality gates">
      {gates.map((g) => (
        <li key={g.key} className={"pat-gate " + (g.passed ? "pass" : "fail")} data-gate={g.key} data-passed={g.passed} title={g.detail}>
          <span aria-hidden="true">{g.passed ? "✓" : "✗"}</span> {g.label}
          <span className="sr-only">{g.passed ? " passed" : " failed"}{compact ? ": " + g.detail : ""}</span>
          {!compact && <span className="pat-gate-detail"> — {g.detail}</span>}
        </li>
      ))}
    </ul>
  );
}

// StateWhy is the state with the reason its gates give.
export function StateWhy({ state, gates }: { state: string | undefined; gates: Gate[] }) {
  const s: StateName | "" = stateName(state);
  return (
    <span className="pat-why">
      <StatePill state={state} /> <span className="muted small" data-testid="state-reason">{stateReason(s, gates)}</span>
    </span>
  );
}
