// OverviewMeter shows one figure against its limit: the figures, the
// percentage, and a bar with the used and reserved shares (widths set
// through the CSSOM: the CSP forbids style attributes). Without a limit it
// says so and draws no bar.
import { useEffect, useRef } from "react";
import { formatPercent, type Meter } from "../lib/usage.ts";

export function OverviewMeter({ label, m, format, testId, limitName }: { label: string; m: Meter; format: (v: number) => string; testId: string; limitName: string }) {
  const used = useRef<HTMLSpanElement>(null);
  const reserved = useRef<HTMLSpanElement>(null);
  useEffect(() => {
    if (used.current) used.current.style.width = (m.usedShare * 100).toFixed(2) + "%";
    if (reserved.current) reserved.current.style.width = (m.reservedShare * 100).toFixed(2) + "%";
  }, [m.usedShare, m.reservedShare]);
  const pct = formatPercent(m.percent);
  return (
    <div className={"meter lv-" + m.level} data-testid={testId} data-used={m.used} data-limit={m.limit ?? ""} data-percent={m.percent ?? ""} data-level={m.level}>
      <div className="meter-head">
        <span className="meter-label">{label}</span>
        <span className="meter-figures">
          <strong data-role="used">{format(m.used)}</strong>
          {m.limit !== undefined ? (
            <>
              {" of "}<span data-role="limit">{format(m.limit)}</span>
              <span className="muted small"> {limitName}</span>
              {" · "}<strong data-role="percent">{pct}</strong>
            </>
          ) : (
            <span className="muted" data-role="no-limit"> · no limit</span>
          )}
        </span>
      </div>
      {m.limit !== undefined && (
        <div className="meter-bar" role="meter" aria-label={label} aria-valuemin={0} aria-valuemax={m.limit} aria-valuenow={Math.min(m.used, m.limit)}
          aria-valuetext={`${format(m.used)} of ${format(m.limit)} (${pct})${m.reserved > 0 ? `, ${format(m.reserved)} reserved` : ""}`}>
          <span ref={used} className="meter-used" />
          <span ref={reserved} className="meter-reserved" />
        </div>
      )}
      {m.reserved > 0 && <p className="muted small meter-note" data-role="reserved">{format(m.reserved)} reserved by model calls in progress</p>}
    </div>
  );
}
