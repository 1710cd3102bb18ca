// The daily usage chart's ECharts option: input and output tokens as
// stacked bars (left axis), cost as a line (right axis), and the daily
// limits as mark lines on their axis (each axis reaching its limit, so the
// line is always in view). Pure: unit-tested with node:test.
import type { Budget, DailySeries } from "./usage.ts";
import { tokens, usd } from "./usage.ts";

export const SERIES_COLORS = { input: "#2f6fde", output: "#8ab4ff", cost: "#b7791f", limit: "#c0392b" };

// niceCeil is the round number at or above v: 1, 1.5, 2, 2.5, 3, 4, 5, 6,
// 8 or 10 times a power of ten.
export function niceCeil(v: number): number {
  if (!(v > 0) || !Number.isFinite(v)) return 1;
  const mag = Math.pow(10, Math.floor(Math.log10(v)));
  for (const f of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) {
    if (f * mag >= v * (1 - 1e-12)) return f * mag;
  }
  return 10 * mag;
}

// Extent of an axis holding values and, when set, a limit line: a round
// number a little above the limit, so that its line is in view; undefined
// (ECharts decides) when the values reach past the limit.
export function axisMax(values: readonly number[], lim: number | undefined): number | undefined {
  const top = Math.max(0, ...values);
  if (lim !== undefined && lim > 0 && lim >= top) return niceCeil(lim * 1.05);
  return top === 0 ? 1 : undefined; // an empty axis still shows a scale
}

// markLine draws a limit; the token limit's label sits at the start of its
// line, the cost limit's at the end, so that the two never overlap.
function markLine(value: number, name: string, label: string, position: "insideStartTop" | "insideEndTop") {
  return {
    symbol: "none",
    silent: true,
    lineStyle: { color: SERIES_COLORS.limit, type: "dashed", width: 1.5 },
    label: { formatter: label, position, color: SERIES_COLORS.limit },
    data: [{ name, yAxis: value }],
  };
}

// usageDailyOption is the option for s; budget's usdPerDay and tokensPerDay
// become mark lines.
export function usageDailyOption(s: DailySeries, budget: Pick<Budget, "usdPerDay" | "tokensPerDay">): Record<string, unknown> {
  const totals = s.input.map((v, i) => v + (s.output[i] ?? 0));
  const tokMax = axisMax(totals, budget.tokensPerDay);
  const costMax = axisMax(s.cost, budget.usdPerDay);
  return {
    animation: false,
    grid: { left: 64, right: 72, top: 40, bottom: 36 },
    legend: { top: 0, data: ["Input tokens", "Output tokens", "Cost (USD)"] },
    tooltip: { trigger: "axis", renderMode: "richText", axisPointer: { type: "shadow" } },
    xAxis: { type: "category", data: s.days.map((d) => d.slice(5)), axisLabel: { hideOverlap: true } },
    yAxis: [
      { type: "value", name: "tokens", min: 0, ...(tokMax !== undefined ? { max: tokMax } : {}), axisLabel: { formatter: (v: number) => compact(v) } },
      { type: "value", name: "USD", min: 0, ...(costMax !== undefined ? { max: costMax } : {}), splitLine: { show: false }, axisLabel: { formatter: (v: number) => usd(v) } },
    ],
    series: [
      {
        name: "Input tokens", type: "bar", stack: "tokens", yAxisIndex: 0, data: s.input, itemStyle: { color: SERIES_COLORS.input },
        ...(budget.tokensPerDay !== undefined ? { markLine: markLine(budget.tokensPerDay, "tokens_per_day", "tokens/day " + tokens(budget.tokensPerDay), "insideStartTop") } : {}),
      },
      { name: "Output tokens", type: "bar", stack: "tokens", yAxisIndex: 0, data: s.output, itemStyle: { color: SERIES_COLORS.output } },
      {
        name: "Cost (USD)", type: "line", yAxisIndex: 1, data: s.cost, symbolSize: 5, itemStyle: { color: SERIES_COLORS.cost }, lineStyle: { color: SERIES_COLORS.cost },
        ...(budget.usdPerDay !== undefined ? { markLine: markLine(budget.usdPerDay, "usd_per_day", "USD/day " + usd(budget.usdPerDay), "insideEndTop") } : {}),
      },
    ],
  };
}

// compact writes a token count short: 950, 12k, 3.4M.
export function compact(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e9) return +(v / 1e9).toFixed(1) + "G";
  if (a >= 1e6) return +(v / 1e6).toFixed(1) + "M";
  if (a >= 1e3) return +(v / 1e3).toFixed(1) + "k";
  return String(Math.round(v));
}

// describeDaily is the chart's accessible summary.
export function describeDaily(s: DailySeries): string {
  const total = s.input.reduce((a, v) => a + v, 0) + s.output.reduce((a, v) => a + v, 0);
  const cost = s.cost.reduce((a, v) => a + v, 0);
  const active = s.days.filter((_, i) => (s.input[i] ?? 0) + (s.output[i] ?? 0) + (s.cost[i] ?? 0) > 0).length;
  const first = s.days[0] ?? "";
  const last = s.days[s.days.length - 1] ?? "";
  return `Tokens and cost per UTC day from ${first} to ${last}: ${tokens(total)} tokens and ${usd(cost)} in all, on ${active} of ${s.days.length} days.`;
}
