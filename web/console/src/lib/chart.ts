// Which chart shows a table: the column types decide. A table with a
// category (text) or time column and numeric columns is a bar chart, or a
// line chart when the category column is time-like (dates, years,
// quarters, months) with more than two points; one numeric column over a
// few categories that add up to a whole (shares, counts) may also be a pie.
// Pure functions: unit-tested with node:test.

import type { Cell, Table } from "./tables.ts";

export type ChartKind = "bar" | "line" | "pie";

export interface ChartPlan {
  kind: ChartKind; // the one picked
  kinds: ChartKind[]; // the ones that make sense, for the switch
  category: number; // index of the x / slice column
  series: number[]; // indexes of the numeric columns shown
}

export type ColumnType = "number" | "time" | "text" | "empty";

const TIME_NAME = /(^|_|\b)(date|day|week|month|quarter|year|period|time|ts|hour)(_|\b|$)/i;
const TIME_VALUE = /^(\d{4}(-\d{2}(-\d{2}([T ][\d:.]+Z?)?)?)?|\d{4}-?Q[1-4]|Q[1-4][ -]?\d{4}|\d{4}-W\d{2})$/i;

export function columnType(t: Table, col: number): ColumnType {
  let numbers = 0;
  let times = 0;
  let filled = 0;
  for (const row of t.rows) {
    const c: Cell | undefined = row[col];
    if (c === null || c === undefined || c === "") continue;
    filled++;
    if (typeof c === "number") {
      numbers++;
      if (Number.isInteger(c) && c >= 1900 && c <= 2200) times++;
    } else if (TIME_VALUE.test(c.trim())) {
      times++;
    }
  }
  if (filled === 0) return "empty";
  const name = t.columns[col] ?? "";
  if (times === filled && (TIME_NAME.test(name) || numbers < filled)) return "time";
  if (numbers === filled) return TIME_NAME.test(name) && times === filled ? "time" : "number";
  return "text";
}

// planChart picks the chart for t, or null when t cannot be charted (no
// numeric column, or fewer than two rows, or nothing to label them by).
export function planChart(t: Table): ChartPlan | null {
  if (t.rows.length < 2 || t.columns.length < 2) return null;
  const types = t.columns.map((_, i) => columnType(t, i));
  let category = types.findIndex((x) => x === "time");
  if (category < 0) category = types.findIndex((x) => x === "text");
  // Numeric ids (a first column of integers named *_id, or "id") label too.
  if (category < 0 && /(^|_)id$/i.test(t.columns[0] ?? "")) category = 0;
  if (category < 0) return null;
  const series = types.flatMap((x, i) => (x === "number" && i !== category && !/(^|_)id$/i.test(t.columns[i] ?? "") ? [i] : []));
  if (series.length === 0) return null;
  const time = types[category] === "time";
  const kinds: ChartKind[] = ["bar", "line"];
  const first = series[0] ?? 0;
  const pieOK = series.length === 1 && t.rows.length <= 12 && t.rows.every((r) => typeof r[first] !== "number" || (r[first] as number) >= 0);
  if (pieOK) kinds.push("pie");
  let kind: ChartKind = "bar";
  if (time && t.rows.length > 2) kind = "line";
  else if (pieOK && !time && t.rows.length <= 6 && /(share|percent|pct|ratio|count|orders|customers|number)/i.test(t.columns[first] ?? "")) kind = "pie";
  return { kind, kinds, category, series };
}
