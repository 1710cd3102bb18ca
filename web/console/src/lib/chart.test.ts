import assert from "node:assert/strict";
import { test } from "node:test";
import { columnType, planChart } from "./chart.ts";
import type { Table } from "./tables.ts";

const t = (columns: string[], rows: (string | number | null)[][]): Table => ({ columns, rows, source: "json" });

test("categories and numbers make a bar chart with every numeric series", () => {
  const p = planChart(t(["region", "q3", "q4"], [["North", 1, 2], ["South", 3, 4], ["East", 5, 6]]));
  assert.ok(p);
  assert.equal(p.kind, "bar");
  assert.deepEqual(p.series, [1, 2]);
  assert.equal(p.category, 0);
  assert.deepEqual(p.kinds, ["bar", "line"]);
});

test("a time column makes a line chart", () => {
  const p = planChart(t(["month", "revenue"], [["2026-01", 1], ["2026-02", 2], ["2026-03", 3]]));
  assert.ok(p);
  assert.equal(p.kind, "line");
  assert.ok(p.kinds.includes("pie"));
  const y = planChart(t(["year", "revenue", "orders"], [[2024, 1, 5], [2025, 2, 6], [2026, 3, 7]]));
  assert.ok(y);
  assert.equal(y.kind, "line");
  assert.equal(y.category, 0);
  assert.deepEqual(y.series, [1, 2]);
});

test("a few counts over categories make a pie", () => {
  const p = planChart(t(["segment", "customers"], [["SMB", 10], ["Enterprise", 4], ["Consumer", 30]]));
  assert.ok(p);
  assert.equal(p.kind, "pie");
});

test("negative values rule out a pie", () => {
  const p = planChart(t(["segment", "growth"], [["a", -1], ["b", 2]]));
  assert.ok(p);
  assert.deepEqual(p.kinds, ["bar", "line"]);
});

test("no numbers, one row or no label: no chart", () => {
  assert.equal(planChart(t(["a", "b"], [["x", "y"], ["z", "w"]])), null);
  assert.equal(planChart(t(["a", "b"], [["x", 1]])), null);
  assert.equal(planChart(t(["a", "b"], [[1, 2], [3, 4]])), null);
});

test("column types", () => {
  const tb = t(["day", "n", "name", "blank"], [["2026-01-01", 1, "a", null], ["2026-01-02", 2, "b", null]]);
  assert.equal(columnType(tb, 0), "time");
  assert.equal(columnType(tb, 1), "number");
  assert.equal(columnType(tb, 2), "text");
  assert.equal(columnType(tb, 3), "empty");
  assert.equal(columnType(t(["quarter", "v"], [["2025-Q3", 1], ["2025-Q4", 2]]), 0), "time");
});
