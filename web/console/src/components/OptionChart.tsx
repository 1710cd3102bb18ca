// A chart drawn by Apache ECharts from a complete option, for the pages
// whose charts are not a tool result's table (activity, overview). Loaded
// lazily with OptionChartCore (its own chunk, shared with nothing on the
// chat route), so the chat page does not pay for it.
import { lazy, Suspense } from "react";
import type { ChartClick, ChartOption } from "./OptionChartCore.tsx";

const Core = lazy(() => import("./OptionChartCore.tsx"));

export type { ChartClick, ChartOption };

// label is the chart's accessible name; testId its data-testid. The option
// must not ask for inline-styled HTML tooltips: the console's CSP refuses
// inline styles (use tooltip.renderMode "richText", as chartOption does).
// onClick, when given, is called with the data item a click hit (the
// chart is then only a shortcut: what it opens must also be reachable by
// keyboard elsewhere on the page).
export function OptionChart({ option, label, testId, height, onClick }: { option: ChartOption; label: string; testId?: string; height?: number; onClick?: (c: ChartClick) => void }) {
  return (
    <Suspense fallback={<div className="chart loading" role="status">Loading the chart…</div>}>
      <Core option={option} label={label} testId={testId} height={height} onClick={onClick} />
    </Suspense>
  );
}
