// The Activity page's ECharts options, built from the pure results of
// activity.ts. Options only (no echarts import): the chart itself is drawn
// by OptionChart, in its own lazy chunk. Tooltips are rich text (the
// console's CSP refuses inline-styled HTML).

import type { Run } from "./api.ts";
import { figures, fmtInt, fmtMs, type Bar, type Timeline, type UsagePoint } from "./activity.ts";

type Opt = Record<string, unknown>;

const COLORS = { plan: "#7c5cc4", step: "#9aa4b5", model: "#2f6fde", tool: "#1d8a4e", wait: "#d08a1a", failed: "#c0392b", retried: "#e67e22" };

export function barColor(b: Bar): string {
  if (b.kind === "tool" && b.failed) return COLORS.failed;
  if (b.kind === "tool" && b.retries > 0) return COLORS.retried;
  if (b.failed) return COLORS.failed;
  return COLORS[b.kind];
}

// barText is a bar's tooltip: what it was, how long it took, how it ended.
export function barText(b: Bar): string {
  const what = b.kind === "tool" ? "tool call " + b.label : b.kind === "wait" ? "waiting for input (" + b.label + ")" : b.label;
  const parts = [what, fmtMs(b.end - b.start) + (b.open ? " so far" : "")];
  if (b.kind === "tool") parts.push(b.failed ? "failed" + (b.detail ? " " + b.detail : "") : b.detail === "cached" ? "ok, cached" : "ok");
  else if (b.failed) parts.push("failed");
  if (b.retries > 0) parts.push(b.retries + (b.retries === 1 ? " retry" : " retries"));
  if (b.kind === "wait" && b.detail) parts.push("answer: " + b.detail);
  if (b.kind === "model" && b.detail) parts.push(b.detail);
  if (b.kind === "plan" && b.detail) parts.push(b.detail);
  return parts.join(" · ");
}

interface RenderApi {
  value: (dim: number) => number;
  coord: (v: number[]) => number[];
  size: (v: number[]) => number[];
  style: (extra?: Opt) => Opt;
}

// timelineOption draws the bars as a Gantt chart: a custom series on a
// value axis of milliseconds since the run's first event, one row per lane.
export function timelineOption(tl: Timeline): Opt {
  const data = tl.bars.map((b, i) => ({
    value: [b.lane, b.start, b.end, i],
    itemStyle: { color: barColor(b), opacity: b.open ? 0.55 : 1, borderColor: b.open ? "#1d2330" : barColor(b), borderType: b.open ? "dashed" : "solid", borderWidth: b.open ? 1 : 0 },
  }));
  return {
    animation: false,
    grid: { left: 8, right: 24, top: 16, bottom: 36, containLabel: true },
    tooltip: {
      trigger: "item",
      renderMode: "richText",
      formatter: (p: { value?: unknown }) => {
        const v = Array.isArray(p.value) ? p.value : [];
        const b = tl.bars[Number(v[3])];
        return b ? barText(b) : "";
      },
    },
    // Ctrl + wheel zooms into the time axis; the wheel alone scrolls the page.
    dataZoom: [{ type: "inside", xAxisIndex: 0, filterMode: "weakFilter", zoomOnMouseWheel: "ctrl", moveOnMouseWheel: false }],
    xAxis: { type: "value", min: 0, name: "ms since the run started", nameLocation: "middle", nameGap: 24, axisLabel: { formatter: (v: number) => fmtMs(v) } },
    yAxis: { type: "category", data: tl.lanes, inverse: true, axisTick: { show: false } },
    series: [
      {
        type: "custom",
        name: "timeline",
        clip: true,
        encode: { x: [1, 2], y: 0 },
        renderItem: (_params: unknown, api: RenderApi) => {
          const lane = api.value(0);
          const s = api.coord([api.value(1), lane]);
          const e = api.coord([api.value(2), lane]);
          const h = (api.size([0, 1])[1] ?? 20) * 0.6;
          const x = s[0] ?? 0;
          const y = (s[1] ?? 0) - h / 2;
          // A bar shorter than the axis can show still gets 2 px.
          return { type: "rect", shape: { x, y, width: Math.max(2, (e[0] ?? x) - x), height: h }, style: api.style() };
        },
        data,
      },
    ],
  };
}

// usageOption: the run's tokens and cost, cumulative after each model call.
export function usageOption(points: UsagePoint[]): Opt {
  const cats = points.map((p) => "call " + p.call);
  return {
    animation: false,
    grid: { left: 8, right: 8, top: 36, bottom: 8, containLabel: true },
    legend: { top: 0 },
    tooltip: { trigger: "axis", renderMode: "richText" },
    xAxis: { type: "category", data: cats },
    yAxis: [
      { type: "value", name: "tokens", axisLabel: { formatter: (v: number) => fmtInt(v) } },
      { type: "value", name: "USD", splitLine: { show: false }, axisLabel: { formatter: (v: number) => "$" + v.toFixed(3) } },
    ],
    series: [
      { type: "bar", name: "input tokens", stack: "tokens", data: points.map((p) => p.inputTokens), itemStyle: { color: "#2f6fde" } },
      { type: "bar", name: "output tokens", stack: "tokens", data: points.map((p) => p.outputTokens), itemStyle: { color: "#8ab4ff" } },
      { type: "line", name: "cost (USD)", yAxisIndex: 1, data: points.map((p) => Number(p.costUsd.toFixed(6))), itemStyle: { color: "#b7791f" } },
    ],
  };
}

// runsOption: tokens (input and output stacked) and cost of each run on
// the page, in the order of the list.
export function runsOption(runs: Run[]): Opt {
  const f = runs.map((r) => figures(r));
  return {
    animation: false,
    grid: { left: 8, right: 8, top: 36, bottom: 8, containLabel: true },
    legend: { top: 0 },
    tooltip: { trigger: "axis", renderMode: "richText" },
    xAxis: { type: "category", data: runs.map((r, i) => "#" + (i + 1) + " " + shortId(r.run_id)), axisLabel: { show: runs.length <= 12 } },
    yAxis: [
      { type: "value", name: "tokens", axisLabel: { formatter: (v: number) => fmtInt(v) } },
      { type: "value", name: "USD", splitLine: { show: false }, axisLabel: { formatter: (v: number) => "$" + v.toFixed(3) } },
    ],
    series: [
      { type: "bar", name: "input tokens", stack: "tokens", data: f.map((x) => x.inputTokens), itemStyle: { color: "#2f6fde" } },
      { type: "bar", name: "output tokens", stack: "tokens", data: f.map((x) => x.outputTokens), itemStyle: { color: "#8ab4ff" } },
      { type: "line", name: "cost (USD)", yAxisIndex: 1, data: f.map((x) => Number(x.costUsd.toFixed(6))), itemStyle: { color: "#b7791f" } },
    ],
  };
}

// shortId is the distinctive tail of a run id.
export function shortId(id: string): string {
  return id.length > 8 ? id.slice(-8) : id;
}
