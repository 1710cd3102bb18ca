// A tool's result: a table found in it is shown as a table or a chart
// (bar, line or pie, picked from the column types, switchable); anything
// else as text.
import { lazy, Suspense, useMemo, useState } from "react";
import { planChart, type ChartKind } from "../lib/chart.ts";
import { detectTable, type Table } from "../lib/tables.ts";

const EChart = lazy(() => import("./EChart.tsx"));

type View = "table" | ChartKind;

export function ResultView({ text }: { text: string }) {
  const table = useMemo(() => detectTable(text), [text]);
  const plan = useMemo(() => (table ? planChart(table) : null), [table]);
  const [view, setView] = useState<View | null>(null);
  if (!table) return <pre className="result">{text}</pre>;
  const current: View = view ?? plan?.kind ?? "table";
  const views: View[] = plan ? [...plan.kinds, "table"] : ["table"];
  return (
    <div className="result-view">
      {views.length > 1 && (
        <div className="switch" role="group" aria-label="Show the result as">
          {views.map((v) => (
            <button key={v} type="button" aria-pressed={v === current} onClick={() => setView(v)} data-view={v}>{v}</button>
          ))}
        </div>
      )}
      {current === "table" || !plan ? (
        <DataTable table={table} />
      ) : (
        <Suspense fallback={<div className="chart loading" role="status">Loading the chart…</div>}>
          <EChart table={table} plan={plan} kind={current} />
        </Suspense>
      )}
    </div>
  );
}

function DataTable({ table }: { table: Table }) {
  return (
    <div className="table-wrap">
      <table>
        <thead><tr>{table.columns.map((c, i) => <th key={i}>{c}</th>)}</tr></thead>
        <tbody>
          {table.rows.map((r, i) => (
            <tr key={i}>{r.map((c, j) => <td key={j} className={typeof c === "number" ? "num" : undefined}>{c === null ? "" : String(c)}</td>)}</tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
