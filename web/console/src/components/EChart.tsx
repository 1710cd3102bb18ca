// The chart of a table, drawn by Apache ECharts. Loaded lazily (its own
// chunk): only the bar, line and pie charts and the components they use
// are bundled (echarts/core, tree-shaken).
import { useEffect, useRef } from "react";
import * as echarts from "echarts/core";
import { BarChart, LineChart, PieChart } from "echarts/charts";
import { GridComponent, LegendComponent, TooltipComponent } from "echarts/components";
import { CanvasRenderer } from "echarts/renderers";
import type { ChartKind, ChartPlan } from "../lib/chart.ts";
import type { Table } from "../lib/tables.ts";

echarts.use([BarChart, LineChart, PieChart, GridComponent, LegendComponent, TooltipComponent, CanvasRenderer]);

export function chartOption(t: Table, plan: ChartPlan, kind: ChartKind): echarts.EChartsCoreOption {
  const labels = t.rows.map((r) => String(r[plan.category] ?? ""));
  // The tooltip is drawn on the canvas (richText): no inline styles, which
  // the console's Content-Security-Policy does not allow.
  const tooltip = { renderMode: "richText", trigger: kind === "pie" ? "item" : "axis" };
  if (kind === "pie") {
    const col = plan.series[0] ?? 0;
    return {
      animation: false,
      tooltip,
      legend: { type: "scroll", bottom: 0 },
      series: [{ type: "pie", name: t.columns[col], radius: ["30%", "65%"], data: t.rows.map((r, i) => ({ name: labels[i], value: typeof r[col] === "number" ? r[col] : 0 })) }],
    };
  }
  return {
    animation: false,
    tooltip,
    legend: { type: "scroll", bottom: 0 },
    grid: { left: 8, right: 16, top: 16, bottom: 40, containLabel: true },
    xAxis: { type: "category", data: labels },
    yAxis: { type: "value" },
    series: plan.series.map((c) => ({ type: kind, name: t.columns[c], data: t.rows.map((r) => (typeof r[c] === "number" ? r[c] : null)) })),
  };
}

export default function EChart({ table, plan, kind }: { table: Table; plan: ChartPlan; kind: ChartKind }) {
  const el = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const node = el.current;
    if (!node) return undefined;
    const chart = echarts.init(node, undefined, { renderer: "canvas" });
    chart.setOption(chartOption(table, plan, kind));
    const ro = new ResizeObserver(() => chart.resize());
    ro.observe(node);
    return () => {
      ro.disconnect();
      chart.dispose();
    };
  }, [table, plan, kind]);
  return <div ref={el} className="chart" data-testid="chart" data-kind={kind} role="img" aria-label={kind + " chart of " + plan.series.map((c) => table.columns[c]).join(", ") + " by " + table.columns[plan.category]} />;
}
