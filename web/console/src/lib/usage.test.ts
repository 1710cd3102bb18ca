import assert from "node:assert/strict";
import { test } from "node:test";
import { addDays, dailySeries, formatPercent, isDay, limit, meter, num, toReport, usd, type UsageWindow } from "./usage.ts";
import { axisMax, describeDaily, niceCeil, usageDailyOption } from "./usageChart.ts";
import { rng } from "./testrand.ts";

const w = (period: string, input = 0, output = 0, cost = 0): UsageWindow => ({
  period, costUsd: cost, inputTokens: input, outputTokens: output, modelCalls: 0, reservedUsd: 0, reservedTokens: 0, unpricedTokens: 0,
});

test("the API's JSON becomes numbers: int64 strings, absent zeros, limits kept apart from no limit", () => {
  const r = toReport({
    tenant: "acme",
    day: { period: "2026-12-05", cost_usd: 0.25, input_tokens: "1200", output_tokens: "34", reserved_tokens: "4096" },
    month: { period: "2026-12" },
    budget: { usd_per_day: 0, tokens_per_day: "50000", max_steps_per_run: 7 },
    source: "BUDGET_SOURCE_API",
    history: [{ period: "2026-12-04" }, { period: "2026-12-05", input_tokens: "1200" }],
  });
  assert.equal(r.day.inputTokens, 1200);
  assert.equal(r.day.outputTokens, 34);
  assert.equal(r.day.reservedTokens, 4096);
  assert.equal(r.month.costUsd, 0);
  assert.equal(r.budget.usdPerDay, 0, "a limit of zero is a limit");
  assert.equal(r.budget.usdPerMonth, undefined, "an absent limit is none");
  assert.equal(r.budget.tokensPerDay, 50000);
  assert.equal(r.budget.maxStepsPerRun, 7);
  assert.equal(r.source, "api");
  assert.deepEqual(r.history.map((h) => [h.period, h.inputTokens]), [["2026-12-04", 0], ["2026-12-05", 1200]]);
  const empty = toReport(undefined);
  assert.equal(empty.source, "none");
  assert.deepEqual(empty.history, []);
  assert.equal(num("x"), 0);
  assert.equal(num("-5"), 0);
  assert.equal(num(NaN), 0);
  assert.equal(limit("abc"), undefined);
  assert.equal(limit(-1), undefined);
});

test("a meter gives the percentage, the drawn shares and the level", () => {
  const m = meter(25, 10, 100);
  assert.equal(m.percent, 25);
  assert.equal(m.usedShare, 0.25);
  assert.equal(m.reservedShare, 0.1);
  assert.equal(m.level, "ok");
  assert.equal(meter(70, 15, 100).level, "warn", "used and reserved reach 80%");
  const over = meter(150, 20, 100);
  assert.equal(over.level, "over");
  assert.equal(over.percent, 150);
  assert.equal(over.usedShare, 1);
  assert.equal(over.reservedShare, 0, "the shares never pass the whole bar");
  const none = meter(5, 0, undefined);
  assert.equal(none.level, "none");
  assert.equal(none.percent, undefined);
  const zero = meter(0, 0, 0);
  assert.equal(zero.level, "over", "a limit of zero allows nothing");
  assert.equal(formatPercent(0.05), "<0.1%");
  assert.equal(formatPercent(2.345), "2.3%");
  assert.equal(formatPercent(42.6), "43%");
  assert.equal(formatPercent(Infinity), "over");
});

test("dollars keep the digits small amounts need", () => {
  assert.equal(usd(0), "$0");
  assert.equal(usd(5), "$5.00");
  assert.equal(usd(0.0123), "$0.0123");
  assert.equal(usd(0.000042), "$0.000042");
  assert.equal(usd(1234.4), "$1,234");
});

test("UTC days: adding crosses months and years, and only real days are days", () => {
  assert.equal(addDays("2026-03-01", -1), "2026-02-28");
  assert.equal(addDays("2025-12-31", 1), "2026-01-01");
  assert.equal(addDays("2024-03-01", -1), "2024-02-29");
  assert.ok(isDay("2026-12-05"));
  assert.ok(!isDay("2026-02-30"));
  assert.ok(!isDay("2026-12"));
});

test("the daily series has every day, ending with today, the missing ones zero", () => {
  const s = dailySeries([w("2026-02-27", 100, 10, 0.5), w("2026-03-01", 200, 20, 0.25), w("2026-03-02", 300, 30, 0.125), w("2025-01-01", 9, 9, 9), w("", 5)], 5, "2026-03-02");
  assert.deepEqual(s.days, ["2026-02-26", "2026-02-27", "2026-02-28", "2026-03-01", "2026-03-02"]);
  assert.deepEqual(s.input, [0, 100, 0, 200, 300]);
  assert.deepEqual(s.output, [0, 10, 0, 20, 30]);
  assert.deepEqual(s.cost, [0, 0.5, 0, 0.25, 0.125]);
  const thirty = dailySeries([], 30, "2026-12-05");
  assert.equal(thirty.days.length, 30);
  assert.equal(thirty.days[0], "2026-11-06");
  assert.ok(thirty.input.every((v) => v === 0));
  // Without today, the history's last day ends the series.
  assert.equal(dailySeries([w("2026-01-10", 1)], 3).days.at(-1), "2026-01-10");
});

test("the chart's option: stacked token bars, a cost line, the daily limits as mark lines in view", () => {
  const s = dailySeries([w("2026-12-05", 1000, 200, 0.01)], 30, "2026-12-05");
  const o = usageDailyOption(s, { tokensPerDay: 5000, usdPerDay: 2 }) as { series: { name: string; type: string; stack?: string; data: number[]; markLine?: { data: { yAxis: number }[] } }[]; yAxis: { max?: number }[]; tooltip: { renderMode: string } };
  assert.equal(o.tooltip.renderMode, "richText", "the CSP forbids HTML tooltips");
  assert.deepEqual(o.series.map((x) => [x.type, x.stack ?? ""]), [["bar", "tokens"], ["bar", "tokens"], ["line", ""]]);
  assert.equal(o.series[0]?.data.length, 30);
  assert.equal(o.series[0]?.markLine?.data[0]?.yAxis, 5000);
  assert.equal(o.series[2]?.markLine?.data[0]?.yAxis, 2);
  assert.ok((o.yAxis[0]?.max ?? 0) >= 5000 && (o.yAxis[1]?.max ?? 0) >= 2, "each axis reaches its limit");
  const bare = usageDailyOption(s, {}) as { series: { markLine?: unknown }[] };
  assert.ok(bare.series.every((x) => x.markLine === undefined), "no budget, no lines");
  assert.equal(axisMax([1, 5], undefined), undefined);
  assert.equal(axisMax([1, 5], 2), undefined, "values past the limit: the axis fits them");
  assert.equal(axisMax([1], 5), 6);
  assert.equal(axisMax([100], 29000), 40000);
  assert.deepEqual([niceCeil(0.0042), niceCeil(1), niceCeil(1.01), niceCeil(7), niceCeil(9.5), niceCeil(0)], [0.005, 1, 1.5, 8, 10, 1]);
  assert.equal(axisMax([0, 0], undefined), 1);
  assert.match(describeDaily(s), /1,200 tokens and \$0\.01 in all, on 1 of 30 days/);
});

test("random API answers: the converters never throw and every figure stays a finite, non-negative number", () => {
  const r = rng(2026);
  const junk: unknown[] = [undefined, null, "", "12", "-3", "1e400", "NaN", "abc", 0, -1, 1.5, 1e308, Infinity, true, {}, [], "2026-12-05", "2026-02-30", "BUDGET_SOURCE_API", "BUDGET_SOURCE_FILE"];
  const pick = () => junk[Math.floor(r() * junk.length)];
  const win = () => ({ period: pick(), cost_usd: pick(), input_tokens: pick(), output_tokens: pick(), model_calls: pick(), reserved_usd: pick(), reserved_tokens: pick(), unpriced_tokens: pick() });
  for (let i = 0; i < 1000; i++) {
    const raw = {
      tenant: pick(), day: r() < 0.9 ? win() : pick(), month: win(), source: pick(), as_of: pick(),
      budget: r() < 0.8 ? { usd_per_day: pick(), usd_per_month: pick(), tokens_per_day: pick(), max_steps_per_run: pick(), max_usd_per_run: pick() } : pick(),
      history: r() < 0.8 ? Array.from({ length: Math.floor(r() * 40) }, win) : pick(),
    };
    const rep = toReport(raw as never);
    const figures = [rep.day, rep.month, ...rep.history].flatMap((w) => [w.costUsd, w.inputTokens, w.outputTokens, w.modelCalls, w.reservedUsd, w.reservedTokens, w.unpricedTokens]);
    if (!figures.every((v) => Number.isFinite(v) && v >= 0)) assert.fail("a figure is not a finite non-negative number: " + JSON.stringify(raw));
    if (!Object.values(rep.budget).every((v) => v === undefined || (Number.isFinite(v) && v >= 0))) assert.fail("a bad limit: " + JSON.stringify(raw));
    const days = Math.floor(r() * 70);
    const s = dailySeries(rep.history, days, typeof raw.day === "object" && raw.day ? String((raw.day as { period?: unknown }).period) : undefined);
    assert.equal(s.days.length, days);
    assert.ok(s.days.every(isDay), "every day is a real day");
    assert.equal(new Set(s.days).size, days, "no day twice");
    for (let k = 1; k < s.days.length; k++) assert.equal(addDays(s.days[k - 1] ?? "", 1), s.days[k]);
    const m = meter(rep.day.costUsd, rep.day.reservedUsd, rep.budget.usdPerDay);
    assert.ok(m.usedShare >= 0 && m.reservedShare >= 0 && m.usedShare + m.reservedShare <= 1 + 1e-12, "meter shares out of the bar");
    assert.equal(typeof formatPercent(m.percent), "string");
    const o = usageDailyOption(s, rep.budget) as { series: { data: number[] }[] };
    assert.ok(o.series.every((x) => x.data.length === days && x.data.every(Number.isFinite)));
  }
});
